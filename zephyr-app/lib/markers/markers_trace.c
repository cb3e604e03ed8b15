/*
 * latscope marker trace (native_sim / gpio_emul): every output change of a marker pin fires a
 * gpio_emul callback; we record (channel, level) in order and print one line per edge:
 *   latscope-edge: <index> m<channel> rise|fall [t=<k_cycle_get_64() at the edge>]
 * The integration test checks the order and count of these lines against the expected marker
 * sequence of each path. Functional only: simulated time does not advance while code runs.
 *
 * The trace must be lossless, so its lines bypass the logging subsystem: with CONFIG_LOG_PRINTK
 * in deferred mode, printk() text goes through the log buffer, which drops messages under a
 * burst of edges plus the stack's own log lines ("--- N messages dropped ---" replaced the
 * first edge lines after a path switch, while every pulse had been emitted). Hence the build
 * check below. Edges that do not fit the queue are counted and reported as
 * "latscope-edge: lost N", which the integration test treats as a failure.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/device.h>
#include <zephyr/drivers/gpio.h>
#include <zephyr/drivers/gpio/gpio_emul.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/util.h>

#include <latscope/markers.h>

#if defined(CONFIG_LOG_PRINTK) && !defined(CONFIG_LOG_MODE_IMMEDIATE)
#error "CONFIG_LATSCOPE_MARKERS_TRACE needs CONFIG_LOG_PRINTK=n (or immediate logging): \
deferred logging drops printk lines, so the edge trace would lose edges"
#endif

#define MARKERS_NODE DT_COMPAT_GET_ANY_STATUS_OKAY(latscope_markers)
#define N_PINS       DT_PROP_LEN(MARKERS_NODE, marker_gpios)
#define SPEC(i, _) GPIO_DT_SPEC_GET_BY_IDX(MARKERS_NODE, marker_gpios, i)
static const struct gpio_dt_spec pins[N_PINS] = {LISTIFY(N_PINS, SPEC, (,))};

struct edge {
	uint8_t channel;
	uint8_t level;
	uint64_t cycles; /* k_cycle_get_64() at the edge (LATSCOPE_MARKERS_TRACE_TIME) */
};

K_MSGQ_DEFINE(edge_q, sizeof(struct edge), CONFIG_LATSCOPE_MARKERS_TRACE_DEPTH, 1);
static struct gpio_callback cbs[N_PINS];
static uint8_t last_level[N_PINS];
static atomic_t lost;

static void on_change(const struct device *port, struct gpio_callback *cb, gpio_port_pins_t pins_)
{
	ARG_UNUSED(cb);
	for (unsigned int i = 0; i < N_PINS; i++) {
		if (pins[i].port != port || !(pins_ & BIT(pins[i].pin))) {
			continue;
		}
		int level = gpio_emul_output_get(port, pins[i].pin);

		if (level < 0 || (uint8_t)level == last_level[i]) {
			continue;
		}
		last_level[i] = (uint8_t)level;
		struct edge e = {.channel = (uint8_t)i, .level = (uint8_t)level};

		if (IS_ENABLED(CONFIG_LATSCOPE_MARKERS_TRACE_TIME)) {
			e.cycles = k_cycle_get_64();
		}

		if (k_msgq_put(&edge_q, &e, K_NO_WAIT) != 0) {
			atomic_inc(&lost);
		}
	}
}

static void trace_thread(void *a, void *b, void *c)
{
	uint32_t index = 0;
	struct edge e;

	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
	while (true) {
		k_msgq_get(&edge_q, &e, K_FOREVER);
		if (IS_ENABLED(CONFIG_LATSCOPE_MARKERS_TRACE_TIME)) {
			printk("latscope-edge: %u m%u %s t=%llu\n", index++, e.channel,
			       e.level ? "rise" : "fall", (unsigned long long)e.cycles);
		} else {
			printk("latscope-edge: %u m%u %s\n", index++, e.channel,
			       e.level ? "rise" : "fall");
		}
		if (atomic_get(&lost) != 0) {
			printk("latscope-edge: lost %ld\n", (long)atomic_set(&lost, 0));
		}
	}
}

K_THREAD_DEFINE(latscope_trace, 1024, trace_thread, NULL, NULL, NULL, K_LOWEST_APPLICATION_THREAD_PRIO, 0, 0);

static int trace_init(void)
{
	for (unsigned int i = 0; i < N_PINS; i++) {
		gpio_init_callback(&cbs[i], on_change, BIT(pins[i].pin));
		gpio_add_callback(pins[i].port, &cbs[i]);
	}
	return 0;
}

SYS_INIT(trace_init, APPLICATION, 90);

void latscope_markers_trace_enable(bool on)
{
	for (unsigned int i = 0; i < N_PINS; i++) {
		if (on) {
			gpio_add_callback(pins[i].port, &cbs[i]);
		} else {
			gpio_remove_callback(pins[i].port, &cbs[i]);
		}
	}
}
