/*
 * latscope portable core: the LSID-1 marker identity code (docs/marker-identity.md).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/marker_code.h"

void ls_marker_code(uint32_t seq, struct ls_marker_code *code)
{
	unsigned int ones = 0;

	code->high[0] = 1u;
	for (unsigned int k = 0; k < LS_CODE_BITS; k++) {
		unsigned int bit = (seq >> k) & 1u;

		ones += bit;
		code->high[1u + k] = (uint8_t)(bit ? LS_CODE_LONG_UNITS : 1u);
	}
	/* odd parity: the nine code bits hold an odd count of ones */
	code->high[LS_CODE_PULSES - 1u] = (uint8_t)((ones & 1u) ? 1u : LS_CODE_LONG_UNITS);
	for (unsigned int k = 0; k < LS_CODE_PULSES; k++) {
		code->low[k] = 1u;
	}
	code->low[LS_CODE_PULSES - 1u] = (uint8_t)LS_CODE_IDLE_UNITS;
}

unsigned int ls_marker_code_units(const struct ls_marker_code *code)
{
	unsigned int units = 0;

	for (unsigned int k = 0; k < LS_CODE_PULSES; k++) {
		units += code->high[k] + code->low[k];
	}
	return units;
}
