/*
 * latscope DUT application: state shared between the feature files.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_APP_H_
#define LATSCOPE_APP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zephyr/net/net_pkt.h>

#include <latscope_core/classify.h>
#include <latscope_core/control.h>
#include <latscope_core/counters.h>
#include <latscope_core/traffic.h>
#if defined(CONFIG_LATSCOPE_MARKERS)
#include <latscope/markers.h>
#endif

extern struct ls_counters app_counters;
extern struct ls_ctrl_state app_ctrl;

/** Raise the marker for @p point (no-op without the marker library). */
static inline void app_mark(enum ls_point point)
{
#if defined(CONFIG_LATSCOPE_MARKERS)
	latscope_mark(point);
#else
	ARG_UNUSED(point);
#endif
}

/** No sequence number known for this datagram (APP_NO_SEQ): app_mark_seq() marks plainly. */
#define APP_NO_SEQ UINT64_MAX

/**
 * Raise the marker for @p point carrying sequence number @p seq (identity markers,
 * CONFIG_LATSCOPE_MARKERS_IDENTITY), or a plain marker (identity off, or @p seq APP_NO_SEQ).
 */
static inline void app_mark_seq(enum ls_point point, uint64_t seq)
{
#if defined(CONFIG_LATSCOPE_MARKERS)
	if (seq == APP_NO_SEQ) {
		latscope_mark(point);
	} else {
		latscope_mark_id(point, (uint32_t)seq);
	}
#else
	ARG_UNUSED(point);
	ARG_UNUSED(seq);
#endif
}

/** Sequence number of a latscope traffic payload for identity markers, or APP_NO_SEQ (also
 *  always without CONFIG_LATSCOPE_MARKERS_IDENTITY: plain builds read nothing). */
static inline uint64_t app_payload_seq(const uint8_t *payload, size_t len)
{
	uint32_t seq;

	if (IS_ENABLED(CONFIG_LATSCOPE_MARKERS_IDENTITY) && ls_traffic_seq(payload, len, &seq)) {
		return seq;
	}
	return APP_NO_SEQ;
}

/** The same for a payload at byte @p offset of a packet's buffer chain (no cursor moved). */
uint64_t app_pkt_seq(struct net_pkt *pkt, size_t offset);

/** TX traffic-class threads running ("tx_q[N]"), counted at boot; 0: senders run the driver. */
extern unsigned int app_tx_threads;

static inline bool app_path_selected(uint8_t path)
{
	return app_ctrl.config.path == path;
}

/** UDP port of an echo path. */
uint16_t app_path_port(uint8_t path);

/** Is the path compiled into this image? */
bool app_path_built(uint8_t path);

/** Markers for this datagram? (selected path and a selected payload size) */
bool app_marks_datagram(uint8_t path, size_t payload_len);

/** Where the firmware raises @p point ("net_recv_data:recv-filter-entry", ...) or
 *  "not-measured" when this build/board cannot mark it. */
const char *app_point_where(enum ls_point point);

/** Can this build raise @p point? (SET_MARKERS refuses the others.) */
bool app_point_measured(uint8_t point);

/** Write "key=value\n" build information (GET_INFO body and boot banner). */
size_t app_build_info(char *buf, size_t cap);

struct net_if;

/** Fast track: set up with the interface's addresses (from the driver shim's install). */
void fast_track_init(struct net_if *iface);

/** A frame the fast track accepted, on its way to the fast-track thread. */
struct fast_item {
	struct net_pkt *pkt;
	struct ls_udp_frame f;
	bool mark;
	uint64_t seq; /* identity markers: the probe's sequence number, or APP_NO_SEQ */
};

/**
 * Fast track, in the driver shim's receive rule (driver context): the acceptance test
 * (portable core plus the UDP checksum over the buffer chain). True: @p it is filled and the
 * frame is the fast track's; false: it stays the stack's, untouched.
 */
bool fast_track_accept(struct net_pkt *pkt, struct fast_item *it);

/** Queue an accepted frame to the fast-track thread. False (queue full): leave it to the stack. */
bool fast_track_enqueue(struct fast_item *it);

/** Boot-time cost of plain and identity markers, printed on the console (marker_cost.c). */
void marker_cost_report(void);

/** Print the time-statistics line for what changed since the last one (time_stats_report.c):
 *  the control server calls it on every request, so batches end where the host changes the
 *  setup (a batch also holds the control request that ends it and the reply that began it). */
void time_stats_flush(void);

/** Calibration hook for the control protocol. */
int calibration_run(void *user, uint8_t channel, uint32_t pulses, uint64_t *cycles,
		    uint32_t *cycle_hz);

/** Install the driver shim (receive and send rules, RX interrupt wrapper). */
int driver_shim_install(void);
extern bool driver_shim_isr_wrapped;

/** Where tx.handoff / tx.xmit are taken ("ENET_SendFrame:entry", ...) or "not-measured". */
const char *driver_shim_tx_where(enum ls_point point);

/** Where rx.isr is taken ("isr:rx-line", ...) or "not-measured". */
const char *driver_shim_rx_isr_where(void);

#endif /* LATSCOPE_APP_H_ */
