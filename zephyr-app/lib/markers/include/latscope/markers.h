/*
 * latscope marker library: the only code that touches marker pins.
 *
 * latscope_mark(point) raises a short pulse on the channel the current marker map assigns to
 * @p point (see lib/latscope_core/include/latscope_core/markers.h); nothing happens if the point
 * is unassigned. The rising edge is the event. Safe from ISRs and threads; a pulse is two stores
 * (direct mode) or two GPIO driver calls (port mode).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_MARKERS_H_
#define LATSCOPE_MARKERS_H_

#include <stdbool.h>
#include <stdint.h>
#include <latscope_core/markers.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Configure the marker pins as outputs, low. Returns 0 or a negative errno. */
int latscope_markers_init(void);

/** Number of marker channels the devicetree provides (0..5). */
unsigned int latscope_markers_count(void);

/** Use @p map from now on (copied; takes effect for the next latscope_mark()). */
void latscope_markers_set_map(const struct ls_marker_map *map);

/** One pulse on marker channel @p channel (0..4); ignored if the channel has no pin. */
void latscope_marker_pulse(unsigned int channel);

/**
 * A marker pulse on @p channel followed by the LSID-1 code of @p seq (low byte; see
 * latscope_core/marker_code.h and docs/marker-identity.md), with interrupts locked so the code's
 * widths hold. Counts as one pulse. Ignored if the channel has no pin.
 */
void latscope_marker_pulse_id(unsigned int channel, uint32_t seq);

/** Pause (false) or resume (true) the gpio_emul edge trace (CONFIG_LATSCOPE_MARKERS_TRACE;
 *  a no-op without it): edges while paused are neither recorded nor printed. */
void latscope_markers_trace_enable(bool on);

/** Pulse count since boot or the last reset (all channels), for the counters. */
uint32_t latscope_markers_pulses(void);

/** Restart the pulse count at 0 (RESET_COUNTERS). */
void latscope_markers_pulses_reset(void);

/** Pulse width settings: CPU clock used (Hz), wait loops between the edges, requested ns. */
void latscope_markers_pulse_info(uint32_t *cpu_hz, uint32_t *loops, uint32_t *ns);

extern volatile uint8_t latscope_point_channel[LS_POINT_COUNT];

/** Raise the marker for @p point if the map assigns it to a channel. */
static inline void latscope_mark(enum ls_point point)
{
	uint8_t ch = latscope_point_channel[point];

	if (ch != LS_MARKER_NONE) {
		latscope_marker_pulse(ch);
	}
}

/**
 * Raise the marker for @p point carrying the packet's sequence number @p seq
 * (CONFIG_LATSCOPE_MARKERS_IDENTITY); without that option, a plain marker as latscope_mark().
 */
static inline void latscope_mark_id(enum ls_point point, uint32_t seq)
{
	uint8_t ch = latscope_point_channel[point];

	if (ch == LS_MARKER_NONE) {
		return;
	}
#if defined(CONFIG_LATSCOPE_MARKERS_IDENTITY)
	latscope_marker_pulse_id(ch, seq);
#else
	(void)seq;
	latscope_marker_pulse(ch);
#endif
}

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_MARKERS_H_ */
