/*
 * latscope portable core: the single table of marker meanings (points) and their assignment to the
 * marker channels m0..m4. The Zephyr app prints this table at boot and reports it to the host; the
 * host records it in every capture's metadata as markers = {"m0": "rx.isr", ...}.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_MARKERS_H_
#define LATSCOPE_CORE_MARKERS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Number of marker channels (instrument channels 3..7 are m0..m4). */
#define LS_MARKER_CHANNELS 5u
/** Channel/point value meaning "not assigned". */
#define LS_MARKER_NONE 0xffu

/**
 * Software points where the DUT can raise a marker. Values are part of the control protocol
 * (append only). The names are the project's one marker vocabulary: analysis/definitions.py
 * and capture/runner.py are tested against the table in src/markers.c
 * (capture/tests/test_marker_points.py).
 *
 * RX order per frame: rx.isr -> rx.copy -> rx.handoff -> rx.udp (stack paths) or rx.fast.
 * TX order per echo: tx.send -> tx.queue -> tx.handoff -> tx.xmit.
 */
enum ls_point {
	LS_POINT_RX_ISR = 0,     /**< rx.isr: entry of the MAC's receive interrupt */
	LS_POINT_RX_COPY = 1,    /**< rx.copy: the driver has the frame out of its DMA ring */
	LS_POINT_RX_UDP = 2,     /**< rx.udp: the application has the datagram (stack paths) */
	LS_POINT_RX_FAST = 3,    /**< rx.fast: the fast-track handler has the payload */
	LS_POINT_TX_SEND = 4,    /**< tx.send: the application's send call starts */
	LS_POINT_TX_XMIT = 5,    /**< tx.xmit: the driver starts the MAC's transmission */
	LS_POINT_RX_HANDOFF = 6, /**< rx.handoff: classified, handed to the stack or fast track */
	LS_POINT_TX_QUEUE = 7,   /**< tx.queue: the frame enters the interface's TX queue */
	LS_POINT_TX_HANDOFF = 8, /**< tx.handoff: the L2 hands the frame to the driver's send */
	LS_POINT_COUNT
};

struct ls_point_info {
	const char *name;        /**< e.g. "rx.isr" (capture metadata, analysis definitions) */
	const char *alias;       /**< e.g. "m_isr" */
	const char *description; /**< when the DUT raises it */
	const char *direction;   /**< "rx" or "tx" */
};

/** Meaning of every point, indexed by enum ls_point. */
extern const struct ls_point_info ls_points[LS_POINT_COUNT];

/** Which point each channel m0..m4 shows (LS_MARKER_NONE: channel unused). */
struct ls_marker_map {
	uint8_t channel_point[LS_MARKER_CHANNELS];
	/** Inverse, derived by ls_marker_map_update(): channel per point or LS_MARKER_NONE. */
	uint8_t point_channel[LS_POINT_COUNT];
};

/** Project-wide default: m0 rx.isr, m1 rx.copy, m2 rx.udp, m3 rx.fast, m4 tx.send. */
void ls_marker_map_default(struct ls_marker_map *map);

/**
 * Assign points to channels. @p points has LS_MARKER_CHANNELS entries, each an enum ls_point or
 * LS_MARKER_NONE. Returns 0, or -1 (map unchanged) if a point is unknown or used twice.
 */
int ls_marker_map_set(struct ls_marker_map *map, const uint8_t *points);

/** Channel showing @p point, or LS_MARKER_NONE. */
static inline uint8_t ls_marker_channel(const struct ls_marker_map *map, enum ls_point point)
{
	return ((unsigned int)point < LS_POINT_COUNT) ? map->point_channel[point] : LS_MARKER_NONE;
}

/** Look a point up by name ("rx.isr") or alias ("m_isr"). Returns the point or -1. */
int ls_point_lookup(const char *name);

/**
 * Human-readable table (one line per channel, like the boot banner). Returns the length the full
 * text needs (snprintf semantics: output is truncated but NUL-terminated if cap is too small).
 */
size_t ls_marker_map_format(const struct ls_marker_map *map, char *buf, size_t cap);

/**
 * Machine-readable form "m0=rx.isr,m1=rx.copy,..." (unused channels omitted). snprintf semantics.
 */
size_t ls_marker_map_encode(const struct ls_marker_map *map, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_MARKERS_H_ */
