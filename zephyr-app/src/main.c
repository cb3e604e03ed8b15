/*
 * latscope DUT application: boot, marker table banner, path threads.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <string.h>
#include <zephyr/kernel.h>
#include <zephyr/logging/log.h>
#include <zephyr/sys/printk.h>

#include "app.h"

LOG_MODULE_REGISTER(latscope, LOG_LEVEL_INF);

struct ls_counters app_counters;
struct ls_ctrl_state app_ctrl;
unsigned int app_tx_threads;

uint64_t app_pkt_seq(struct net_pkt *pkt, size_t offset)
{
	uint8_t head[8];
	size_t got = 0;

	if (!IS_ENABLED(CONFIG_LATSCOPE_MARKERS_IDENTITY)) {
		return APP_NO_SEQ;
	}
	for (struct net_buf *b = pkt->buffer; b != NULL && got < sizeof(head); b = b->frags) {
		if (offset >= b->len) {
			offset -= b->len;
			continue;
		}
		size_t k = MIN(b->len - offset, sizeof(head) - got);

		memcpy(&head[got], b->data + offset, k);
		got += k;
		offset = 0;
	}
	return app_payload_seq(head, got);
}

/* The stack's TX traffic-class threads, by the name net_tc.c gives them ("tx_q[N]"): with one,
 * net_if_queue_tx() only queues and the fast track never runs the driver's send (which on the
 * Zynq GEM waits for TX completion); with none, every sender runs it. */
static void count_tx_thread(const struct k_thread *thread, void *user)
{
	const char *name = k_thread_name_get((k_tid_t)thread);

	if (name != NULL && strncmp(name, "tx_q[", 5) == 0) {
		(*(unsigned int *)user)++;
	}
}

uint16_t app_path_port(uint8_t path)
{
	switch (path) {
	case LS_PATH_SOCKET: return CONFIG_LATSCOPE_ECHO_PORT;
	case LS_PATH_NETCTX: return CONFIG_LATSCOPE_NETCTX_PORT;
	case LS_PATH_FAST: return CONFIG_LATSCOPE_FAST_PORT;
	default: return 0;
	}
}

bool app_path_built(uint8_t path)
{
	switch (path) {
	case LS_PATH_SOCKET: return IS_ENABLED(CONFIG_LATSCOPE_PATH_SOCKET);
	case LS_PATH_NETCTX: return IS_ENABLED(CONFIG_LATSCOPE_PATH_NETCTX);
	case LS_PATH_FAST: return IS_ENABLED(CONFIG_LATSCOPE_PATH_FAST);
	default: return false;
	}
}

bool app_marks_datagram(uint8_t path, size_t payload_len)
{
	if (!app_path_selected(path)) {
		return false;
	}
	if (!ls_ctrl_size_selected(&app_ctrl.config, payload_len)) {
		ls_counter_inc(&app_counters, LS_CNT_SIZE_SKIPPED);
		return false;
	}
	return true;
}

int main(void)
{
	static char text[1024];

	ls_ctrl_config_default(&app_ctrl.config);
	if (app_path_built(CONFIG_LATSCOPE_DEFAULT_PATH)) {
		app_ctrl.config.path = CONFIG_LATSCOPE_DEFAULT_PATH;
	}
	app_ctrl.counters = &app_counters;
	k_thread_foreach(count_tx_thread, &app_tx_threads);
	/* The shim first: it decides which points this board can mark (rx.isr). Marker pins are
	 * still unassigned, so nothing pulses before the map below is set. */
#if defined(CONFIG_LATSCOPE_DRIVER_SHIM)
	if (driver_shim_install() != 0) {
		LOG_ERR("driver shim: no Ethernet interface");
	}
#endif
	/* The default map never shows a point this build cannot mark (e.g. rx.isr on native_sim):
	 * such a channel is left unused rather than silent under a name. */
	uint8_t points[LS_MARKER_CHANNELS];

	for (unsigned int ch = 0; ch < LS_MARKER_CHANNELS; ch++) {
		uint8_t p = app_ctrl.config.markers.channel_point[ch];

		points[ch] = (p != LS_MARKER_NONE && app_point_measured(p)) ? p : LS_MARKER_NONE;
	}
	(void)ls_marker_map_set(&app_ctrl.config.markers, points);
#if defined(CONFIG_LATSCOPE_MARKERS)
	int rc = latscope_markers_init();

	if (rc != 0) {
		LOG_ERR("marker pins: init failed (%d)", rc);
	}
	latscope_markers_set_map(&app_ctrl.config.markers);
#endif
	app_build_info(text, sizeof(text));
	printk("latscope DUT\n%s", text);
	ls_marker_map_format(&app_ctrl.config.markers, text, sizeof(text));
	printk("latscope marker table:\n%s", text);
	printk("latscope: tx_threads=%u, fast track %s\n", app_tx_threads,
	       app_tx_threads > 0 ? "queues replies (does not wait on TX completion)"
				  : "runs the driver's send itself");
	if (IS_ENABLED(CONFIG_LATSCOPE_PATH_FAST) && app_tx_threads != CONFIG_NET_TC_TX_COUNT) {
		LOG_ERR("expected %d TX threads, found %u", CONFIG_NET_TC_TX_COUNT, app_tx_threads);
	}
#if defined(CONFIG_LATSCOPE_MARKER_COST)
	marker_cost_report();
#endif
	printk("latscope: ready, path %s\n", ls_path_names[app_ctrl.config.path]);
	return 0;
}
