/*
 * latscope portable core: control protocol parser, encoder and dispatcher.
 * Specification: docs/zephyr-app.md, "Control protocol".
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/control.h"

#include <string.h>

const char *const ls_path_names[LS_PATH_COUNT] = {
	[LS_PATH_SOCKET] = "socket",
	[LS_PATH_NETCTX] = "netctx",
	[LS_PATH_FAST] = "fast",
};

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline uint32_t rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t)(v >> 16));
	wr16(p + 2, (uint16_t)v);
}

void ls_ctrl_config_default(struct ls_ctrl_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->path = LS_PATH_SOCKET;
	ls_marker_map_default(&cfg->markers);
}

bool ls_ctrl_size_selected(const struct ls_ctrl_config *cfg, size_t payload_len)
{
	if (cfg->n_sizes == 0u) {
		return true;
	}
	for (unsigned int i = 0; i < cfg->n_sizes && i < LS_CTRL_MAX_SIZES; i++) {
		if (cfg->sizes[i] == payload_len) {
			return true;
		}
	}
	return false;
}

int ls_ctrl_parse_request(const uint8_t *buf, size_t len, struct ls_ctrl_request *req)
{
	if (buf == NULL || len < 2 || buf[0] != LS_CTRL_MAGIC0 || buf[1] != LS_CTRL_MAGIC1) {
		return -1;
	}
	memset(req, 0, sizeof(*req));
	if (len >= 3) {
		req->version = buf[2];
	}
	if (len >= 4) {
		req->opcode = buf[3];
	}
	if (len >= 6) {
		req->id = rd16(&buf[4]);
	}
	if (len < LS_CTRL_REQ_HDR_LEN) {
		return LS_ST_BAD_LENGTH;
	}
	if (req->version != LS_CTRL_VERSION) {
		return LS_ST_BAD_VERSION;
	}
	req->body_len = rd16(&buf[6]);
	if (req->body_len > LS_CTRL_MAX_BODY || req->body_len != len - LS_CTRL_REQ_HDR_LEN) {
		req->body_len = 0;
		return LS_ST_BAD_LENGTH;
	}
	req->body = &buf[LS_CTRL_REQ_HDR_LEN];
	return LS_ST_OK;
}

int ls_ctrl_parse_response(const uint8_t *buf, size_t len, struct ls_ctrl_response *resp)
{
	if (buf == NULL || len < 2 || buf[0] != LS_CTRL_MAGIC0 || buf[1] != LS_CTRL_MAGIC1) {
		return -1;
	}
	memset(resp, 0, sizeof(*resp));
	if (len < LS_CTRL_RESP_HDR_LEN || (buf[3] & 0x80u) == 0u) {
		return LS_ST_BAD_LENGTH;
	}
	if (buf[2] != LS_CTRL_VERSION) {
		return LS_ST_BAD_VERSION;
	}
	resp->opcode = (uint8_t)(buf[3] & 0x7fu);
	resp->id = rd16(&buf[4]);
	resp->status = buf[6];
	resp->body_len = rd16(&buf[8]);
	if (resp->body_len > LS_CTRL_MAX_BODY || resp->body_len != len - LS_CTRL_RESP_HDR_LEN) {
		resp->body_len = 0;
		return LS_ST_BAD_LENGTH;
	}
	resp->body = &buf[LS_CTRL_RESP_HDR_LEN];
	return LS_ST_OK;
}

size_t ls_ctrl_encode_request(uint8_t *buf, size_t cap, uint8_t opcode, uint16_t id,
			      const uint8_t *body, uint16_t body_len)
{
	size_t total = LS_CTRL_REQ_HDR_LEN + (size_t)body_len;

	if (buf == NULL || body_len > LS_CTRL_MAX_BODY || cap < total ||
	    (body_len > 0u && body == NULL)) {
		return 0;
	}
	buf[0] = LS_CTRL_MAGIC0;
	buf[1] = LS_CTRL_MAGIC1;
	buf[2] = LS_CTRL_VERSION;
	buf[3] = opcode;
	wr16(&buf[4], id);
	wr16(&buf[6], body_len);
	if (body_len > 0u) {
		memmove(&buf[LS_CTRL_REQ_HDR_LEN], body, body_len);
	}
	return total;
}

size_t ls_ctrl_encode_response(uint8_t *buf, size_t cap, uint8_t opcode, uint16_t id,
			       uint8_t status, const uint8_t *body, uint16_t body_len)
{
	size_t total = LS_CTRL_RESP_HDR_LEN + (size_t)body_len;

	if (buf == NULL || body_len > LS_CTRL_MAX_BODY || cap < total ||
	    (body_len > 0u && body == NULL)) {
		return 0;
	}
	buf[0] = LS_CTRL_MAGIC0;
	buf[1] = LS_CTRL_MAGIC1;
	buf[2] = LS_CTRL_VERSION;
	buf[3] = (uint8_t)(opcode | 0x80u);
	wr16(&buf[4], id);
	buf[6] = status;
	buf[7] = 0;
	wr16(&buf[8], body_len);
	if (body_len > 0u) {
		memmove(&buf[LS_CTRL_RESP_HDR_LEN], body, body_len);
	}
	return total;
}

static void changed(struct ls_ctrl_state *st)
{
	if (st->ops != NULL && st->ops->config_changed != NULL) {
		st->ops->config_changed(st->user, &st->config);
	}
}

/* Handle a valid request; write the reply body into body (capacity cap); set *body_len. */
static uint8_t dispatch(struct ls_ctrl_state *st, const struct ls_ctrl_request *rq, uint8_t *body,
			size_t cap, uint16_t *body_len)
{
	const struct ls_ctrl_ops *ops = st->ops;
	const uint8_t *b = rq->body;
	size_t n;

	*body_len = 0;
	switch (rq->opcode) {
	case LS_OP_GET_INFO:
		if (rq->body_len != 0u) {
			return LS_ST_BAD_LENGTH;
		}
		if (ops == NULL || ops->build_info == NULL) {
			return LS_ST_UNSUPPORTED;
		}
		n = ops->build_info(st->user, (char *)body, cap);
		*body_len = (uint16_t)(n < cap ? n : cap);
		return LS_ST_OK;
	case LS_OP_SET_PATH:
		if (rq->body_len != 1u) {
			return LS_ST_BAD_LENGTH;
		}
		if (b[0] >= LS_PATH_COUNT) {
			return LS_ST_BAD_VALUE;
		}
		if (ops != NULL && ops->path_supported != NULL &&
		    !ops->path_supported(st->user, b[0])) {
			return LS_ST_UNSUPPORTED;
		}
		st->config.path = b[0];
		changed(st);
		return LS_ST_OK;
	case LS_OP_SET_MARKERS: {
		uint8_t prev[LS_MARKER_CHANNELS];

		memcpy(prev, st->config.markers.channel_point, sizeof(prev));
		if (rq->body_len != LS_MARKER_CHANNELS) {
			return LS_ST_BAD_LENGTH;
		}
		if (ls_marker_map_set(&st->config.markers, b) != 0) {
			return LS_ST_BAD_VALUE;
		}
		for (unsigned int ch = 0; ch < LS_MARKER_CHANNELS; ch++) {
			if (b[ch] != LS_MARKER_NONE && ops != NULL && ops->point_supported != NULL &&
			    !ops->point_supported(st->user, b[ch])) {
				ls_marker_map_set(&st->config.markers, prev);
				return LS_ST_UNSUPPORTED;
			}
		}
		changed(st);
		return LS_ST_OK;
	}
	case LS_OP_SET_SIZES: {
		uint16_t sizes[LS_CTRL_MAX_SIZES];

		if (rq->body_len < 1u || rq->body_len != 1u + 2u * (size_t)b[0]) {
			return LS_ST_BAD_LENGTH;
		}
		if (b[0] > LS_CTRL_MAX_SIZES) {
			return LS_ST_BAD_VALUE;
		}
		for (unsigned int i = 0; i < b[0]; i++) {
			sizes[i] = rd16(&b[1 + 2 * i]);
			if (sizes[i] > LS_UDP_MAX_PAYLOAD) {
				return LS_ST_BAD_VALUE;
			}
		}
		st->config.n_sizes = b[0];
		memcpy(st->config.sizes, sizes, sizeof(uint16_t) * b[0]);
		changed(st);
		return LS_ST_OK;
	}
	case LS_OP_CALIBRATE: {
		uint64_t cycles = 0;
		uint32_t hz = 0;
		uint32_t pulses;

		if (rq->body_len != 5u) {
			return LS_ST_BAD_LENGTH;
		}
		pulses = rd32(&b[1]);
		if (b[0] >= LS_MARKER_CHANNELS || pulses == 0u || pulses > LS_CTRL_MAX_PULSES) {
			return LS_ST_BAD_VALUE;
		}
		if (ops == NULL || ops->calibrate == NULL) {
			return LS_ST_UNSUPPORTED;
		}
		if (cap < 16u) {
			return LS_ST_FAILED;
		}
		if (ops->calibrate(st->user, b[0], pulses, &cycles, &hz) != 0) {
			return LS_ST_FAILED;
		}
		wr32(&body[0], pulses);
		wr32(&body[4], (uint32_t)(cycles >> 32));
		wr32(&body[8], (uint32_t)cycles);
		wr32(&body[12], hz);
		*body_len = 16;
		return LS_ST_OK;
	}
	case LS_OP_GET_COUNTERS:
		if (rq->body_len != 0u) {
			return LS_ST_BAD_LENGTH;
		}
		if (cap < 1u + 4u * LS_CNT_COUNT) {
			return LS_ST_FAILED;
		}
		body[0] = LS_CNT_COUNT;
		for (unsigned int i = 0; i < LS_CNT_COUNT; i++) {
			uint32_t v = st->counters ? ls_counter_get(st->counters, (enum ls_counter)i) : 0;

			wr32(&body[1 + 4 * i], v);
		}
		*body_len = (uint16_t)(1u + 4u * LS_CNT_COUNT);
		return LS_ST_OK;
	case LS_OP_RESET_COUNTERS:
		if (rq->body_len != 0u) {
			return LS_ST_BAD_LENGTH;
		}
		if (st->counters != NULL) {
			ls_counters_reset(st->counters);
		}
		if (st->ops != NULL && st->ops->counters_reset != NULL) {
			st->ops->counters_reset(st->user);
		}
		return LS_ST_OK;
	case LS_OP_GET_CONFIG:
		if (rq->body_len != 0u) {
			return LS_ST_BAD_LENGTH;
		}
		if (cap < 7u + 2u * LS_CTRL_MAX_SIZES) {
			return LS_ST_FAILED;
		}
		body[0] = st->config.path;
		memcpy(&body[1], st->config.markers.channel_point, LS_MARKER_CHANNELS);
		body[6] = st->config.n_sizes;
		for (unsigned int i = 0; i < st->config.n_sizes; i++) {
			wr16(&body[7 + 2 * i], st->config.sizes[i]);
		}
		*body_len = (uint16_t)(7u + 2u * st->config.n_sizes);
		return LS_ST_OK;
	default:
		return LS_ST_UNKNOWN_OP;
	}
}

