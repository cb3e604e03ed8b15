/*
 * latscope calibration: back-to-back marker pulses on one channel, timed with the cycle
 * counter, so the host learns a marker's own cost (cycles per pulse) from the DUT, and the
 * instrument sees the pulse train's edge spacing on the wire side of the GPIO.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/time_units.h>

#include "app.h"

int calibration_run(void *user, uint8_t channel, uint32_t pulses, uint64_t *cycles,
		    uint32_t *cycle_hz)
{
	ARG_UNUSED(user);
#if defined(CONFIG_LATSCOPE_MARKERS)
	if (channel >= latscope_markers_count()) {
		return -EINVAL;
	}
	unsigned int key = irq_lock();
	uint32_t t0 = k_cycle_get_32();

	for (uint32_t i = 0; i < pulses; i++) {
		latscope_marker_pulse(channel);
	}
	uint32_t t1 = k_cycle_get_32();

	irq_unlock(key);
	*cycles = (uint32_t)(t1 - t0); /* wrap-safe for < 2^32 cycles */
	*cycle_hz = (uint32_t)sys_clock_hw_cycles_per_sec();
	return 0;
#else
	ARG_UNUSED(channel);
	ARG_UNUSED(pulses);
	ARG_UNUSED(cycles);
	ARG_UNUSED(cycle_hz);
	return -ENOTSUP;
#endif
}
