/*
 * latscope fast track: UDP datagrams to CONFIG_LATSCOPE_FAST_PORT that pass the portable
 * core's acceptance test (ls_fast_check_headers: our unicast MAC, our IPv4 address, an
 * answerable source, no VLAN tag, a valid IPv4 header checksum; plus the UDP checksum, summed
 * here over the packet's buffer chain without copying) are taken by the driver shim's receive
 * rule and queued to a dedicated thread at CONFIG_LATSCOPE_FAST_PRIORITY (above the stack's RX
 * thread by default). Everything else goes to the stack untouched.
 *
 * The thread raises rx.fast (it has the payload), rewrites the headers of the received packet
 * in place into the echo (the only bytes copied: the headers, read out and written back; the
 * payload is never copied, only summed for the reply's UDP checksum, as the stack computes one
 * for its echoes), raises tx.send and hands the same packet to the interface's TX queue as a
 * raw AF_PACKET frame (net_if_queue_tx(): the L2 sends it unchanged). It never waits for TX
 * completion: prj.conf sets NET_TC_TX_COUNT=1 (a TX thread runs the driver's send; main.c
 * checks at boot that it exists). With NET_TC_TX_COUNT=0 (overlay-rx-in-driver.conf) the
 * queue call runs the driver's send in this thread, which on the Zynq GEM waits for TX done.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <string.h>
#include <zephyr/kernel.h>
#include <zephyr/net/ethernet.h>
#include <zephyr/net/net_if.h>
#include <zephyr/net/net_pkt.h>

#include <latscope_core/fast.h>

#include "app.h"

K_MSGQ_DEFINE(fast_q, sizeof(struct fast_item), CONFIG_LATSCOPE_FAST_QUEUE_DEPTH, 4);

static struct ls_fast_node node;
static struct net_if *fast_iface;

void fast_track_init(struct net_if *iface)
{
	struct net_linkaddr *ll = net_if_get_link_addr(iface);
	struct in_addr *ip = net_if_ipv4_get_global_addr(iface, NET_ADDR_PREFERRED);

	fast_iface = iface;
	if (ll != NULL && ll->len == sizeof(node.mac)) {
		memcpy(node.mac, ll->addr, sizeof(node.mac));
	}
	if (ip != NULL) {
		memcpy(node.ip, ip, sizeof(node.ip));
	}
	node.port = CONFIG_LATSCOPE_FAST_PORT;
}

/* Internet sum of @p left bytes from byte @p skip of the packet's buffer chain, in place.
 * Returns the bytes it could not reach (0: all summed). */
static size_t chain_sum(struct net_pkt *pkt, size_t skip, size_t left, struct ls_inet_acc *acc)
{
	ls_inet_acc_init(acc);
	for (struct net_buf *b = pkt->buffer; b != NULL && left > 0u; b = b->frags) {
		size_t blen = b->len;

		if (skip >= blen) {
			skip -= blen;
			continue;
		}
		size_t k = MIN(blen - skip, left);

		ls_inet_acc_add(acc, b->data + skip, k);
		left -= k;
		skip = 0;
	}
	return left;
}

/* UDP checksum over the buffer chain: f->payload_len + 8 bytes from f->l4_offset. */
static bool udp_checksum_ok(struct net_pkt *pkt, const uint8_t *hdr, const struct ls_udp_frame *f)
{
	uint16_t field = (uint16_t)((hdr[f->l4_offset + 6] << 8) | hdr[f->l4_offset + 7]);
	struct ls_inet_acc acc;

	if (field == 0u) {
		return true;
	}
	return chain_sum(pkt, f->l4_offset, (size_t)f->payload_len + LS_UDP_HDR_LEN, &acc) == 0u &&
	       ls_udp_checksum_ok_sum(f, field, ls_inet_acc_sum(&acc));
}

