/*
 * latscope portable core: the DUT control protocol (UDP, default port 4240), specified in
 * docs/zephyr-app.md. All integers are big-endian.
 *
 *   request:  'L' 'C' ver=1 opcode       id:u16  len:u16           body[len]
 *   response: 'L' 'C' ver=1 opcode|0x80  id:u16  status:u8 rsvd:u8 len:u16 body[len]
 *
 * The parser never reads past the buffer it is given; the dispatcher ls_ctrl_handle() applies
 * requests to a struct ls_ctrl_state and calls platform hooks (calibration, build info).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_CONTROL_H_
#define LATSCOPE_CORE_CONTROL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "latscope_core/counters.h"
#include "latscope_core/markers.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LS_CTRL_MAGIC0       0x4Cu /* 'L' */
#define LS_CTRL_MAGIC1       0x43u /* 'C' */
#define LS_CTRL_VERSION      1u
#define LS_CTRL_REQ_HDR_LEN  8u
#define LS_CTRL_RESP_HDR_LEN 10u
#define LS_CTRL_MAX_BODY     1024u
#define LS_CTRL_DEFAULT_PORT 4240u
#define LS_CTRL_MAX_SIZES    8u
#define LS_CTRL_MAX_PULSES   1000000u
#define LS_UDP_MAX_PAYLOAD   1472u /* 1500-byte MTU - 20 (IPv4) - 8 (UDP) */

enum ls_opcode {
	LS_OP_GET_INFO = 0x01,       /**< body: none; reply: text "key=value\n" lines */
	LS_OP_SET_PATH = 0x02,       /**< body: u8 path */
	LS_OP_SET_MARKERS = 0x03,    /**< body: 5 x u8 point per channel m0..m4 (0xff: unused) */
	LS_OP_SET_SIZES = 0x04,      /**< body: u8 n (0..8), n x u16 UDP payload sizes */
	LS_OP_CALIBRATE = 0x05,      /**< body: u8 channel, u32 pulses; reply: u32, u64, u32 */
	LS_OP_GET_COUNTERS = 0x06,   /**< body: none; reply: u8 n, n x u32 */
	LS_OP_RESET_COUNTERS = 0x07, /**< body: none */
	LS_OP_GET_CONFIG = 0x08,     /**< body: none; reply: u8 path, 5 x u8 points, u8 n, n x u16 */
};

enum ls_status {
	LS_ST_OK = 0,
	LS_ST_BAD_VERSION = 1,  /**< version byte is not LS_CTRL_VERSION */
	LS_ST_BAD_LENGTH = 2,   /**< header or body shorter/longer than declared or required */
	LS_ST_UNKNOWN_OP = 3,
	LS_ST_BAD_VALUE = 4,    /**< a field is out of range */
	LS_ST_UNSUPPORTED = 5,  /**< valid, but this firmware build lacks the feature */
	LS_ST_FAILED = 6,       /**< the platform hook failed */
};

/** Echo paths the host can select. Values are part of the protocol. */
enum ls_path {
	LS_PATH_SOCKET = 0,  /**< stack path, BSD socket UDP echo */
	LS_PATH_NETCTX = 1,  /**< stack path, net_context receive callback echo */
	LS_PATH_FAST = 2,    /**< fast-track: NET_PKT_FILTER hook in driver context */
	LS_PATH_COUNT
};

extern const char *const ls_path_names[LS_PATH_COUNT];

/** A parsed request. body points into the caller's buffer. */
struct ls_ctrl_request {
	uint8_t version;
	uint8_t opcode;
	uint16_t id;
	uint16_t body_len;
	const uint8_t *body;
};

/** A parsed response. body points into the caller's buffer. */
struct ls_ctrl_response {
	uint8_t opcode; /**< without the 0x80 reply bit */
	uint16_t id;
	uint8_t status;
	uint16_t body_len;
	const uint8_t *body;
};

/** Measurement configuration the host selects. */
struct ls_ctrl_config {
	uint8_t path;
	struct ls_marker_map markers;
	uint8_t n_sizes;                       /**< 0: every size is selected */
	uint16_t sizes[LS_CTRL_MAX_SIZES];     /**< UDP payload bytes */
};

/** Platform hooks; any may be NULL (the request then answers LS_ST_UNSUPPORTED). */
struct ls_ctrl_ops {
	/** Is @p path compiled into this firmware? NULL: all paths are. */
	bool (*path_supported)(void *user, uint8_t path);
	/** Can this firmware raise marker @p point? NULL: every point. SET_MARKERS answers
	 *  LS_ST_UNSUPPORTED (map unchanged) when a requested point is not. */
	bool (*point_supported)(void *user, uint8_t point);
	/** Emit @p pulses back-to-back pulses on @p channel; report elapsed cycles and cycle rate. */
	int (*calibrate)(void *user, uint8_t channel, uint32_t pulses, uint64_t *cycles,
			 uint32_t *cycle_hz);
	/** Write build info as "key=value\n" lines; return length written (<= cap). */
	size_t (*build_info)(void *user, char *buf, size_t cap);
	/** Called by RESET_COUNTERS after the core's counters are zeroed: reset the platform's own
	 *  counters (e.g. the marker library's pulse count) so that every counter restarts at 0. */
	void (*counters_reset)(void *user);
	/** Called after the configuration changed (path, markers, sizes). */
	void (*config_changed)(void *user, const struct ls_ctrl_config *cfg);
};

struct ls_ctrl_state {
	struct ls_ctrl_config config;
	struct ls_counters *counters;
	const struct ls_ctrl_ops *ops;
	void *user;
};

/** Defaults: socket path, default marker map, all sizes selected. */
void ls_ctrl_config_default(struct ls_ctrl_config *cfg);

/** Is a datagram with @p payload_len bytes selected for markers? */
bool ls_ctrl_size_selected(const struct ls_ctrl_config *cfg, size_t payload_len);

/**
 * Parse a request header and locate its body. Returns LS_ST_OK, LS_ST_BAD_LENGTH (short header,
 * body length beyond the buffer or above LS_CTRL_MAX_BODY) or LS_ST_BAD_VERSION. Returns -1 when
 * the magic is wrong (not a control request at all: the server stays silent).
 */
int ls_ctrl_parse_request(const uint8_t *buf, size_t len, struct ls_ctrl_request *req);

/** Parse a response (host side and tests). Same return convention as ls_ctrl_parse_request(). */
int ls_ctrl_parse_response(const uint8_t *buf, size_t len, struct ls_ctrl_response *resp);

/** Encode a request; returns its length, or 0 if @p cap is too small or body_len too large. */
size_t ls_ctrl_encode_request(uint8_t *buf, size_t cap, uint8_t opcode, uint16_t id,
			      const uint8_t *body, uint16_t body_len);

/** Encode a response; returns its length, or 0 if @p cap is too small or body_len too large. */
size_t ls_ctrl_encode_response(uint8_t *buf, size_t cap, uint8_t opcode, uint16_t id,
			       uint8_t status, const uint8_t *body, uint16_t body_len);

/**
 * Handle one request datagram and write the response into @p out. Returns the response length,
 * or 0 when nothing must be sent (wrong magic, or @p out_cap below LS_CTRL_RESP_HDR_LEN).
 * Counts LS_CNT_CTRL_REQUESTS / LS_CNT_CTRL_ERRORS when st->counters is set.
 */
size_t ls_ctrl_handle(struct ls_ctrl_state *st, const uint8_t *in, size_t in_len, uint8_t *out,
		      size_t out_cap);

const char *ls_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_CONTROL_H_ */
