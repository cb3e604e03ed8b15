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

struct report_line {
	char text[128];
};

/* Lines are printed only by the reporter thread, at the edge trace's priority: a line printed
 * from the control thread would preempt the trace thread mid-line and interleave the two. The
 * trace thread may keep that priority busy through a whole run, so lines wait here (each with
 * the time it was taken) until it pauses. */
K_MSGQ_DEFINE(report_q, sizeof(struct report_line), CONFIG_LATSCOPE_TIME_STATS_LINES, 4);
K_MUTEX_DEFINE(report_lock);
static struct ls_time_stats prev;

void time_stats_flush(void)
{
	struct ls_time_stats now = {0};
	struct report_line line;

	k_mutex_lock(&report_lock, K_FOREVER);
	read_totals(&now);
	size_t n = ls_time_stats_line(&prev, &now, k_cycle_get_64(), sys_clock_hw_cycles_per_sec(),
				      line.text, sizeof(line.text));

	/* A line that did not fit the queue stays in the totals: the next line covers it. */
	if (n > 0 && n < sizeof(line.text) && k_msgq_put(&report_q, &line, K_NO_WAIT) == 0) {
		prev = now;
	}
	k_mutex_unlock(&report_lock);
}

static void time_stats_thread(void *a, void *b, void *c)
{
	struct report_line line;

	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
	while (true) {
		if (k_msgq_get(&report_q, &line, K_MSEC(CONFIG_LATSCOPE_TIME_STATS_PERIOD_MS)) == 0) {
			printk("%s", line.text);
		} else {
			time_stats_flush();
		}
	}
}

K_THREAD_DEFINE(latscope_time_stats, 1536, time_stats_thread, NULL, NULL, NULL,
		K_LOWEST_APPLICATION_THREAD_PRIO, 0, 1000);
