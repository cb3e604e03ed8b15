/*
 * latscope marker cost: at boot, N back-to-back markers on m0 timed with the cycle counter,
 * plain and with the LSID-1 identity code (sequence 0x00, the shortest code, and 0xFF, the
 * longest), interrupts locked, the edge trace paused. One console line per mode:
 *   latscope-marker-cost: mode=<plain|lsid1-00|lsid1-ff> n=<N> cycles=<total> hz=<rate>
 *   ns_per_marker=<ns>
 * docs/marker-identity.md ("Cost per marker") states the figures per board.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include "app.h"

static uint32_t time_markers(int mode)
{
	const unsigned int n = CONFIG_LATSCOPE_MARKER_COST_N;
	unsigned int key = irq_lock();
	uint32_t t0 = k_cycle_get_32();

	for (unsigned int i = 0; i < n; i++) {
		if (mode == 0) {
			latscope_marker_pulse(0);
		} else {
			latscope_marker_pulse_id(0, mode == 1 ? 0x00u : 0xFFu);
		}
	}
	uint32_t cycles = k_cycle_get_32() - t0;

	irq_unlock(key);
	return cycles;
}

void marker_cost_report(void)
{
	static const char *const names[] = {"plain", "lsid1-00", "lsid1-ff"};
	const uint32_t hz = sys_clock_hw_cycles_per_sec();
	const unsigned int n = CONFIG_LATSCOPE_MARKER_COST_N;

	if (latscope_markers_count() == 0) {
		return;
	}
	latscope_markers_trace_enable(false);
	for (int mode = 0; mode < 3; mode++) {
		uint32_t cycles = time_markers(mode);
		uint64_t ns = (uint64_t)cycles * 1000000000u / hz / n;

		printk("latscope-marker-cost: mode=%s n=%u cycles=%u hz=%u ns_per_marker=%llu\n",
		       names[mode], n, cycles, hz, (unsigned long long)ns);
	}
	latscope_markers_trace_enable(true);
	latscope_markers_pulses_reset();
}
