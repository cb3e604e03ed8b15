/* The LSID-1 encoder against the golden vectors the Python decoder also reads
 * (tests/marker_code_vectors.txt; analysis/tests/test_marker_identity.py).
 * SPDX-License-Identifier: BSD-2-Clause */
#include "latscope_core/marker_code.h"
#include "ls_test.h"

int main(void)
{
	FILE *f = fopen(LS_CODE_VECTORS_FILE, "r");
	char line[256];
	int vectors = 0;

	CHECK(f != NULL);
	if (f == NULL) {
		TEST_DONE();
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long seq;
		unsigned int h[LS_CODE_PULSES], l[LS_CODE_PULSES];
		struct ls_marker_code code;
		char *p = line;
		int used;

		if (line[0] == '#' || line[0] == '\n') {
			continue;
		}
		CHECK_EQ(sscanf(p, "%lu%n", &seq, &used), 1);
		p += used;
		for (unsigned int k = 0; k < LS_CODE_PULSES; k++) {
			CHECK_EQ(sscanf(p, "%u%n", &h[k], &used), 1);
			p += used;
		}
		CHECK_EQ(sscanf(p, " |%n", &used), 0);
		p += used;
		for (unsigned int k = 0; k < LS_CODE_PULSES; k++) {
			CHECK_EQ(sscanf(p, "%u%n", &l[k], &used), 1);
			p += used;
		}
		ls_marker_code((uint32_t)seq, &code);
		for (unsigned int k = 0; k < LS_CODE_PULSES; k++) {
			CHECK_EQ(code.high[k], h[k]);
			CHECK_EQ(code.low[k], l[k]);
		}
		vectors++;
	}
	fclose(f);
	CHECK(vectors >= 10);

	/* The marker pulse is always one unit: its rising edge stays the measurement point. */
	struct ls_marker_code code;

	ls_marker_code(0xA5u, &code);
	CHECK_EQ(code.high[0], 1);
	/* 0xA5: four ones, so the parity pulse is long; units: marker 1, 4 long and 4 short data
	 * bits, the long parity pulse, 9 lows of 1 and the idle 32 */
	CHECK_EQ(code.high[LS_CODE_PULSES - 1u], LS_CODE_LONG_UNITS);
	CHECK_EQ(ls_marker_code_units(&code), 1 + 5 * 4 + 4 * 1 + 9 + 32);
	TEST_DONE();
}
