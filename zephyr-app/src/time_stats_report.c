/*
 * latscope: Zephyr's own packet timing statistics (CONFIG_NET_PKT_RXTIME_STATS/TXTIME_STATS) on
 * the console, per batch, for the host to put beside the wire's truth. Every
 * CONFIG_LATSCOPE_TIME_STATS_PERIOD_MS a low-priority thread reads the statistics through
 * net_mgmt (NET_REQUEST_STATS_GET_ALL) and prints the change since the last line, when there
 * is one; the control server also flushes a line on every request, so batches end where the
 * host changes path or markers (line format: lib/latscope_core/include/latscope_core/time_stats.h).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/net/net_mgmt.h>
#include <zephyr/net/net_stats.h>
#include <zephyr/sys/printk.h>

#include <latscope_core/time_stats.h>

#include "app.h"

static void read_totals(struct ls_time_stats *out)
{
	static struct net_stats st;

	if (net_mgmt(NET_REQUEST_STATS_GET_ALL, NULL, &st, sizeof(st)) != 0) {
		return;
	}
#if defined(CONFIG_NET_PKT_RXTIME_STATS)
	out->rx_sum_us = st.rx_time.sum;
	out->rx_count = st.rx_time.count;
#endif
#if defined(CONFIG_NET_PKT_TXTIME_STATS)
	out->tx_sum_us = st.tx_time.sum;
	out->tx_count = st.tx_time.count;
#endif
}

K_MUTEX_DEFINE(report_lock);
static struct ls_time_stats prev;

void time_stats_flush(void)
{
	struct ls_time_stats now = {0};
	char line[160];

	k_mutex_lock(&report_lock, K_FOREVER);
	read_totals(&now);
	if (ls_time_stats_line(&prev, &now, k_cycle_get_64(), sys_clock_hw_cycles_per_sec(), line,
			       sizeof(line)) > 0) {
		printk("%s", line);
		prev = now;
	}
	k_mutex_unlock(&report_lock);
}

static void time_stats_thread(void *a, void *b, void *c)
{
	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
	while (true) {
		k_msleep(CONFIG_LATSCOPE_TIME_STATS_PERIOD_MS);
		time_stats_flush();
	}
}

K_THREAD_DEFINE(latscope_time_stats, 1536, time_stats_thread, NULL, NULL, NULL,
		K_LOWEST_APPLICATION_THREAD_PRIO, 0, 1000);
