/*
 * latscope stack path, net_context variant: UDP echo on CONFIG_LATSCOPE_NETCTX_PORT.
 * Markers: rx.udp when the receive callback runs (RX thread, or driver context with
 * NET_TC_RX_COUNT=0), tx.send when net_context_sendto() starts.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/logging/log.h>
#include <zephyr/net/net_context.h>
#include <zephyr/net/net_if.h>
#include <zephyr/net/net_ip.h>
#include <zephyr/net/net_pkt.h>

#include "app.h"

LOG_MODULE_DECLARE(latscope);

static struct net_context *ctx;
static uint8_t buf[LS_UDP_MAX_PAYLOAD];

static void received(struct net_context *context, struct net_pkt *pkt,
		     union net_ip_header *ip_hdr, union net_proto_header *proto_hdr, int status,
		     void *user_data)
{
	ARG_UNUSED(user_data);
	if (pkt == NULL || status < 0 || ip_hdr == NULL || proto_hdr == NULL) {
		if (pkt != NULL) {
			net_pkt_unref(pkt);
		}
		return;
	}
	size_t len = ntohs(proto_hdr->udp->len) - NET_UDPH_LEN;
	bool mark = app_marks_datagram(LS_PATH_NETCTX, len);
	size_t payload_at = net_pkt_ip_hdr_len(pkt) + net_pkt_ip_opts_len(pkt) + NET_UDPH_LEN;
	uint64_t seq = mark ? app_pkt_seq(pkt, payload_at) : APP_NO_SEQ;

	if (mark) {
		app_mark_seq(LS_POINT_RX_UDP, seq);
	}
	ls_counter_inc(&app_counters, LS_CNT_RX_STACK);
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = proto_hdr->udp->src_port};

	net_ipv4_addr_copy_raw((uint8_t *)&dst.sin_addr, ip_hdr->ipv4->src);
	net_pkt_cursor_init(pkt);
	if (len > sizeof(buf) ||
	    net_pkt_skip(pkt, payload_at) ||
	    net_pkt_read(pkt, buf, len)) {
		ls_counter_inc(&app_counters, LS_CNT_TX_ERRORS);
		net_pkt_unref(pkt);
		return;
	}
	net_pkt_unref(pkt);
	if (mark) {
		app_mark_seq(LS_POINT_TX_SEND, seq);
	}
	if (net_context_sendto(context, buf, len, (struct sockaddr *)&dst, sizeof(dst), NULL,
			       K_NO_WAIT, NULL) >= 0) {
		ls_counter_inc(&app_counters, LS_CNT_TX_ECHO);
	} else {
		ls_counter_inc(&app_counters, LS_CNT_TX_ERRORS);
	}
}

static int echo_netctx_init(void)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(CONFIG_LATSCOPE_NETCTX_PORT),
	};
	int rc = net_context_get(AF_INET, SOCK_DGRAM, IPPROTO_UDP, &ctx);

	if (rc == 0) {
		rc = net_context_bind(ctx, (struct sockaddr *)&addr, sizeof(addr));
	}
	if (rc == 0) {
		rc = net_context_recv(ctx, received, K_NO_WAIT, NULL);
	}
	if (rc != 0) {
		LOG_ERR("net_context echo: setup failed (%d)", rc);
	}
	return 0;
}

SYS_INIT(echo_netctx_init, APPLICATION, 95);
