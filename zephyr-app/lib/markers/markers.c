/*
 * latscope marker library. Pins come from the devicetree node with compatible "latscope,markers".
 * Fast write: CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT stores straight into the GPIO controller's
 * atomic set/reset register (STM32 BSRR, Kinetis PSOR/PCOR), one store per edge; otherwise
 * gpio_port_set_bits_raw()/gpio_port_clear_bits_raw() on a port device cached at init.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <errno.h>
#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/drivers/gpio.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/atomic.h>
#include <zephyr/sys/util.h>

#include <latscope/markers.h>

#define MARKERS_NODE DT_COMPAT_GET_ANY_STATUS_OKAY(latscope_markers)
#define N_PINS       DT_PROP_LEN(MARKERS_NODE, marker_gpios)

BUILD_ASSERT(N_PINS <= LS_MARKER_CHANNELS, "latscope,markers: at most 5 marker-gpios (m0..m4)");

#define SPEC(i, _) GPIO_DT_SPEC_GET_BY_IDX(MARKERS_NODE, marker_gpios, i)
static const struct gpio_dt_spec pins[N_PINS] = {LISTIFY(N_PINS, SPEC, (,))};

volatile uint8_t latscope_point_channel[LS_POINT_COUNT] = {
	[0 ... LS_POINT_COUNT - 1] = LS_MARKER_NONE,
};
static atomic_t pulses;

#if defined(CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT)
#if defined(CONFIG_SOC_FAMILY_STM32)
#define SET_OFFSET 0x18u /* GPIOx_BSRR: bits 0..15 set, 16..31 reset */
#define CLR_OFFSET 0x18u
#define CLR_SHIFT  16u
#elif defined(CONFIG_SOC_FAMILY_KINETIS)
#define SET_OFFSET 0x4u  /* GPIOx_PSOR */
#define CLR_OFFSET 0x8u  /* GPIOx_PCOR */
#define CLR_SHIFT  0u
#endif
#define CTLR_ADDR(i, _) DT_REG_ADDR(DT_GPIO_CTLR_BY_IDX(MARKERS_NODE, marker_gpios, i))
static const uintptr_t ctlr_addr[N_PINS] = {LISTIFY(N_PINS, CTLR_ADDR, (,))};
#endif

struct marker_out {
#if defined(CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT)
	volatile uint32_t *set_reg;
	volatile uint32_t *clr_reg;
	uint32_t set_val;
	uint32_t clr_val;
#else
	const struct device *port;
	gpio_port_pins_t mask;
#endif
};

static struct marker_out outs[LS_MARKER_CHANNELS];
static unsigned int n_outs;

int latscope_markers_init(void)
{
	for (unsigned int i = 0; i < N_PINS; i++) {
		if (!gpio_is_ready_dt(&pins[i])) {
			return -ENODEV;
		}
		int rc = gpio_pin_configure_dt(&pins[i], GPIO_OUTPUT_INACTIVE);

		if (rc != 0) {
			return rc;
		}
#if defined(CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT)
		outs[i].set_reg = (volatile uint32_t *)(ctlr_addr[i] + SET_OFFSET);
		outs[i].clr_reg = (volatile uint32_t *)(ctlr_addr[i] + CLR_OFFSET);
		outs[i].set_val = BIT(pins[i].pin);
		outs[i].clr_val = BIT(pins[i].pin) << CLR_SHIFT;
#else
		outs[i].port = pins[i].port;
		outs[i].mask = BIT(pins[i].pin);
#endif
	}
	n_outs = N_PINS;
	return 0;
}

unsigned int latscope_markers_count(void)
{
	return N_PINS;
}

void latscope_markers_set_map(const struct ls_marker_map *map)
{
	for (unsigned int p = 0; p < LS_POINT_COUNT; p++) {
		uint8_t ch = map->point_channel[p];

		latscope_point_channel[p] = (ch < N_PINS) ? ch : LS_MARKER_NONE;
	}
}

void latscope_marker_pulse(unsigned int channel)
{
	if (channel >= n_outs) {
		return;
	}
	const struct marker_out *o = &outs[channel];

#if defined(CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT)
	*o->set_reg = o->set_val;
	for (int i = 0; i < CONFIG_LATSCOPE_MARKERS_PULSE_NOPS; i++) {
		arch_nop();
	}
	*o->clr_reg = o->clr_val;
#else
	gpio_port_set_bits_raw(o->port, o->mask);
	for (int i = 0; i < CONFIG_LATSCOPE_MARKERS_PULSE_NOPS; i++) {
		arch_nop();
	}
	gpio_port_clear_bits_raw(o->port, o->mask);
#endif
	atomic_inc(&pulses);
}

uint32_t latscope_markers_pulses(void)
{
	return (uint32_t)atomic_get(&pulses);
}