bool fast_track_accept(struct net_pkt *pkt, struct fast_item *it)
{
	uint8_t hdr[LS_CLASSIFY_MAX_HDR];
	size_t len = net_pkt_get_len(pkt);
	size_t n = MIN(len, sizeof(hdr));
	struct net_pkt_cursor backup;
	enum ls_fast_verdict v;

	net_pkt_cursor_backup(pkt, &backup);
	net_pkt_cursor_init(pkt);
	v = net_pkt_read(pkt, hdr, n) == 0 ?
		    ls_fast_check_headers(hdr, n, len, &node, &it->f) : LS_FAST_NOT_UDP;
	net_pkt_cursor_restore(pkt, &backup);
	if (v == LS_FAST_ACCEPT && !udp_checksum_ok(pkt, hdr, &it->f)) {
		v = LS_FAST_BAD_UDP_CSUM;
	}
	if (v != LS_FAST_ACCEPT) {
		if (v != LS_FAST_OTHER_PORT) {
			ls_counter_inc(&app_counters, LS_CNT_FAST_REJECTED);
		}
		return false;
	}
	it->pkt = pkt;
	it->seq = it->mark && n >= it->f.payload_offset
			  ? app_payload_seq(&hdr[it->f.payload_offset], n - it->f.payload_offset)
			  : APP_NO_SEQ;
	return true;
}

bool fast_track_enqueue(struct fast_item *it)
{
	net_pkt_ref(it->pkt); /* ours until the TX path releases it; the filter's drop frees one */
	if (k_msgq_put(&fast_q, it, K_NO_WAIT) != 0) {
		net_pkt_unref(it->pkt);
		ls_counter_inc(&app_counters, LS_CNT_FAST_BUSY);
		return false;
	}
	return true;
}

static void fast_thread(void *a, void *b, void *c)
{
	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
	uint8_t hdr[LS_ETH_HDR_LEN + LS_IPV4_MAX_HDR + LS_UDP_HDR_LEN];

	while (true) {
		struct fast_item it;

		k_msgq_get(&fast_q, &it, K_FOREVER);
		/* The handler: this is where an application would act on the payload. */
		if (it.mark) {
			app_mark_seq(LS_POINT_RX_FAST, it.seq);
		}
		ls_counter_inc(&app_counters, LS_CNT_RX_FAST);

		struct net_pkt *pkt = it.pkt;
		size_t hlen = it.f.payload_offset;

		net_pkt_cursor_init(pkt);
		net_pkt_set_overwrite(pkt, true);
		struct ls_inet_acc acc;

		/* The reply carries a computed UDP checksum, summed over the payload in place: the
		 * same work the stack paths' send does (net_udp_finalize), so the fast track's lead
		 * is not skipped work. */
		if (hlen > sizeof(hdr) || net_pkt_read(pkt, hdr, hlen) != 0 ||
		    ls_udp_make_reply(hdr, hlen, &it.f) != 0 ||
		    chain_sum(pkt, hlen, it.f.payload_len, &acc) != 0u ||
		    ls_udp_fill_checksum(hdr, hlen, &it.f, ls_inet_acc_sum(&acc)) == 0u) {
			ls_counter_inc(&app_counters, LS_CNT_TX_ERRORS);
			net_pkt_unref(pkt);
			continue;
		}
		net_pkt_cursor_init(pkt);
		(void)net_pkt_write(pkt, hdr, hlen);
		net_pkt_cursor_init(pkt);
		net_pkt_set_family(pkt, AF_PACKET); /* raw: the Ethernet L2 sends it as it is */
		net_pkt_set_context(pkt, NULL);
		net_pkt_set_iface(pkt, fast_iface);
		if (it.mark) {
			app_mark_seq(LS_POINT_TX_SEND, it.seq);
		}
		net_if_queue_tx(fast_iface, pkt); /* takes our reference; does not wait */
		ls_counter_inc(&app_counters, LS_CNT_TX_ECHO);
	}
}

K_THREAD_DEFINE(latscope_fast, 1536, fast_thread, NULL, NULL, NULL, CONFIG_LATSCOPE_FAST_PRIORITY,
		0, 0);
