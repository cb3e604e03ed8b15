/*
 * latscope portable core: the fast track's acceptance test.
 * Ref: IEEE Std 802.3-2018 3.2.3, RFC 791, RFC 768, RFC 1071, RFC 1122 3.2.1.3.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/fast.h"

#include <string.h>

bool ls_udp_checksum_ok_sum(const struct ls_udp_frame *f, uint16_t udp_cksum_field,
			    uint32_t udp_sum)
{
	uint16_t udp_len = (uint16_t)(f->payload_len + LS_UDP_HDR_LEN);
	uint8_t pseudo[12];

	if (udp_cksum_field == 0u) {
		return true; /* sender did not compute one (allowed over IPv4) */
	}
	memcpy(&pseudo[0], f->src_ip, 4);
	memcpy(&pseudo[4], f->dst_ip, 4);
	pseudo[8] = 0;
	pseudo[9] = LS_IPPROTO_UDP;
	pseudo[10] = (uint8_t)(udp_len >> 8);
	pseudo[11] = (uint8_t)udp_len;
	return ls_inet_fold(ls_inet_sum(pseudo, sizeof(pseudo), udp_sum)) == 0u;
}

bool ls_udp_checksum_ok(const uint8_t *frame, const struct ls_udp_frame *f)
{
	const uint8_t *udp = &frame[f->l4_offset];
	uint16_t field = (uint16_t)(((uint16_t)udp[6] << 8) | udp[7]);

	return ls_udp_checksum_ok_sum(f, field,
				      ls_inet_sum(udp, (size_t)f->payload_len + LS_UDP_HDR_LEN, 0));
}

static bool is_group_mac(const uint8_t *mac)
{
	return (mac[0] & 0x01u) != 0u; /* I/G bit: multicast, broadcast included */
}

static bool src_ip_answerable(const uint8_t *ip, const uint8_t *ours)
{
	static const uint8_t zero[4] = {0, 0, 0, 0};

	if (memcmp(ip, ours, 4) == 0 || memcmp(ip, zero, 4) == 0) {
		return false;
	}
	if (ip[0] == 127u || ip[0] >= 224u) { /* loopback; multicast, reserved, broadcast */
		return false;
	}
	return true;
}

enum ls_fast_verdict ls_fast_check_headers(const uint8_t *hdr, size_t hdr_len, size_t frame_len,
					   const struct ls_fast_node *node,
					   struct ls_udp_frame *out)
{
	struct ls_udp_frame f;
	enum ls_class cls;

	if (hdr == NULL || node == NULL) {
		return LS_FAST_NOT_UDP;
	}
	cls = ls_classify_udp(hdr, hdr_len, frame_len, node->port, &f);
	if (cls == LS_CLASS_OTHER_PORT) {
		return LS_FAST_OTHER_PORT;
	}
	if (cls != LS_CLASS_MATCH) {
		return LS_FAST_NOT_UDP;
	}
	if (f.has_vlan) {
		return LS_FAST_VLAN;
	}
	if (memcmp(&hdr[0], node->mac, 6) != 0 || is_group_mac(&hdr[0])) {
		return LS_FAST_NOT_OUR_MAC;
	}
	if (is_group_mac(&hdr[6])) {
		return LS_FAST_BAD_SRC_MAC;
	}
	if (memcmp(f.dst_ip, node->ip, 4) != 0) {
		return LS_FAST_NOT_OUR_IP;
	}
	if (!src_ip_answerable(f.src_ip, node->ip)) {
		return LS_FAST_BAD_SRC_IP;
	}
	size_t ihl = (size_t)(f.l4_offset - f.l3_offset);

	if (ls_inet_fold(ls_inet_sum(&hdr[f.l3_offset], ihl, 0)) != 0u) {
		return LS_FAST_BAD_IP_CSUM;
	}
	if (out != NULL) {
		*out = f;
	}
	return LS_FAST_ACCEPT;
}

enum ls_fast_verdict ls_fast_accept(const uint8_t *frame, size_t frame_len,
				    const struct ls_fast_node *node, struct ls_udp_frame *out)
{
	struct ls_udp_frame f;
	enum ls_fast_verdict v = ls_fast_check_headers(frame, frame_len, frame_len, node, &f);

	if (v != LS_FAST_ACCEPT) {
		return v;
	}
	if (!ls_udp_checksum_ok(frame, &f)) {
		return LS_FAST_BAD_UDP_CSUM;
	}
	if (out != NULL) {
		*out = f;
	}
	return LS_FAST_ACCEPT;
}

const char *ls_fast_verdict_name(enum ls_fast_verdict v)
{
	static const char *const names[LS_FAST_COUNT] = {
		[LS_FAST_ACCEPT] = "accept",
		[LS_FAST_NOT_UDP] = "not-udp",
		[LS_FAST_VLAN] = "vlan",
		[LS_FAST_OTHER_PORT] = "other-port",
		[LS_FAST_NOT_OUR_MAC] = "not-our-mac",
		[LS_FAST_BAD_SRC_MAC] = "bad-src-mac",
		[LS_FAST_NOT_OUR_IP] = "not-our-ip",
		[LS_FAST_BAD_SRC_IP] = "bad-src-ip",
		[LS_FAST_BAD_IP_CSUM] = "bad-ip-csum",
		[LS_FAST_BAD_UDP_CSUM] = "bad-udp-csum",
	};

	if ((unsigned int)v >= LS_FAST_COUNT) {
		return "invalid";
	}
	return names[v];
}