size_t ls_ctrl_handle(struct ls_ctrl_state *st, const uint8_t *in, size_t in_len, uint8_t *out,
		      size_t out_cap)
{
	struct ls_ctrl_request rq;
	uint16_t body_len = 0;
	uint8_t status;
	int rc;

	if (st == NULL || out == NULL || out_cap < LS_CTRL_RESP_HDR_LEN) {
		return 0;
	}
	rc = ls_ctrl_parse_request(in, in_len, &rq);
	if (rc < 0) {
		return 0;
	}
	if (rc == LS_ST_OK) {
		size_t cap = out_cap - LS_CTRL_RESP_HDR_LEN;

		if (cap > LS_CTRL_MAX_BODY) {
			cap = LS_CTRL_MAX_BODY;
		}
		status = dispatch(st, &rq, &out[LS_CTRL_RESP_HDR_LEN], cap, &body_len);
	} else {
		status = (uint8_t)rc;
	}
	if (status != LS_ST_OK) {
		body_len = 0;
	}
	/* A successful reset leaves every counter at zero, its own request uncounted. */
	if (st->counters != NULL && !(status == LS_ST_OK && rq.opcode == LS_OP_RESET_COUNTERS)) {
		ls_counter_inc(st->counters, LS_CNT_CTRL_REQUESTS);
		if (status != LS_ST_OK) {
			ls_counter_inc(st->counters, LS_CNT_CTRL_ERRORS);
		}
	}
	/* The body is already in place: encode the header only. */
	out[0] = LS_CTRL_MAGIC0;
	out[1] = LS_CTRL_MAGIC1;
	out[2] = LS_CTRL_VERSION;
	out[3] = (uint8_t)(rq.opcode | 0x80u);
	wr16(&out[4], rq.id);
	out[6] = status;
	out[7] = 0;
	wr16(&out[8], body_len);
	return LS_CTRL_RESP_HDR_LEN + (size_t)body_len;
}

const char *ls_status_name(int status)
{
	switch (status) {
	case LS_ST_OK: return "ok";
	case LS_ST_BAD_VERSION: return "bad-version";
	case LS_ST_BAD_LENGTH: return "bad-length";
	case LS_ST_UNKNOWN_OP: return "unknown-opcode";
	case LS_ST_BAD_VALUE: return "bad-value";
	case LS_ST_UNSUPPORTED: return "unsupported";
	case LS_ST_FAILED: return "failed";
	default: return "invalid";
	}
}
