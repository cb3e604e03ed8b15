/*
 * latscope portable core: the console line that reports Zephyr's own packet timing statistics
 * (CONFIG_NET_PKT_RXTIME_STATS / TXTIME_STATS) per batch, beside the instrument's wire truth.
 * Line format (docs/zephyr-app.md, "Zephyr's own timing"), one per report with any change:
 *   latscope-netstats: t=<cycles> hz=<cycle_hz> rx_n=<packets> rx_us=<sum> tx_n=<packets> tx_us=<sum>
 * t is the cycle counter at the report; the four numbers are the change since the previous line
 * (packets counted and the sum of their per-packet times in whole µs, as Zephyr sums them).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_TIME_STATS_H_
#define LATSCOPE_CORE_TIME_STATS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Zephyr's running totals (struct net_stats rx_time / tx_time: sum in µs, count). */
struct ls_time_stats {
	uint64_t rx_sum_us;
	uint32_t rx_count;
	uint64_t tx_sum_us;
	uint32_t tx_count;
};

/**
 * Format the change from @p prev to @p now as one line (with its newline) into @p buf.
 * Returns the line's length (snprintf semantics: may exceed cap - 1 when truncated), or 0 when
 * neither count changed (nothing to report). Totals that went backwards (statistics reset)
 * are reported as the new totals.
 */
size_t ls_time_stats_line(const struct ls_time_stats *prev, const struct ls_time_stats *now,
			  uint64_t t_cycles, uint32_t cycle_hz, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_TIME_STATS_H_ */
