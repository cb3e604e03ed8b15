/*
 * latscope portable core: counters.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/counters.h"

const char *const ls_counter_names[LS_CNT_COUNT] = {
	[LS_CNT_RX_FRAMES] = "rx_frames",
	[LS_CNT_RX_FAST] = "rx_fast",
	[LS_CNT_RX_STACK] = "rx_stack",
	[LS_CNT_TX_ECHO] = "tx_echo",
	[LS_CNT_TX_ERRORS] = "tx_errors",
	[LS_CNT_SIZE_SKIPPED] = "size_skipped",
	[LS_CNT_CTRL_REQUESTS] = "ctrl_requests",
	[LS_CNT_CTRL_ERRORS] = "ctrl_errors",
	[LS_CNT_MARKER_PULSES] = "marker_pulses",
	[LS_CNT_FAST_REJECTED] = "fast_rejected",
	[LS_CNT_FAST_BUSY] = "fast_busy",
};

void ls_counters_reset(struct ls_counters *c)
{
	for (unsigned int i = 0; i < LS_CNT_COUNT; i++) {
		__atomic_store_n(&c->value[i], 0u, __ATOMIC_RELAXED);
	}
}
