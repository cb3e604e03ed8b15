/*
 * latscope portable core: Zephyr's packet timing statistics as a console line.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/time_stats.h"

#include <stdio.h>

size_t ls_time_stats_line(const struct ls_time_stats *prev, const struct ls_time_stats *now,
			  uint64_t t_cycles, uint32_t cycle_hz, char *buf, size_t cap)
{
	if (prev == NULL || now == NULL) {
		return 0;
	}
	if (now->rx_count == prev->rx_count && now->tx_count == prev->tx_count) {
		return 0;
	}
	/* A reset (counts below the previous totals) starts again from zero. */
	uint32_t rx_n = now->rx_count - (now->rx_count >= prev->rx_count ? prev->rx_count : 0u);
	uint64_t rx_us = now->rx_sum_us - (now->rx_count >= prev->rx_count ? prev->rx_sum_us : 0u);
	uint32_t tx_n = now->tx_count - (now->tx_count >= prev->tx_count ? prev->tx_count : 0u);
	uint64_t tx_us = now->tx_sum_us - (now->tx_count >= prev->tx_count ? prev->tx_sum_us : 0u);
	int n = snprintf(buf, cap,
			 "latscope-netstats: t=%llu hz=%lu rx_n=%lu rx_us=%llu tx_n=%lu tx_us=%llu\n",
			 (unsigned long long)t_cycles, (unsigned long)cycle_hz, (unsigned long)rx_n,
			 (unsigned long long)rx_us, (unsigned long)tx_n, (unsigned long long)tx_us);

	return n < 0 ? 0 : (size_t)n;
}
