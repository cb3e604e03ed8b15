/*
 * latscope portable core: Ethernet II / 802.1Q / IPv4 / UDP header classifier.
 * Ref: IEEE Std 802.3-2018 clause 3, IEEE Std 802.1Q-2018 clause 9, RFC 791, RFC 768, RFC 1071.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/classify.h"

#include <string.h>

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

enum ls_class ls_classify_udp(const uint8_t *hdr, size_t hdr_len, size_t frame_len,
			      uint16_t port, struct ls_udp_frame *out)
{
	struct ls_udp_frame f;
	size_t off = LS_ETH_HDR_LEN;
	uint16_t ethertype;

	memset(&f, 0, sizeof(f));
	if (hdr == NULL || hdr_len > frame_len) {
		return LS_CLASS_TRUNCATED;
	}
	if (hdr_len < LS_ETH_HDR_LEN) {
		return LS_CLASS_TRUNCATED;
	}
	ethertype = rd16(&hdr[12]);
	if (ethertype == LS_ETHERTYPE_VLAN) {
		if (hdr_len < LS_ETH_HDR_LEN + LS_VLAN_TAG_LEN) {
			return LS_CLASS_TRUNCATED;
		}
		f.has_vlan = true;
		f.vlan_tci = rd16(&hdr[14]);
		ethertype = rd16(&hdr[16]);
		off += LS_VLAN_TAG_LEN;
	}
	if (ethertype != LS_ETHERTYPE_IPV4) {
		return LS_CLASS_NOT_IPV4;
	}
	if (hdr_len < off + LS_IPV4_MIN_HDR) {
		return LS_CLASS_TRUNCATED;
	}

	const uint8_t *ip = &hdr[off];
	size_t ihl = (size_t)(ip[0] & 0x0fu) * 4u;

	if ((ip[0] >> 4) != 4u || ihl < LS_IPV4_MIN_HDR) {
		return LS_CLASS_BAD_IPV4;
	}
	f.ip_total_len = rd16(&ip[2]);
	if (f.ip_total_len < ihl) {
		return LS_CLASS_BAD_IPV4;
	}
	/* Frames may carry padding after the datagram, never less than it declares. */
	if (off + (size_t)f.ip_total_len > frame_len) {
		return LS_CLASS_TRUNCATED;
	}
	if ((rd16(&ip[6]) & 0x3fffu) != 0u) { /* MF flag or fragment offset */
		return LS_CLASS_FRAGMENT;
	}
	if (ip[9] != LS_IPPROTO_UDP) {
		return LS_CLASS_NOT_UDP;
	}
	if (hdr_len < off + ihl + LS_UDP_HDR_LEN) {
		return LS_CLASS_TRUNCATED;
	}
	if (f.ip_total_len < ihl + LS_UDP_HDR_LEN) {
		return LS_CLASS_BAD_UDP;
	}

	const uint8_t *udp = &ip[ihl];
	uint16_t udp_len = rd16(&udp[4]);

	if (udp_len < LS_UDP_HDR_LEN || udp_len > f.ip_total_len - ihl) {
		return LS_CLASS_BAD_UDP;
	}
	f.l3_offset = (uint16_t)off;
	f.l4_offset = (uint16_t)(off + ihl);
	f.payload_offset = (uint16_t)(off + ihl + LS_UDP_HDR_LEN);
	f.payload_len = (uint16_t)(udp_len - LS_UDP_HDR_LEN);
	f.src_port = rd16(&udp[0]);
	f.dst_port = rd16(&udp[2]);
	memcpy(f.src_ip, &ip[12], 4);
	memcpy(f.dst_ip, &ip[16], 4);
	if (out != NULL) {
		*out = f;
	}
	if (port != 0u && f.dst_port != port) {
		return LS_CLASS_OTHER_PORT;
	}
	return LS_CLASS_MATCH;
}

const char *ls_class_name(enum ls_class cls)
{
	static const char *const names[LS_CLASS_COUNT] = {
		[LS_CLASS_MATCH] = "match",
		[LS_CLASS_TRUNCATED] = "truncated",
		[LS_CLASS_NOT_IPV4] = "not-ipv4",
		[LS_CLASS_BAD_IPV4] = "bad-ipv4",
		[LS_CLASS_FRAGMENT] = "fragment",
		[LS_CLASS_NOT_UDP] = "not-udp",
		[LS_CLASS_BAD_UDP] = "bad-udp",
		[LS_CLASS_OTHER_PORT] = "other-port",
	};

	if ((unsigned int)cls >= LS_CLASS_COUNT) {
		return "invalid";
	}
	return names[cls];
}

