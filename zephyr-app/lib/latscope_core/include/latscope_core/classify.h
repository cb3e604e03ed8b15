/*
 * latscope portable core: Ethernet II / 802.1Q / IPv4 / UDP header classifier.
 *
 * Ref: IEEE Std 802.3-2018 clause 3 (MAC frame), IEEE Std 802.1Q-2018 clause 9 (VLAN tag),
 *      RFC 791 (IPv4), RFC 768 (UDP), RFC 1071 (Internet checksum).
 *
 * No kernel headers: this file is built by the Zephyr app and by the host unit tests alike.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_CLASSIFY_H_
#define LATSCOPE_CORE_CLASSIFY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LS_ETH_HDR_LEN     14u
#define LS_VLAN_TAG_LEN    4u
#define LS_IPV4_MIN_HDR    20u
#define LS_IPV4_MAX_HDR    60u
#define LS_UDP_HDR_LEN     8u
/** Bytes of a frame the classifier may need: Ethernet + VLAN + largest IPv4 header + UDP. */
#define LS_CLASSIFY_MAX_HDR (LS_ETH_HDR_LEN + LS_VLAN_TAG_LEN + LS_IPV4_MAX_HDR + LS_UDP_HDR_LEN)

#define LS_ETHERTYPE_IPV4  0x0800u
#define LS_ETHERTYPE_VLAN  0x8100u
#define LS_IPPROTO_UDP     17u

/** Result of classifying one frame. Only LS_CLASS_MATCH fills every field of ls_udp_frame. */
enum ls_class {
	LS_CLASS_MATCH = 0,   /**< IPv4/UDP to the wanted port (or any port if it is 0) */
	LS_CLASS_TRUNCATED,   /**< frame ends inside a header or before the lengths it declares */
	LS_CLASS_NOT_IPV4,    /**< EtherType (after an optional VLAN tag) is not IPv4 */
	LS_CLASS_BAD_IPV4,    /**< IP version != 4, IHL < 5, or total length < header length */
	LS_CLASS_FRAGMENT,    /**< more-fragments flag or non-zero fragment offset */
	LS_CLASS_NOT_UDP,     /**< IPv4 protocol is not UDP */
	LS_CLASS_BAD_UDP,     /**< UDP length < 8 or larger than the IPv4 payload */
	LS_CLASS_OTHER_PORT,  /**< valid UDP to another destination port */
	LS_CLASS_COUNT
};

/** Offsets and fields of a classified IPv4/UDP frame (offsets from the first MAC byte). */
struct ls_udp_frame {
	bool has_vlan;
	uint16_t vlan_tci;
	uint16_t l3_offset;       /**< first byte of the IPv4 header */
	uint16_t l4_offset;       /**< first byte of the UDP header */
	uint16_t payload_offset;  /**< first byte of the UDP payload */
	uint16_t payload_len;     /**< UDP length - 8 */
	uint16_t ip_total_len;
	uint16_t src_port;
	uint16_t dst_port;
	uint8_t src_ip[4];
	uint8_t dst_ip[4];
};

/**
 * Classify a frame whose first @p hdr_len bytes are in @p hdr and whose total length (without FCS)
 * is @p frame_len (>= hdr_len; the rest need not be contiguous). Never reads beyond hdr_len bytes.
 *
 * @param port wanted UDP destination port, host order; 0 matches any port.
 * @param out  filled on LS_CLASS_MATCH and LS_CLASS_OTHER_PORT; may be NULL.
 */
enum ls_class ls_classify_udp(const uint8_t *hdr, size_t hdr_len, size_t frame_len,
			      uint16_t port, struct ls_udp_frame *out);

/** Short name of a class, e.g. "match", "truncated". Never NULL. */
const char *ls_class_name(enum ls_class cls);

/** RFC 1071 one's-complement sum of @p len bytes added to @p sum (not yet folded/inverted). */
uint32_t ls_inet_sum(const uint8_t *data, size_t len, uint32_t sum);

/** Fold and invert an ls_inet_sum() result into a 16-bit Internet checksum (host order). */
uint16_t ls_inet_fold(uint32_t sum);

/**
 * Streaming RFC 1071 sum over data that arrives in pieces of any length (e.g. a chain of
 * network buffers): the result equals ls_inet_sum() over the concatenation.
 */
struct ls_inet_acc {
	uint32_t sum;
	uint8_t odd;      /**< an odd number of bytes has been added so far */
	uint8_t pending;  /**< the last byte when odd (high half of the next 16-bit word) */
};

static inline void ls_inet_acc_init(struct ls_inet_acc *acc)
{
	acc->sum = 0;
	acc->odd = 0;
	acc->pending = 0;
}

/** Add @p len bytes to the running sum. */
void ls_inet_acc_add(struct ls_inet_acc *acc, const uint8_t *data, size_t len);

/** The sum so far, as ls_inet_sum() would return it (ready for ls_inet_fold()). */
uint32_t ls_inet_acc_sum(const struct ls_inet_acc *acc);

/**
 * Cheap pre-selection for markers, a few byte compares: an untagged IPv4 frame without options
 * carrying UDP. Returns true and the destination port and UDP payload length from the UDP
 * header (not validated: the full classifier runs afterwards); false otherwise.
 */
bool ls_peek_udp(const uint8_t *hdr, size_t hdr_len, uint16_t *dst_port, uint16_t *payload_len);

/**
 * Turn a classified request frame into its echo reply in place: swap MAC addresses, IPv4
 * addresses and UDP ports, set TTL to 64, recompute the IPv4 header checksum and set the UDP
 * checksum to 0 ("not computed", allowed for IPv4 by RFC 768). The payload is left as it is.
 * @p hdr must hold at least f->payload_offset bytes. Returns 0, or -1 if hdr_len is too short.
 */
int ls_udp_make_reply(uint8_t *hdr, size_t hdr_len, const struct ls_udp_frame *f);

/**
 * Compute the UDP checksum of a reply made by ls_udp_make_reply() and write it into its header,
 * as the stack's send path does for every datagram (RFC 768: pseudo-header, UDP header with the
 * checksum field taken as 0, payload; a computed 0 is sent as 0xFFFF). @p payload_sum is
 * ls_inet_sum()/ls_inet_acc over the f->payload_len payload bytes (which may sit in a buffer
 * chain). Returns the value written (host order), or 0 if hdr_len is too short.
 */
uint16_t ls_udp_fill_checksum(uint8_t *hdr, size_t hdr_len, const struct ls_udp_frame *f,
			      uint32_t payload_sum);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_CLASSIFY_H_ */
