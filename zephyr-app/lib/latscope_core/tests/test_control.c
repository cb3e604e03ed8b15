/* Unit tests of the control protocol: encoder, parsers, dispatcher against the shared vectors.
 * SPDX-License-Identifier: BSD-2-Clause */
#include "latscope_core/control.h"
#include "latscope_core/traffic.h"
#include "ls_test.h"

static int changes;

static bool mock_path_supported(void *user, uint8_t path)
{
	(void)user;
	return path != LS_PATH_FAST;
}

static int mock_calibrate(void *user, uint8_t channel, uint32_t pulses, uint64_t *cycles,
			  uint32_t *hz)
{
	(void)user;
	(void)channel;
	*cycles = 12ull * pulses;
	*hz = 100000000u;
	return 0;
}

static size_t mock_build_info(void *user, char *buf, size_t cap)
{
	static const char info[] = "version=0.1.0\nboard=host\n";

	(void)user;
	if (cap < sizeof(info) - 1) {
		return 0;
	}
	memcpy(buf, info, sizeof(info) - 1);
	return sizeof(info) - 1;
}

static void mock_changed(void *user, const struct ls_ctrl_config *cfg)
{
	(void)user;
	(void)cfg;
	changes++;
}

static const struct ls_ctrl_ops mock_ops = {
	.path_supported = mock_path_supported,
	.calibrate = mock_calibrate,
	.build_info = mock_build_info,
	.config_changed = mock_changed,
};

static size_t unhex(const char *s, unsigned char *out, size_t cap)
{
	size_t n = 0;

	while (s[0] && s[1] && n < cap) {
		unsigned int v;

		if (sscanf(s, "%2x", &v) != 1) {
			break;
		}
		out[n++] = (unsigned char)v;
		s += 2;
	}
	return n;
}

static void test_vectors(void)
{
	FILE *f = fopen(LS_VECTORS_FILE, "r");
	char line[1024], name[64], req_hex[512], resp_hex[512];
	struct ls_counters counters = {0};
	struct ls_ctrl_state st = {.counters = &counters, .ops = &mock_ops};
	int rows = 0;

	ls_ctrl_config_default(&st.config);
	CHECK(f != NULL);
	if (f == NULL) {
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned char req[256], want[256], got[256];

		if (line[0] == '#' || line[0] == '\n') {
			continue;
		}
		CHECK_EQ(sscanf(line, "%63s %511s %511s", name, req_hex, resp_hex), 3);
		size_t req_len = unhex(req_hex, req, sizeof(req));
		size_t want_len = strcmp(resp_hex, "-") ? unhex(resp_hex, want, sizeof(want)) : 0;
		size_t got_len = ls_ctrl_handle(&st, req, req_len, got, sizeof(got));

		if (got_len != want_len || memcmp(got, want, want_len) != 0) {
			fprintf(stderr, "vector %s: response differs (got %zu bytes, want %zu)\n", name,
				got_len, want_len);
			CHECK(0);
		}
		rows++;
	}
	fclose(f);
	CHECK_EQ(rows, 16);
	CHECK_EQ(changes, 3); /* set_path netctx, set_markers, set_sizes */
	CHECK_EQ(st.config.path, LS_PATH_NETCTX);
	CHECK(ls_ctrl_size_selected(&st.config, 18));
	CHECK(!ls_ctrl_size_selected(&st.config, 19));
	/* After reset_counters: get_info, short_header, body_length_mismatch were counted. */
	CHECK_EQ(ls_counter_get(&counters, LS_CNT_CTRL_REQUESTS), 3);
	CHECK_EQ(ls_counter_get(&counters, LS_CNT_CTRL_ERRORS), 2);
}

