/*
 * latscope portable core: the fast track's acceptance test. A frame is answered by the fast
 * track only if it is a well-formed IPv4/UDP datagram addressed to this node on the configured
 * port; anything else goes to the stack untouched.
 *
 * Ref: IEEE Std 802.3-2018 clause 3.2.3 (individual/group address bit), RFC 791 (IPv4 header
 *      checksum), RFC 768 (UDP checksum; zero means "not computed"), RFC 1071 (Internet sum),
 *      RFC 1122 section 3.2.1.3 (source addresses a host must not answer).
 *
 * No kernel headers: built by the Zephyr app and by the host unit tests alike.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_FAST_H_
#define LATSCOPE_CORE_FAST_H_

#include <stddef.h>
#include <stdint.h>

#include "latscope_core/classify.h"

#ifdef __cplusplus
extern "C" {
#endif

/** This node's addresses and the fast track's UDP port. */
struct ls_fast_node {
	uint8_t mac[6];
	uint8_t ip[4];
	uint16_t port; /**< host order, non-zero */
};

/** Why a frame is (not) taken. Everything but LS_FAST_ACCEPT goes to the stack untouched. */
enum ls_fast_verdict {
	LS_FAST_ACCEPT = 0,
	LS_FAST_NOT_UDP,       /**< not a complete, unfragmented IPv4/UDP datagram (classifier) */
	LS_FAST_VLAN,          /**< 802.1Q tagged: VLANs belong to the stack */
	LS_FAST_OTHER_PORT,    /**< UDP to another destination port */
	LS_FAST_NOT_OUR_MAC,   /**< destination MAC is a group address or another station's */
	LS_FAST_BAD_SRC_MAC,   /**< source MAC is a group address: no unicast reply possible */
	LS_FAST_NOT_OUR_IP,    /**< destination IPv4 address is not ours */
	LS_FAST_BAD_SRC_IP,    /**< source is ours, 0.0.0.0, 127/8, multicast or broadcast */
	LS_FAST_BAD_IP_CSUM,   /**< IPv4 header checksum wrong */
	LS_FAST_BAD_UDP_CSUM,  /**< UDP checksum non-zero and wrong */
	LS_FAST_COUNT
};

/**
 * Decide whether the fast track takes a frame. @p frame holds the whole frame (without FCS),
 * @p frame_len bytes, contiguous: the UDP checksum covers the payload. On LS_FAST_ACCEPT,
 * @p out (may be NULL) is filled as by ls_classify_udp(); ls_udp_make_reply() then turns the
 * frame into its echo in place. Never reads beyond @p frame_len bytes.
 */
enum ls_fast_verdict ls_fast_accept(const uint8_t *frame, size_t frame_len,
				    const struct ls_fast_node *node, struct ls_udp_frame *out);

/**
 * The same test without the UDP checksum, on the first @p hdr_len bytes of a frame of
 * @p frame_len bytes (hdr_len >= the headers, the payload may live elsewhere, e.g. in a chain of
 * network buffers). LS_FAST_ACCEPT here means: accept if ls_udp_checksum_ok_sum() agrees.
 */
enum ls_fast_verdict ls_fast_check_headers(const uint8_t *hdr, size_t hdr_len, size_t frame_len,
					   const struct ls_fast_node *node,
					   struct ls_udp_frame *out);

/**
 * UDP checksum check from a sum (ls_inet_sum()/ls_inet_acc) over the UDP header and payload,
 * f->payload_len + 8 bytes from f->l4_offset, @p udp_cksum_field being the header's checksum
 * (host order). True if the field is 0 or the total with the pseudo-header verifies.
 */
bool ls_udp_checksum_ok_sum(const struct ls_udp_frame *f, uint16_t udp_cksum_field,
			    uint32_t udp_sum);

/** Short name of a verdict, e.g. "accept", "not-our-mac". Never NULL. */
const char *ls_fast_verdict_name(enum ls_fast_verdict v);

/**
 * UDP checksum check over IPv4 (RFC 768): true if the checksum field is 0 (not computed) or
 * the one's-complement sum over pseudo-header, UDP header and payload is 0xffff. @p frame must
 * hold f->l4_offset + 8 + f->payload_len bytes.
 */
bool ls_udp_checksum_ok(const uint8_t *frame, const struct ls_udp_frame *f);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_FAST_H_ */
