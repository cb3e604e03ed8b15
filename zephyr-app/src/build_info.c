/*
 * latscope DUT application: build information (boot banner and GET_INFO).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/util.h>
#include <version.h>

#include "app.h"

size_t app_build_info(char *buf, size_t cap)
{
	char markers[96];
	char paths[32] = "";
	size_t plen = 0;

	ls_marker_map_encode(&app_ctrl.config.markers, markers, sizeof(markers));
	for (uint8_t p = 0; p < LS_PATH_COUNT; p++) {
		if (app_path_built(p)) {
			plen += snprintf(paths + plen, sizeof(paths) - plen, "%s%s", plen ? "," : "",
					 ls_path_names[p]);
		}
	}
	int n = snprintf(buf, cap,
			 "firmware=latscope-dut\nversion=%s\nzephyr=%s\nboard=%s\noverlays=%s\n"
			 "source_hash=%s\ncontrol_protocol=%u\npaths=%s\npath=%s\n"
			 "port.socket=%u\nport.netctx=%u\nport.fast=%u\nmarkers=%s\n"
			 "marker_pins=%u\nrx_isr_source=%s\n",
			 CONFIG_LATSCOPE_VERSION, KERNEL_VERSION_STRING, LATSCOPE_BOARD,
			 LATSCOPE_OVERLAYS, LATSCOPE_SOURCE_HASH, LS_CTRL_VERSION, paths,
			 ls_path_names[app_ctrl.config.path], CONFIG_LATSCOPE_ECHO_PORT,
			 CONFIG_LATSCOPE_NETCTX_PORT, CONFIG_LATSCOPE_FAST_PORT, markers,
#if defined(CONFIG_LATSCOPE_MARKERS)
			 latscope_markers_count(),
#else
			 0u,
#endif
			 IS_ENABLED(CONFIG_LATSCOPE_SHIM_ISR) ? "isr" : "net_recv_data");

	if (n < 0) {
		return 0;
	}
	return MIN((size_t)n, cap > 0 ? cap - 1 : 0);
}
