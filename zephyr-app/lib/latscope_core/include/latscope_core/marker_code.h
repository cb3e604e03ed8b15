/*
 * latscope portable core: the LSID-1 marker identity code (docs/marker-identity.md).
 * A marker is its usual pulse (the rising edge is the measurement point) followed by nine code
 * pulses: bits 0..7 of the packet's sequence number, least significant first, then an odd parity
 * bit. A 0 is high one unit, a 1 high LS_CODE_LONG_UNITS units; every pulse is followed by one
 * unit low, the last by LS_CODE_IDLE_UNITS. The host decoder is analysis/marker_identity.py.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_MARKER_CODE_H_
#define LATSCOPE_CORE_MARKER_CODE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Sequence bits carried (the low byte). */
#define LS_CODE_BITS 8u
/** Pulses of one coded marker: the marker pulse, 8 data bits, 1 parity bit. */
#define LS_CODE_PULSES (1u + LS_CODE_BITS + 1u)
/** High time of a 1, in units (a 0 and the marker pulse: 1 unit). */
#define LS_CODE_LONG_UNITS 4u
/** Low time the encoder keeps after a code before the channel's next marker, in units. */
#define LS_CODE_IDLE_UNITS 32u

/** One coded marker: high and low time of each pulse, in units. */
struct ls_marker_code {
	uint8_t high[LS_CODE_PULSES];
	uint8_t low[LS_CODE_PULSES];
};

/** Fill @p code with the schedule of the marker for sequence number @p seq (low byte used). */
void ls_marker_code(uint32_t seq, struct ls_marker_code *code);

/** Total units (high + low, idle included) of @p code: the extra pulse time is this minus 2. */
unsigned int ls_marker_code_units(const struct ls_marker_code *code);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_MARKER_CODE_H_ */
