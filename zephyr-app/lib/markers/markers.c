/*
 * latscope marker library. Pins come from the devicetree node with compatible "latscope,markers".
 * Fast write: CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT stores straight into the GPIO controller's
 * atomic set/reset register (STM32 BSRR, Kinetis PSOR/PCOR), one store per edge; otherwise
 * gpio_port_set_bits_raw()/gpio_port_clear_bits_raw() on a port device cached at init.
 * Pulse width: at least CONFIG_LATSCOPE_MARKERS_PULSE_NS, as busy-loop iterations computed from
 * the CPU clock at init (each iteration is a nop plus loop overhead, >= 1 cycle).
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
#include <latscope_core/marker_code.h>

#define MARKERS_NODE DT_COMPAT_GET_ANY_STATUS_OKAY(latscope_markers)
#define N_PINS       DT_PROP_LEN(MARKERS_NODE, marker_gpios)

BUILD_ASSERT(N_PINS <= LS_MARKER_CHANNELS, "latscope,markers: at most 5 marker-gpios (m0..m4)");

#define SPEC(i, _) GPIO_DT_SPEC_GET_BY_IDX(MARKERS_NODE, marker_gpios, i)
static const struct gpio_dt_spec pins[N_PINS] = {LISTIFY(N_PINS, SPEC, (,))};

volatile uint8_t latscope_point_channel[LS_POINT_COUNT] = {
	[0 ... LS_POINT_COUNT - 1] = LS_MARKER_NONE,
};
static atomic_t pulses;
static uint32_t pulse_loops;
static uint32_t pulse_cpu_hz;

/* CPU clock for the pulse width: the devicetree's cpu@0 clock-frequency where boards give it,
 * else the system timer's rate (on Cortex-M SysTick runs at the core clock); a Kconfig value
 * overrides both. */
#if CONFIG_LATSCOPE_MARKERS_CPU_HZ > 0
#define CPU_HZ() ((uint32_t)CONFIG_LATSCOPE_MARKERS_CPU_HZ)
#elif DT_NODE_HAS_PROP(DT_PATH(cpus, cpu_0), clock_frequency)
#define CPU_HZ() ((uint32_t)DT_PROP(DT_PATH(cpus, cpu_0), clock_frequency))
#else
#define CPU_HZ() ((uint32_t)sys_clock_hw_cycles_per_sec())
#endif

/* Fastest output edges: STM32 OSPEEDR (+0x08, 2 bits per pin, 0b11 very high); Kinetis
 * PORTx_PCR(n) (PORT base + 4n): SRE (bit 2) = 0 fast slew, DSE (bit 6) = 1 high drive. */
static void fast_gpio(unsigned int i);

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
		fast_gpio(i);
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
	pulse_cpu_hz = CPU_HZ();
	/* loops >= ns * f / 1e9, rounded up; each loop iteration takes at least one cycle. */
	pulse_loops = (uint32_t)(((uint64_t)CONFIG_LATSCOPE_MARKERS_PULSE_NS * pulse_cpu_hz +
				  999999999u) / 1000000000u);
	return 0;
}

void latscope_markers_pulse_info(uint32_t *cpu_hz, uint32_t *loops, uint32_t *ns)
{
	*cpu_hz = pulse_cpu_hz;
	*loops = pulse_loops;
	*ns = CONFIG_LATSCOPE_MARKERS_PULSE_NS;
}

void latscope_markers_pulses_reset(void)
{
	atomic_set(&pulses, 0);
}

#if defined(CONFIG_LATSCOPE_MARKERS_FAST_GPIO) && defined(CONFIG_SOC_FAMILY_STM32)
static void fast_gpio(unsigned int i)
{
	volatile uint32_t *ospeedr = (volatile uint32_t *)(ctlr_addr[i] + 0x08u);

	*ospeedr |= 3u << (2u * pins[i].pin);
}
#elif defined(CONFIG_LATSCOPE_MARKERS_FAST_GPIO) && defined(CONFIG_SOC_FAMILY_KINETIS)
#define PORT_ADDR(i, _) DT_REG_ADDR(DT_PHANDLE(DT_GPIO_CTLR_BY_IDX(MARKERS_NODE, marker_gpios, i), \
					   nxp_kinetis_port))
static const uintptr_t port_addr[N_PINS] = {LISTIFY(N_PINS, PORT_ADDR, (,))};

static void fast_gpio(unsigned int i)
{
	volatile uint32_t *pcr = (volatile uint32_t *)(port_addr[i] + 4u * pins[i].pin);

	*pcr = (*pcr & ~BIT(2)) | BIT(6);
}
#else
static void fast_gpio(unsigned int i)
{
	ARG_UNUSED(i);
}
#endif

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

static inline void pin_high(const struct marker_out *o)
{
#if defined(CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT)
	*o->set_reg = o->set_val;
#else
	gpio_port_set_bits_raw(o->port, o->mask);
#endif
}

static inline void pin_low(const struct marker_out *o)
{
#if defined(CONFIG_LATSCOPE_MARKERS_WRITE_DIRECT)
	*o->clr_reg = o->clr_val;
#else
	gpio_port_clear_bits_raw(o->port, o->mask);
#endif
}

/* Busy wait of @p units pulse widths (each unit pulse_loops iterations of >= 1 cycle). */
static inline void wait_units(uint32_t units)
{
	for (uint32_t i = 0; i < units * pulse_loops; i++) {
		arch_nop();
	}
}

void latscope_marker_pulse(unsigned int channel)
{
	if (channel >= n_outs) {
		return;
	}
	const struct marker_out *o = &outs[channel];

	pin_high(o);
	wait_units(1u);
	pin_low(o);
	atomic_inc(&pulses);
}

void latscope_marker_pulse_id(unsigned int channel, uint32_t seq)
{
	if (channel >= n_outs) {
		return;
	}
	const struct marker_out *o = &outs[channel];
	struct ls_marker_code code;

	ls_marker_code(seq, &code);
	unsigned int key = irq_lock();

	/* The first rising edge is the measurement point; the code follows it. The idle after the
	 * last pulse is not waited: it is the spacing the decoder needs before the channel's next
	 * marker (a closer one decodes as damaged, and is counted so). */
	for (unsigned int k = 0; k < LS_CODE_PULSES; k++) {
		pin_high(o);
		wait_units(code.high[k]);
		pin_low(o);
		if (k + 1u < LS_CODE_PULSES) {
			wait_units(code.low[k]);
		}
	}
	irq_unlock(key);
	atomic_inc(&pulses);
}

#if !defined(CONFIG_LATSCOPE_MARKERS_TRACE)
void latscope_markers_trace_enable(bool on)
{
	ARG_UNUSED(on);
}
#endif

uint32_t latscope_markers_pulses(void)
{
	return (uint32_t)atomic_get(&pulses);
}