static void test_encode_parse(void)
{
	unsigned char buf[LS_CTRL_RESP_HDR_LEN + LS_CTRL_MAX_BODY + 4];
	const unsigned char body[3] = {1, 2, 3};
	struct ls_ctrl_request rq;
	struct ls_ctrl_response rs;

	CHECK_EQ(ls_ctrl_encode_request(buf, sizeof(buf), LS_OP_SET_PATH, 0xbeef, body, 3), 11);
	CHECK_EQ(ls_ctrl_parse_request(buf, 11, &rq), LS_ST_OK);
	CHECK_EQ(rq.opcode, LS_OP_SET_PATH);
	CHECK_EQ(rq.id, 0xbeef);
	CHECK_EQ(rq.body_len, 3);
	CHECK(rq.body == buf + 8 && rq.body[2] == 3);
	CHECK_EQ(ls_ctrl_parse_request(buf, 10, &rq), LS_ST_BAD_LENGTH);
	CHECK_EQ(ls_ctrl_parse_request(buf, 12, &rq), LS_ST_BAD_LENGTH);
	CHECK_EQ(ls_ctrl_parse_request(buf, 1, &rq), -1);
	CHECK_EQ(ls_ctrl_parse_request(NULL, 11, &rq), -1);
	/* Capacity and size limits. */
	CHECK_EQ(ls_ctrl_encode_request(buf, 10, LS_OP_SET_PATH, 1, body, 3), 0);
	CHECK_EQ(ls_ctrl_encode_request(buf, sizeof(buf), 1, 1, NULL, 1), 0);
	CHECK_EQ(ls_ctrl_encode_request(buf, sizeof(buf), 1, 1, buf, LS_CTRL_MAX_BODY + 1), 0);
	CHECK_EQ(ls_ctrl_encode_request(buf, sizeof(buf), 1, 1, NULL, 0), 8);

	CHECK_EQ(ls_ctrl_encode_response(buf, sizeof(buf), LS_OP_GET_COUNTERS, 7, LS_ST_OK, body, 3),
		 13);
	CHECK_EQ(ls_ctrl_parse_response(buf, 13, &rs), LS_ST_OK);
	CHECK_EQ(rs.opcode, LS_OP_GET_COUNTERS);
	CHECK_EQ(rs.id, 7);
	CHECK_EQ(rs.status, LS_ST_OK);
	CHECK_EQ(rs.body_len, 3);
	CHECK_EQ(ls_ctrl_parse_response(buf, 12, &rs), LS_ST_BAD_LENGTH);
	/* A request is not a response. */
	ls_ctrl_encode_request(buf, sizeof(buf), 1, 1, body, 2);
	CHECK_EQ(ls_ctrl_parse_response(buf, 10, &rs), LS_ST_BAD_LENGTH);
	/* Handler refuses tiny output buffers instead of overflowing them. */
	struct ls_ctrl_state st = {0};
	unsigned char out[9];

	ls_ctrl_config_default(&st.config);
	CHECK_EQ(ls_ctrl_handle(&st, buf, 10, out, sizeof(out)), 0);
	CHECK_STR(ls_status_name(LS_ST_UNSUPPORTED), "unsupported");
	CHECK_STR(ls_status_name(42), "invalid");
	CHECK_STR(ls_path_names[LS_PATH_FAST], "fast");
}

static void test_field_validation(void)
{
	struct ls_ctrl_state st = {0};
	unsigned char req[64], out[64];
	struct ls_ctrl_response rs;
	size_t n;

	ls_ctrl_config_default(&st.config);
#define STATUS_OF(op, ...)                                                                 \
	({                                                                                 \
		const unsigned char b_[] = {__VA_ARGS__};                                  \
		size_t q_ = ls_ctrl_encode_request(req, sizeof(req), (op), 1, b_, sizeof(b_)); \
		n = ls_ctrl_handle(&st, req, q_, out, sizeof(out));                        \
		(ls_ctrl_parse_response(out, n, &rs) == LS_ST_OK) ? (int)rs.status : -1;   \
	})
	CHECK_EQ(STATUS_OF(LS_OP_SET_PATH, 3), LS_ST_BAD_VALUE);
	CHECK_EQ(STATUS_OF(LS_OP_SET_PATH, 2), LS_ST_OK); /* no ops: every path is supported */
	CHECK_EQ(STATUS_OF(LS_OP_SET_PATH, 2, 0), LS_ST_BAD_LENGTH);
	CHECK_EQ(STATUS_OF(LS_OP_SET_MARKERS, 0, 1, 2, 3), LS_ST_BAD_LENGTH);
	CHECK_EQ(STATUS_OF(LS_OP_SET_MARKERS, 0, 1, 2, 3, 3), LS_ST_BAD_VALUE);
	CHECK_EQ(STATUS_OF(LS_OP_SET_SIZES, 9, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1),
		 LS_ST_BAD_VALUE);
	CHECK_EQ(STATUS_OF(LS_OP_SET_SIZES, 1, 0x05, 0xc1), LS_ST_BAD_VALUE); /* 1473 > 1472 */
	CHECK_EQ(STATUS_OF(LS_OP_SET_SIZES, 1, 0x05, 0xc0), LS_ST_OK);
	CHECK_EQ(STATUS_OF(LS_OP_SET_SIZES, 0), LS_ST_OK);
	CHECK_EQ(st.config.n_sizes, 0);
	CHECK_EQ(STATUS_OF(LS_OP_CALIBRATE, 5, 0, 0, 0, 1), LS_ST_BAD_VALUE);      /* channel */
	CHECK_EQ(STATUS_OF(LS_OP_CALIBRATE, 0, 0, 0, 0, 0), LS_ST_BAD_VALUE);      /* 0 pulses */
	CHECK_EQ(STATUS_OF(LS_OP_CALIBRATE, 0, 0, 0x0f, 0x42, 0x41), LS_ST_BAD_VALUE); /* 1e6+1 */
	CHECK_EQ(STATUS_OF(LS_OP_CALIBRATE, 0, 0, 0x0f, 0x42, 0x40), LS_ST_UNSUPPORTED);
	CHECK_EQ(STATUS_OF(LS_OP_GET_INFO, 0), LS_ST_BAD_LENGTH);
	CHECK_EQ(STATUS_OF(LS_OP_GET_COUNTERS, 0), LS_ST_BAD_LENGTH);
#undef STATUS_OF
}

