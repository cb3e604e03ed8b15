/*
 * Bounded random test of the classifier and the control-protocol parser/dispatcher.
 * Every input lives in a heap buffer of exactly its length, so AddressSanitizer (enabled by
 * LATSCOPE_CORE_SANITIZE) reports any read or write past it. Invariants checked per input:
 *  - classifier: on MATCH/OTHER_PORT all offsets lie inside the frame and agree with each other;
 *  - parser: on OK the body ends exactly at the end of the datagram;
 *  - fast track: an accepted frame is untagged IPv4/UDP to our unicast MAC, our IP and port,
 *    from an answerable source, and its checksums verify by the test's own reference sum;
 *  - dispatcher: the response fits the output buffer, parses back with the request's id, and a
 *    non-OK status carries no body.
 * Usage: test_fuzz [iterations] [seed]; default 1,000,000 random inputs + 200,000 mutations.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/classify.h"
#include "latscope_core/control.h"
#include "latscope_core/fast.h"
#include "ls_test.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static long class_hist[LS_CLASS_COUNT];
static long status_hist[8];

static void check_classify(const unsigned char *data, size_t hdr_len, size_t frame_len)
{
	unsigned char *buf = malloc(hdr_len ? hdr_len : 1);
	struct ls_udp_frame u;

	memcpy(buf, data, hdr_len);
	uint16_t port = (ls_rand_next(&rng) & 1) ? 4242 : 0;
	enum ls_class c = ls_classify_udp(buf, hdr_len, frame_len, port, &u);

	CHECK(c < LS_CLASS_COUNT);
	if (c < LS_CLASS_COUNT) {
		class_hist[c]++;
	}
	if (c == LS_CLASS_MATCH || c == LS_CLASS_OTHER_PORT) {
		CHECK(u.payload_offset <= hdr_len);
		CHECK(u.payload_offset + (size_t)u.payload_len <= frame_len);
		CHECK(u.l4_offset == u.payload_offset - 8);
		CHECK(u.l4_offset >= u.l3_offset + 20 && u.l4_offset <= u.l3_offset + 60);
		CHECK(u.l3_offset + (size_t)u.ip_total_len <= frame_len);
		/* The reply transform stays inside the header bytes. */
		CHECK_EQ(ls_udp_make_reply(buf, hdr_len, &u), 0);
	}
	free(buf);
}


static const struct ls_fast_node fuzz_node = {
	.mac = {0x02, 0, 0, 0, 0, 0x01}, .ip = {192, 0, 2, 10}, .port = 4244};
static long fast_hist[LS_FAST_COUNT];

static void check_fast(const unsigned char *data, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	struct ls_udp_frame u;

	memcpy(buf, data, len);
	enum ls_fast_verdict v = ls_fast_accept(buf, len, &fuzz_node, &u);

	CHECK(v < LS_FAST_COUNT);
	if (v < LS_FAST_COUNT) {
		fast_hist[v]++;
	}
	if (v == LS_FAST_ACCEPT) {
		const unsigned char *ip = buf + 14;
		size_t ihl = (size_t)(ip[0] & 15) * 4;
		const unsigned char *udp = ip + ihl;
		size_t ulen = ((size_t)udp[4] << 8) | udp[5];
		unsigned char pseudo[12] = {ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18],
					    ip[19], 0, 17, (unsigned char)(ulen >> 8),
					    (unsigned char)ulen};

		CHECK(memcmp(buf, fuzz_node.mac, 6) == 0);
		CHECK((buf[6] & 1) == 0);
		CHECK(buf[12] == 0x08 && buf[13] == 0x00);
		CHECK(memcmp(ip + 16, fuzz_node.ip, 4) == 0);
		CHECK(memcmp(ip + 12, fuzz_node.ip, 4) != 0 && ip[12] != 0 && ip[12] != 127 &&
		      ip[12] < 224);
		CHECK(udp[2] == (4244 >> 8) && udp[3] == (4244 & 0xff));
		CHECK_EQ(ls_ref_csum(ip, ihl, 0), 0);
		CHECK(14 + ihl + ulen <= len);
		if (udp[6] || udp[7]) {
			CHECK_EQ(ls_ref_csum(udp, ulen, 0xffffu & ~ls_ref_csum(pseudo, 12, 0)), 0);
		}
		CHECK_EQ(ls_udp_make_reply(buf, len, &u), 0);
	}
	free(buf);
}

