/*
 * latscope fast track: frames classified (by the driver shim's receive rule, in driver context)
 * as IPv4/UDP to CONFIG_LATSCOPE_FAST_PORT go straight to the high-priority handler: marker
 * rx.fast when it has the payload, then an echo built in place and handed to the driver's send
 * (through the shim, so tx.xmit still fires). The stack never sees the frame.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/net/ethernet.h>
#include <zephyr/net/net_if.h>
#include <zephyr/net/net_pkt.h>

#include "app.h"

static uint8_t frame[LS_ETH_HDR_LEN + LS_VLAN_TAG_LEN + 1500u];

/* The high-priority handler: runs in driver context with the payload in hand. */
static void fast_handler(const uint8_t *payload, size_t len, bool mark)
{
	ARG_UNUSED(payload);
	ARG_UNUSED(len);
	if (mark) {
		app_mark(LS_POINT_RX_FAST);
	}
	ls_counter_inc(&app_counters, LS_CNT_RX_FAST);
}

bool fast_track_take(struct net_pkt *pkt, const uint8_t *hdr, size_t hdr_len,
		     const struct ls_udp_frame *f)
{
	struct net_if *iface = net_pkt_iface(pkt);
	size_t total = f->payload_offset + (size_t)f->payload_len;
	bool mark = app_marks_datagram(LS_PATH_FAST, f->payload_len);

	ARG_UNUSED(hdr);
	ARG_UNUSED(hdr_len);
	if (total > sizeof(frame)) {
		return false;
	}
	net_pkt_cursor_init(pkt);
	if (net_pkt_read(pkt, frame, total) != 0) {
		return false;
	}
	fast_handler(&frame[f->payload_offset], f->payload_len, mark);

	struct net_pkt *reply = net_pkt_alloc_with_buffer(iface, total, AF_UNSPEC, 0, K_NO_WAIT);

	if (reply == NULL || ls_udp_make_reply(frame, total, f) != 0 ||
	    net_pkt_write(reply, frame, total) != 0) {
		ls_counter_inc(&app_counters, LS_CNT_TX_ERRORS);
		if (reply != NULL) {
			net_pkt_unref(reply);
		}
		return true;
	}
	net_pkt_cursor_init(reply);
	net_pkt_set_iface(reply, iface);
	const struct device *dev = net_if_get_device(iface);
	const struct ethernet_api *api = dev->api;

	if (mark) {
		app_mark(LS_POINT_TX_SEND);
	}
	if (api->send(dev, reply) == 0) {
		ls_counter_inc(&app_counters, LS_CNT_TX_ECHO);
	} else {
		ls_counter_inc(&app_counters, LS_CNT_TX_ERRORS);
	}
	net_pkt_unref(reply);
	return true;
}
