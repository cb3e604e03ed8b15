/*
 * latscope portable core: event counters the host reads over the control port.
 * Counters are 32-bit, wrap modulo 2^32, and are bumped with relaxed atomic adds so the driver
 * context, the RX thread and the control thread may all update them.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_COUNTERS_H_
#define LATSCOPE_CORE_COUNTERS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Counter identifiers. The order is the wire order of GET_COUNTERS; append only. */
enum ls_counter {
	LS_CNT_RX_FRAMES = 0,  /**< frames seen by the driver shim's receive hook */
	LS_CNT_RX_FAST,        /**< frames taken by the fast-track filter */
	LS_CNT_RX_STACK,       /**< datagrams received by the stack-path echo (socket/net_context) */
	LS_CNT_TX_ECHO,        /**< echo replies handed to the stack or driver successfully */
	LS_CNT_TX_ERRORS,      /**< echo replies that failed (allocation, send error) */
	LS_CNT_SIZE_SKIPPED,   /**< datagrams echoed without markers: size not selected */
	LS_CNT_CTRL_REQUESTS,  /**< control requests answered */
	LS_CNT_CTRL_ERRORS,    /**< control requests answered with a non-OK status */
	LS_CNT_MARKER_PULSES,  /**< marker pulses emitted (all channels, calibration included) */
	LS_CNT_FAST_REJECTED,  /**< frames to the fast port the fast track left to the stack */
	LS_CNT_FAST_BUSY,      /**< accepted frames left to the stack: fast-track queue full */
	LS_CNT_COUNT
};

struct ls_counters {
	uint32_t value[LS_CNT_COUNT];
};

/** Names ("rx_frames", ...) indexed by enum ls_counter. */
extern const char *const ls_counter_names[LS_CNT_COUNT];

static inline void ls_counter_add(struct ls_counters *c, enum ls_counter id, uint32_t n)
{
	if ((unsigned int)id < LS_CNT_COUNT) {
		__atomic_fetch_add(&c->value[id], n, __ATOMIC_RELAXED);
	}
}

static inline void ls_counter_inc(struct ls_counters *c, enum ls_counter id)
{
	ls_counter_add(c, id, 1u);
}

static inline uint32_t ls_counter_get(const struct ls_counters *c, enum ls_counter id)
{
	return ((unsigned int)id < LS_CNT_COUNT) ?
		__atomic_load_n(&c->value[id], __ATOMIC_RELAXED) : 0u;
}

void ls_counters_reset(struct ls_counters *c);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_COUNTERS_H_ */
