/*
 * latscope stack path, socket variant: UDP echo on CONFIG_LATSCOPE_ECHO_PORT.
 * Markers: rx.udp when recvfrom() returns, tx.send when sendto() starts.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/logging/log.h>
#include <zephyr/net/socket.h>

#include "app.h"

LOG_MODULE_DECLARE(latscope);

static uint8_t buf[LS_UDP_MAX_PAYLOAD];

static void echo_socket(void *a, void *b, void *c)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(CONFIG_LATSCOPE_ECHO_PORT),
	};
	int sock = zsock_socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);

	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
	if (sock < 0 || zsock_bind(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		LOG_ERR("socket echo: cannot bind port %d (%d)", CONFIG_LATSCOPE_ECHO_PORT, errno);
		return;
	}
	while (true) {
		struct sockaddr src;
		socklen_t src_len = sizeof(src);
		ssize_t n = zsock_recvfrom(sock, buf, sizeof(buf), 0, &src, &src_len);

		if (n < 0) {
			continue;
		}
		bool mark = app_marks_datagram(LS_PATH_SOCKET, (size_t)n);
		uint64_t seq = mark ? app_payload_seq(buf, (size_t)n) : APP_NO_SEQ;

		if (mark) {
			app_mark_seq(LS_POINT_RX_UDP, seq);
		}
		ls_counter_inc(&app_counters, LS_CNT_RX_STACK);
		if (mark) {
			app_mark_seq(LS_POINT_TX_SEND, seq);
		}
		if (zsock_sendto(sock, buf, (size_t)n, 0, &src, src_len) == n) {
			ls_counter_inc(&app_counters, LS_CNT_TX_ECHO);
		} else {
			ls_counter_inc(&app_counters, LS_CNT_TX_ERRORS);
		}
	}
}

K_THREAD_DEFINE(latscope_echo_socket, 2048, echo_socket, NULL, NULL, NULL,
		CONFIG_LATSCOPE_ECHO_PRIORITY, 0, 100);