/* A valid request to fuzz_node (checksums filled in), then damaged in one of several ways. */
static size_t fast_candidate(unsigned char *f, size_t cap)
{
	int vlan = (ls_rand_next(&rng) % 8) == 0;
	size_t opts = (size_t)(ls_rand_next(&rng) % 3) * 4;
	unsigned short port = (ls_rand_next(&rng) % 8) ? 4244 : 4242;
	size_t n = ls_build_udp(f, cap, vlan, opts, port, (size_t)(ls_rand_next(&rng) % 300));

	if (!vlan) { /* ls_build_udp() sends from 192.0.2.1 to 192.0.2.10 */
		ls_finish_udp(f, 0, (int)(ls_rand_next(&rng) & 1));
	}
	switch (ls_rand_next(&rng) % 8) {
	case 0: memset(f, 0xff, 6); break;                                  /* broadcast */
	case 1: f[0] = 0x01; f[1] = 0x00; f[2] = 0x5e; break;              /* multicast */
	case 2: f[5] ^= (unsigned char)(1 + ls_rand_next(&rng) % 255); break; /* foreign */
	case 3: memset(f + 6, 0xff, 6); break;                              /* bcast source */
	case 4: f[(size_t)(ls_rand_next(&rng) % n)] ^= (unsigned char)(1u << (ls_rand_next(&rng) % 8));
		break;
	case 5: n -= (size_t)(ls_rand_next(&rng) % (n + 1)); break;         /* truncated */
	default: break;                                                     /* intact */
	}
	return n;
}

static void check_control(struct ls_ctrl_state *st, const unsigned char *data, size_t len)
{
	unsigned char *in = malloc(len ? len : 1);
	size_t cap = LS_CTRL_RESP_HDR_LEN + (ls_rand_next(&rng) % 64);
	unsigned char *out = malloc(cap);
	struct ls_ctrl_request rq;
	struct ls_ctrl_response rs;

	memcpy(in, data, len);
	int prc = ls_ctrl_parse_request(in, len, &rq);

	if (prc == LS_ST_OK) {
		CHECK(rq.body + rq.body_len == in + len);
	}
	size_t n = ls_ctrl_handle(st, in, len, out, cap);

	CHECK(n <= cap);
	if (prc < 0) {
		CHECK_EQ(n, 0);
	} else {
		CHECK_EQ(ls_ctrl_parse_response(out, n, &rs), LS_ST_OK);
		CHECK(rs.status < 8);
		status_hist[rs.status & 7]++;
		if (len >= 6) {
			CHECK_EQ(rs.id, rq.id);
		}
		if (rs.status != LS_ST_OK) {
			CHECK_EQ(rs.body_len, 0);
		}
		/* The configuration stays valid whatever was accepted. */
		CHECK(st->config.path < LS_PATH_COUNT);
		CHECK(st->config.n_sizes <= LS_CTRL_MAX_SIZES);
	}
	free(in);
	free(out);
}

static size_t fuzz_build_info(void *user, char *buf, size_t cap)
{
	(void)user;
	size_t n = cap < 40 ? cap : 40;

	memset(buf, 'x', n);
	return n;
}

static int fuzz_calibrate(void *user, uint8_t ch, uint32_t pulses, uint64_t *cycles,
			  uint32_t *hz)
{
	(void)user;
	(void)ch;
	*cycles = pulses;
	*hz = 1000;
	return 0;
}

static bool fuzz_path_supported(void *user, uint8_t path)
{
	(void)user;
	return path != LS_PATH_NETCTX;
}

