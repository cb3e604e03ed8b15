/*
 * latscope portable core: test-traffic payload header.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/traffic.h"

bool ls_traffic_parse(const uint8_t *p, size_t len, struct ls_traffic_hdr *out)
{
	if (p == NULL || len < LS_TRAFFIC_HDR_LEN ||
	    (((uint16_t)p[0] << 8) | p[1]) != LS_TRAFFIC_MAGIC) {
		return false;
	}
	if (out != NULL) {
		uint64_t t = 0;

		out->run_id = (uint16_t)(((uint16_t)p[2] << 8) | p[3]);
		out->seq = ((uint32_t)p[4] << 24) | ((uint32_t)p[5] << 16) |
			   ((uint32_t)p[6] << 8) | p[7];
		for (int i = 0; i < 8; i++) {
			t = (t << 8) | p[8 + i];
		}
		out->intended_ns = t;
	}
	return true;
}

bool ls_traffic_seq(const uint8_t *p, size_t len, uint32_t *seq)
{
	if (p == NULL || seq == NULL || len < 8u ||
	    (((uint16_t)p[0] << 8) | p[1]) != LS_TRAFFIC_MAGIC) {
		return false;
	}
	*seq = ((uint32_t)p[4] << 24) | ((uint32_t)p[5] << 16) | ((uint32_t)p[6] << 8) | p[7];
	return true;
}

bool ls_traffic_write(uint8_t *p, size_t len, const struct ls_traffic_hdr *h)
{
	if (p == NULL || h == NULL || len < LS_TRAFFIC_HDR_LEN) {
		return false;
	}
	p[0] = (uint8_t)(LS_TRAFFIC_MAGIC >> 8);
	p[1] = (uint8_t)LS_TRAFFIC_MAGIC;
	p[2] = (uint8_t)(h->run_id >> 8);
	p[3] = (uint8_t)h->run_id;
	for (int i = 0; i < 4; i++) {
		p[4 + i] = (uint8_t)(h->seq >> (24 - 8 * i));
	}
	for (int i = 0; i < 8; i++) {
		p[8 + i] = (uint8_t)(h->intended_ns >> (56 - 8 * i));
	}
	return true;
}
