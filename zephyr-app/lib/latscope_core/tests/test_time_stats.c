/* Unit tests of the time-statistics console line. SPDX-License-Identifier: BSD-2-Clause */
#include "latscope_core/time_stats.h"
#include "ls_test.h"

int main(void)
{
	struct ls_time_stats a = {0}, b = {.rx_sum_us = 1234, .rx_count = 30, .tx_sum_us = 900,
					   .tx_count = 31};
	char buf[160];

	/* Nothing changed: no line. */
	CHECK_EQ(ls_time_stats_line(&a, &a, 5, 333333343u, buf, sizeof(buf)), 0);
	size_t n = ls_time_stats_line(&a, &b, 123456789012ull, 333333343u, buf, sizeof(buf));

	CHECK_STR(buf, "latscope-netstats: t=123456789012 hz=333333343 rx_n=30 rx_us=1234 "
		       "tx_n=31 tx_us=900\n");
	CHECK_EQ(n, strlen(buf));
	/* The change since the previous totals, per field. */
	struct ls_time_stats c = b;

	c.tx_count += 2;
	c.tx_sum_us += 50;
	ls_time_stats_line(&b, &c, 1, 2, buf, sizeof(buf));
	CHECK_STR(buf, "latscope-netstats: t=1 hz=2 rx_n=0 rx_us=0 tx_n=2 tx_us=50\n");
	/* Totals reset below the previous ones: the new totals are the change. */
	struct ls_time_stats d = {.rx_sum_us = 7, .rx_count = 1};

	ls_time_stats_line(&c, &d, 3, 2, buf, sizeof(buf));
	CHECK_STR(buf, "latscope-netstats: t=3 hz=2 rx_n=1 rx_us=7 tx_n=0 tx_us=0\n");
	/* Truncation: snprintf semantics. */
	CHECK_EQ(ls_time_stats_line(&a, &b, 123456789012ull, 333333343u, buf, 10), n);
	CHECK_STR(buf, "latscope-");
	CHECK_EQ(ls_time_stats_line(NULL, &b, 0, 0, buf, sizeof(buf)), 0);
	TEST_DONE();
}