static const struct ls_ctrl_ops fuzz_ops = {
	.path_supported = fuzz_path_supported,
	.calibrate = fuzz_calibrate,
	.build_info = fuzz_build_info,
};

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 1000000;
	unsigned char data[1600];
	struct ls_counters counters = {0};
	struct ls_ctrl_state st = {.counters = &counters, .ops = &fuzz_ops};

	if (argc > 2) {
		rng = strtoull(argv[2], NULL, 0) | 1u;
	}
	ls_ctrl_config_default(&st.config);
	/* 1. Random inputs, biased towards the interesting prefixes so the deep checks run. */
	for (long i = 0; i < iterations; i++) {
		size_t len = (size_t)(ls_rand_next(&rng) % 128);

		for (size_t k = 0; k < len; k++) {
			data[k] = (unsigned char)ls_rand_next(&rng);
		}
		unsigned long long pick = ls_rand_next(&rng) % 4;

		if (pick == 0) { /* classifier: plausible EtherType/version/protocol */
			if (len > 23) {
				data[12] = 0x08; data[13] = 0x00; data[14] = 0x45; data[23] = 17;
			}
			check_classify(data, len, len + (size_t)(ls_rand_next(&rng) % 3) * 16);
		} else if (pick == 1) {
			check_classify(data, len, len);
		} else { /* control: valid magic and version most of the time */
			if (pick == 2 && (ls_rand_next(&rng) & 1)) {
				/* the exact body size each opcode wants, small field values */
				static const size_t want[10] = {0, 0, 1, 5, 3, 5, 0, 0, 0, 0};
				unsigned char op = (unsigned char)(1 + ls_rand_next(&rng) % 9);

				len = 8 + want[op];
				data[3] = op;
				for (size_t k = 8; k < len; k++) {
					data[k] = (unsigned char)(data[k] % 8);
				}
			}
			if (len > 3) {
				data[0] = 'L'; data[1] = 'C';
				if (pick == 2) {
					data[2] = 1;
					if (len < 9) {
						data[3] = (unsigned char)(1 + ls_rand_next(&rng) % 9);
					}
					if (len >= 8) {
						data[6] = (unsigned char)((len - 8) >> 8);
						data[7] = (unsigned char)(len - 8);
					}
				}
			}
			check_control(&st, data, len);
		}
	}
	/* 2. Mutations of valid frames: flip 1..4 random bytes, truncate at random. */
	long mutations = iterations / 5;

	for (long i = 0; i < mutations; i++) {
		int vlan = (int)(ls_rand_next(&rng) & 1);
		size_t opts = (size_t)(ls_rand_next(&rng) % 11) * 4;
		size_t n = ls_build_udp(data, sizeof(data), vlan, opts, 4242,
					(size_t)(ls_rand_next(&rng) % 200));
		int flips = 1 + (int)(ls_rand_next(&rng) % 4);

		for (int k = 0; k < flips; k++) {
			size_t at = (size_t)(ls_rand_next(&rng) % (14 + 4 + 60 + 8));

			if (at < n) {
				data[at] ^= (unsigned char)(1u << (ls_rand_next(&rng) % 8));
			}
		}
		size_t hdr = n - (size_t)(ls_rand_next(&rng) % (n + 1)) * (ls_rand_next(&rng) % 4 == 0);

		check_classify(data, hdr, n);
	}
	/* 3. Fast-track acceptance: broadcast, multicast, foreign, VLAN, damaged, truncated. */
	for (long i = 0; i < mutations; i++) {
		check_fast(data, fast_candidate(data, sizeof(data)));
	}
	for (long i = 0; i < mutations / 4; i++) { /* random bytes, plausible prefix */
		size_t len = (size_t)(ls_rand_next(&rng) % 128);

		for (size_t k = 0; k < len; k++) {
			data[k] = (unsigned char)ls_rand_next(&rng);
		}
		if (len > 36) {
			memcpy(data, fuzz_node.mac, 6);
			data[12] = 0x08; data[13] = 0x00; data[14] = 0x45; data[23] = 17;
			data[36] = 4244 >> 8; data[37] = 4244 & 0xff;
		}
		check_fast(data, len);
	}
	printf("classifier outcomes:");
	for (int c = 0; c < (int)LS_CLASS_COUNT; c++) {
		printf(" %s=%ld", ls_class_name((enum ls_class)c), class_hist[c]);
	}
	printf("\nfast-track verdicts:");
	for (int v = 0; v < (int)LS_FAST_COUNT; v++) {
		printf(" %s=%ld", ls_fast_verdict_name((enum ls_fast_verdict)v), fast_hist[v]);
	}
	printf("\ncontrol statuses:");
	for (int s = 0; s < 7; s++) {
		printf(" %s=%ld", ls_status_name(s), status_hist[s]);
	}
	printf("\n");
	/* The bias above must reach every outcome, or the deep checks never ran. */
	for (int c = 0; c < (int)LS_CLASS_COUNT; c++) {
		CHECK(iterations < 100000 || class_hist[c] > 0);
	}
	for (int v = 0; v < (int)LS_FAST_COUNT; v++) {
		CHECK(iterations < 100000 || fast_hist[v] > 0);
	}
	for (int s = 0; s < 6; s++) {
		CHECK(iterations < 100000 || s == LS_ST_FAILED || status_hist[s] > 0);
	}
	TEST_DONE();
}
