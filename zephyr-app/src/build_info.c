/*
 * latscope DUT application: build information (boot banner and GET_INFO).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>
#include <string.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/util.h>
#include <version.h>

#include "app.h"

size_t app_build_info(char *buf, size_t cap)
{
	char markers[160];
	char paths[32] = "";
	size_t plen = 0;

	ls_marker_map_encode(&app_ctrl.config.markers, markers, sizeof(markers));
	for (uint8_t p = 0; p < LS_PATH_COUNT; p++) {
		if (app_path_built(p)) {
			plen += snprintf(paths + plen, sizeof(paths) - plen, "%s%s", plen ? "," : "",
					 ls_path_names[p]);
		}
	}
	uint32_t cpu_hz = 0, loops = 0, pulse_ns = 0;

#if defined(CONFIG_LATSCOPE_MARKERS)
	latscope_markers_pulse_info(&cpu_hz, &loops, &pulse_ns);
#endif
	const char *isr_where = app_point_where(LS_POINT_RX_ISR);
	int n = snprintf(buf, cap,
			 "firmware=latscope-dut\nversion=%s\nzephyr=%s\nboard=%s\noverlays=%s\n"
			 "source_hash=%s\ncontrol_protocol=%u\npaths=%s\npath=%s\n"
			 "port.socket=%u\nport.netctx=%u\nport.fast=%u\nmarkers=%s\n"
			 "marker_pins=%u\nrx_isr_source=%s\n"
			 "pulse_ns=%u\npulse_loops=%u\ncpu_hz=%u\nmarker_code=%s\n"
			 "tx_threads=%u\n",
			 CONFIG_LATSCOPE_VERSION, KERNEL_VERSION_STRING, LATSCOPE_BOARD,
			 LATSCOPE_OVERLAYS, LATSCOPE_SOURCE_HASH, LS_CTRL_VERSION, paths,
			 ls_path_names[app_ctrl.config.path], CONFIG_LATSCOPE_ECHO_PORT,
			 CONFIG_LATSCOPE_NETCTX_PORT, CONFIG_LATSCOPE_FAST_PORT, markers,
#if defined(CONFIG_LATSCOPE_MARKERS)
			 latscope_markers_count(),
#else
			 0u,
#endif
			 isr_where, pulse_ns, loops, cpu_hz,
			 IS_ENABLED(CONFIG_LATSCOPE_MARKERS_IDENTITY) ? "lsid1" : "plain",
			 app_tx_threads);
	char not_measured[64] = "";
	size_t nm = 0;

	/* Where each point is taken, and the points this build cannot mark. */
	for (unsigned int p = 0; p < LS_POINT_COUNT && n >= 0 && (size_t)n < cap; p++) {
		const char *where = app_point_where((enum ls_point)p);

		n += snprintf(buf + n, cap - n, "point.%s=%s\n", ls_points[p].name, where);
		if (strcmp(where, "not-measured") == 0) {
			nm += snprintf(not_measured + nm, sizeof(not_measured) - nm, "%s%s",
				       nm ? "," : "", ls_points[p].name);
			nm = MIN(nm, sizeof(not_measured) - 1);
		}
	}
	if (n >= 0 && (size_t)n < cap) {
		n += snprintf(buf + n, cap - n, "not_measured=%s\n", not_measured);
	}
	if (n < 0) {
		return 0;
	}
	return MIN((size_t)n, cap > 0 ? cap - 1 : 0);
}

const char *app_point_where(enum ls_point point)
{
	const bool shim = IS_ENABLED(CONFIG_LATSCOPE_DRIVER_SHIM);

	switch (point) {
	case LS_POINT_RX_ISR:
#if defined(CONFIG_LATSCOPE_DRIVER_SHIM)
		return driver_shim_rx_isr_where();
#else
		return "not-measured";
#endif
	case LS_POINT_RX_COPY:
		return shim ? "net_recv_data:recv-filter-entry" : "not-measured";
	case LS_POINT_RX_HANDOFF:
		return shim ? "net_recv_data:recv-filter-exit" : "not-measured";
	case LS_POINT_RX_UDP:
		return "socket:recvfrom-returned,netctx:recv-callback";
	case LS_POINT_RX_FAST:
		return IS_ENABLED(CONFIG_LATSCOPE_PATH_FAST) ? "fast-thread:dequeued" : "not-measured";
	case LS_POINT_TX_SEND:
		return "socket:sendto,netctx:net_context_sendto,fast:before-queue";
	case LS_POINT_TX_QUEUE:
		/* A TX queue exists only with TX traffic-class threads (tx.queue -> tx.handoff is
		 * the wait in it); without them the send rule runs inline before the driver. */
		return shim && CONFIG_NET_TC_TX_COUNT > 0 ? "net_if_queue_tx:send-filter"
							  : "not-measured";
	case LS_POINT_TX_HANDOFF:
	case LS_POINT_TX_XMIT:
#if defined(CONFIG_LATSCOPE_DRIVER_SHIM)
		return driver_shim_tx_where(point);
#else
		return "not-measured";
#endif
	default:
		return "not-measured";
	}
}

bool app_point_measured(uint8_t point)
{
	return point < LS_POINT_COUNT &&
	       strcmp(app_point_where((enum ls_point)point), "not-measured") != 0;
}
