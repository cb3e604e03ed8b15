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

/** Write "key=value\n" build information (GET_INFO body and boot banner). */
size_t app_build_info(char *buf, size_t cap);

/** Fast track: take a classified frame in driver context. Returns true if it was consumed. */
bool fast_track_take(struct net_pkt *pkt, const uint8_t *hdr, size_t hdr_len,
		     const struct ls_udp_frame *f);

/** Calibration hook for the control protocol. */
int calibration_run(void *user, uint8_t channel, uint32_t pulses, uint64_t *cycles,
		    uint32_t *cycle_hz);

/** Driver shim installed (RX hook and TX wrapper)? rx.isr comes from an ISR wrapper? */
int driver_shim_install(void);
extern bool driver_shim_isr_wrapped;

#endif /* LATSCOPE_APP_H_ */