uint32_t ls_inet_sum(const uint8_t *data, size_t len, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		sum += rd16(&data[i]);
		sum = (sum & 0xffffu) + (sum >> 16);
	}
	if (i < len) {
		sum += (uint32_t)data[i] << 8;
		sum = (sum & 0xffffu) + (sum >> 16);
	}
	return sum;
}

uint16_t ls_inet_fold(uint32_t sum)
{
	while (sum >> 16) {
		sum = (sum & 0xffffu) + (sum >> 16);
	}
	return (uint16_t)~sum;
}

int ls_udp_make_reply(uint8_t *hdr, size_t hdr_len, const struct ls_udp_frame *f)
{
	uint8_t tmp[6];

	if (hdr == NULL || f == NULL || hdr_len < f->payload_offset ||
	    f->l4_offset < f->l3_offset + LS_IPV4_MIN_HDR || f->l3_offset < LS_ETH_HDR_LEN) {
		return -1;
	}
	uint8_t *ip = &hdr[f->l3_offset];
	uint8_t *udp = &hdr[f->l4_offset];
	size_t ihl = (size_t)(f->l4_offset - f->l3_offset);

	memcpy(tmp, &hdr[0], 6);
	memcpy(&hdr[0], &hdr[6], 6);
	memcpy(&hdr[6], tmp, 6);
	memcpy(tmp, &ip[12], 4);
	memcpy(&ip[12], &ip[16], 4);
	memcpy(&ip[16], tmp, 4);
	memcpy(tmp, &udp[0], 2);
	memcpy(&udp[0], &udp[2], 2);
	memcpy(&udp[2], tmp, 2);
	ip[8] = 64;            /* TTL */
	wr16(&ip[10], 0);
	wr16(&ip[10], ls_inet_fold(ls_inet_sum(ip, ihl, 0)));
	wr16(&udp[6], 0);      /* RFC 768: zero means "no checksum" over IPv4 */
	return 0;
}

uint16_t ls_udp_fill_checksum(uint8_t *hdr, size_t hdr_len, const struct ls_udp_frame *f,
			      uint32_t payload_sum)
{
	if (hdr == NULL || f == NULL || hdr_len < f->payload_offset ||
	    f->l4_offset < f->l3_offset + LS_IPV4_MIN_HDR) {
		return 0;
	}
	uint8_t *ip = &hdr[f->l3_offset];
	uint8_t *udp = &hdr[f->l4_offset];
	uint16_t udp_len = (uint16_t)(f->payload_len + LS_UDP_HDR_LEN);
	uint8_t pseudo[12];

	memcpy(&pseudo[0], &ip[12], 8); /* source and destination address */
	pseudo[8] = 0;
	pseudo[9] = LS_IPPROTO_UDP;
	wr16(&pseudo[10], udp_len);
	wr16(&udp[6], 0);
	uint32_t sum = ls_inet_sum(pseudo, sizeof(pseudo), payload_sum);
	uint16_t csum = ls_inet_fold(ls_inet_sum(udp, LS_UDP_HDR_LEN, sum));

	if (csum == 0u) {
		csum = 0xFFFFu; /* RFC 768: a computed zero is transmitted as all ones */
	}
	wr16(&udp[6], csum);
	return csum;
}

void ls_inet_acc_add(struct ls_inet_acc *acc, const uint8_t *data, size_t len)
{
	size_t i = 0;

	if (len == 0u) {
		return;
	}
	if (acc->odd) {
		uint8_t word[2] = {acc->pending, data[0]};

		acc->sum = ls_inet_sum(word, 2, acc->sum);
		acc->odd = 0;
		i = 1;
	}
	size_t even = (len - i) & ~(size_t)1u;

	acc->sum = ls_inet_sum(&data[i], even, acc->sum);
	i += even;
	if (i < len) {
		acc->pending = data[i];
		acc->odd = 1;
	}
}

uint32_t ls_inet_acc_sum(const struct ls_inet_acc *acc)
{
	if (acc->odd) {
		uint8_t last = acc->pending;

		return ls_inet_sum(&last, 1, acc->sum);
	}
	return acc->sum;
}

bool ls_peek_udp(const uint8_t *hdr, size_t hdr_len, uint16_t *dst_port, uint16_t *payload_len)
{
	if (hdr == NULL || hdr_len < LS_ETH_HDR_LEN + LS_IPV4_MIN_HDR + LS_UDP_HDR_LEN ||
	    hdr[12] != 0x08u || hdr[13] != 0x00u || hdr[14] != 0x45u || hdr[23] != LS_IPPROTO_UDP) {
		return false;
	}
	uint16_t udp_len = rd16(&hdr[38]);

	*dst_port = rd16(&hdr[36]);
	*payload_len = (uint16_t)(udp_len >= LS_UDP_HDR_LEN ? udp_len - LS_UDP_HDR_LEN : 0u);
	return true;
}