static void test_traffic_header(void)
{
	/* Layout from include/latscope_core/traffic.h, checked byte by byte. */
	static const unsigned char want[16] = {0x4c, 0x54, 0x12, 0x34, 0x00, 0x00, 0x01, 0x02,
					       0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05};
	struct ls_traffic_hdr h = {.run_id = 0x1234, .seq = 258, .intended_ns = 0x0102030405ull};
	struct ls_traffic_hdr g;
	unsigned char p[18];

	CHECK(ls_traffic_write(p, sizeof(p), &h));
	CHECK(memcmp(p, want, 16) == 0);
	CHECK(ls_traffic_parse(p, 16, &g));
	CHECK_EQ(g.run_id, 0x1234);
	CHECK_EQ(g.seq, 258);
	CHECK_EQ(g.intended_ns, 0x0102030405ll);
	CHECK(!ls_traffic_parse(p, 15, &g));
	CHECK(!ls_traffic_write(p, 15, &h));
	uint32_t seq = 7;

	CHECK(ls_traffic_seq(p, 8, &seq));
	CHECK_EQ(seq, 258);
	seq = 7;
	CHECK(!ls_traffic_seq(p, 7, &seq));
	CHECK_EQ(seq, 7);
	p[0] = 0;
	CHECK(!ls_traffic_parse(p, 16, &g));
	CHECK(!ls_traffic_seq(p, 16, &seq));
	CHECK_EQ(seq, 7);
}

/* A board that cannot mark rx.isr: SET_MARKERS with it is refused, the map is unchanged, and
 * RESET_COUNTERS also resets the platform's own counters through the hook. */
static int platform_resets;

static bool no_isr(void *user, uint8_t point)
{
	(void)user;
	return point != LS_POINT_RX_ISR;
}

static void platform_reset(void *user)
{
	(void)user;
	platform_resets++;
}

static void test_point_supported_and_reset_hook(void)
{
	static const struct ls_ctrl_ops ops = {.point_supported = no_isr,
					       .counters_reset = platform_reset};
	struct ls_counters c = {0};
	struct ls_ctrl_state st = {.counters = &c, .ops = &ops};
	unsigned char req[16], out[64];
	struct ls_ctrl_response rs;
	const uint8_t with_isr[5] = {LS_POINT_RX_ISR, 1, 2, 3, 4};
	const uint8_t without[5] = {LS_POINT_RX_HANDOFF, 1, 2, 3, LS_POINT_TX_QUEUE};

	ls_ctrl_config_default(&st.config);
	size_t n = ls_ctrl_encode_request(req, sizeof(req), LS_OP_SET_MARKERS, 1, without, 5);
	size_t m = ls_ctrl_handle(&st, req, n, out, sizeof(out));

	CHECK_EQ(ls_ctrl_parse_response(out, m, &rs), LS_ST_OK);
	CHECK_EQ(rs.status, LS_ST_OK);
	CHECK_EQ(st.config.markers.channel_point[0], LS_POINT_RX_HANDOFF);
	CHECK_EQ(ls_marker_channel(&st.config.markers, LS_POINT_TX_QUEUE), 4);
	n = ls_ctrl_encode_request(req, sizeof(req), LS_OP_SET_MARKERS, 2, with_isr, 5);
	m = ls_ctrl_handle(&st, req, n, out, sizeof(out));
	CHECK_EQ(ls_ctrl_parse_response(out, m, &rs), LS_ST_OK);
	CHECK_EQ(rs.status, LS_ST_UNSUPPORTED);
	CHECK(memcmp(st.config.markers.channel_point, without, 5) == 0);
	CHECK_EQ(ls_marker_channel(&st.config.markers, LS_POINT_RX_HANDOFF), 0);
	ls_counter_add(&c, LS_CNT_FAST_BUSY, 7);
	n = ls_ctrl_encode_request(req, sizeof(req), LS_OP_RESET_COUNTERS, 3, NULL, 0);
	m = ls_ctrl_handle(&st, req, n, out, sizeof(out));
	CHECK_EQ(platform_resets, 1);
	for (unsigned int i = 0; i < LS_CNT_COUNT; i++) {
		CHECK_EQ(ls_counter_get(&c, (enum ls_counter)i), 0);
	}
	CHECK_STR(ls_counter_names[LS_CNT_FAST_BUSY], "fast_busy");
}

int main(void)
{
	test_point_supported_and_reset_hook();
	test_vectors();
	test_encode_parse();
	test_field_validation();
	test_traffic_header();
	TEST_DONE();
}
