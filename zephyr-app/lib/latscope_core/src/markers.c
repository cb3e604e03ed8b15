/*
 * latscope portable core: marker meanings and channel assignment.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/markers.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const struct ls_point_info ls_points[LS_POINT_COUNT] = {
	[LS_POINT_RX_ISR] = {"rx.isr", "m_isr", "entry of the MAC's receive interrupt", "rx"},
	[LS_POINT_RX_COPY] = {"rx.copy", "m_copy", "the driver has the frame out of its DMA ring",
			      "rx"},
	[LS_POINT_RX_UDP] = {"rx.udp", "m_udp", "the application has the datagram", "rx"},
	[LS_POINT_RX_FAST] = {"rx.fast", "m_fast", "the fast-track handler has the payload", "rx"},
	[LS_POINT_TX_SEND] = {"tx.send", "m_send", "the application's send call starts", "tx"},
	[LS_POINT_TX_XMIT] = {"tx.xmit", "m_xmit", "the driver starts the MAC's transmission",
			      "tx"},
	[LS_POINT_RX_HANDOFF] = {"rx.handoff", "m_handoff",
				 "classified, handed to the stack or the fast track", "rx"},
	[LS_POINT_TX_QUEUE] = {"tx.queue", "m_queue", "the frame enters the interface's TX queue",
			       "tx"},
	[LS_POINT_TX_HANDOFF] = {"tx.handoff", "m_driver",
				 "the L2 hands the frame to the driver's send", "tx"},
};

static void derive_inverse(struct ls_marker_map *map)
{
	memset(map->point_channel, LS_MARKER_NONE, sizeof(map->point_channel));
	for (unsigned int ch = 0; ch < LS_MARKER_CHANNELS; ch++) {
		uint8_t p = map->channel_point[ch];

		if (p < LS_POINT_COUNT) {
			map->point_channel[p] = (uint8_t)ch;
		}
	}
}

void ls_marker_map_default(struct ls_marker_map *map)
{
	static const uint8_t defaults[LS_MARKER_CHANNELS] = {
		LS_POINT_RX_ISR, LS_POINT_RX_COPY, LS_POINT_RX_UDP, LS_POINT_RX_FAST, LS_POINT_TX_SEND,
	};

	memcpy(map->channel_point, defaults, sizeof(defaults));
	derive_inverse(map);
}

int ls_marker_map_set(struct ls_marker_map *map, const uint8_t *points)
{
	uint8_t seen[LS_POINT_COUNT] = {0};

	if (map == NULL || points == NULL) {
		return -1;
	}
	for (unsigned int ch = 0; ch < LS_MARKER_CHANNELS; ch++) {
		uint8_t p = points[ch];

		if (p == LS_MARKER_NONE) {
			continue;
		}
		if (p >= LS_POINT_COUNT || seen[p]) {
			return -1;
		}
		seen[p] = 1;
	}
	memcpy(map->channel_point, points, LS_MARKER_CHANNELS);
	derive_inverse(map);
	return 0;
}

int ls_point_lookup(const char *name)
{
	if (name == NULL) {
		return -1;
	}
	for (int p = 0; p < (int)LS_POINT_COUNT; p++) {
		if (strcmp(name, ls_points[p].name) == 0 || strcmp(name, ls_points[p].alias) == 0) {
			return p;
		}
	}
	return -1;
}

/* Append with snprintf semantics; *used keeps the full length even past cap. */
static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
	char *dst = (*used < cap) ? buf + *used : NULL;
	size_t room = (*used < cap) ? cap - *used : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(dst, room, fmt, ap);
	va_end(ap);
	if (n > 0) {
		*used += (size_t)n;
	}
}

size_t ls_marker_map_format(const struct ls_marker_map *map, char *buf, size_t cap)
{
	size_t used = 0;

	if (cap > 0) {
		buf[0] = '\0';
	}
	for (unsigned int ch = 0; ch < LS_MARKER_CHANNELS; ch++) {
		uint8_t p = map->channel_point[ch];

		if (p < LS_POINT_COUNT) {
			append(buf, cap, &used, "m%u  %-10s %-9s %s\n", ch, ls_points[p].name,
			       ls_points[p].alias, ls_points[p].description);
		} else {
			append(buf, cap, &used, "m%u  (unused)\n", ch);
		}
	}
	return used;
}

size_t ls_marker_map_encode(const struct ls_marker_map *map, char *buf, size_t cap)
{
	size_t used = 0;

	if (cap > 0) {
		buf[0] = '\0';
	}
	for (unsigned int ch = 0; ch < LS_MARKER_CHANNELS; ch++) {
		uint8_t p = map->channel_point[ch];

		if (p < LS_POINT_COUNT) {
			append(buf, cap, &used, "%sm%u=%s", used ? "," : "", ch, ls_points[p].name);
		}
	}
	return used;
}
