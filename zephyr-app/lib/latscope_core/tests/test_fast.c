/*
 * Unit tests of the fast track's acceptance test (ls_fast_accept). Expected verdicts follow from
 * the rules in fast.h; checksums are computed here by a separate reference (ref_csum below, a
 * plain RFC 1071 loop), not by the code under test.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "latscope_core/fast.h"
#include "ls_test.h"

/* ls_build_udp() addresses: dst MAC 02:00:00:00:00:01, dst IP 192.0.2.10, src IP 192.0.2.1. */
static const struct ls_fast_node node = {
	.mac = {0x02, 0, 0, 0, 0, 0x01}, .ip = {192, 0, 2, 10}, .port = 4244};

static size_t good(unsigned char *f, size_t cap, size_t opts, size_t payload, int udp_csum)
{
	size_t n = ls_build_udp(f, cap, 0, opts, 4244, payload);

	ls_finish_udp(f, 0, udp_csum);
	return n;
}

static void test_accepts(void)
{
	unsigned char f[1600];
	struct ls_udp_frame u;

	for (size_t opts = 0; opts <= 40; opts += 8) {
		for (size_t pl = 0; pl <= 1472 - opts; pl += 97) {
			for (int cs = 0; cs <= 1; cs++) {
				size_t n = good(f, sizeof(f), opts, pl, cs);

				CHECK_EQ(ls_fast_accept(f, n, &node, &u), LS_FAST_ACCEPT);
				CHECK_EQ(u.payload_len, pl);
				CHECK_EQ(u.dst_port, 4244);
				/* Ethernet padding after the datagram is allowed. */
				CHECK_EQ(ls_fast_accept(f, n + 6, &node, NULL), LS_FAST_ACCEPT);
			}
		}
	}
}

static void test_rejects(void)
{
	unsigned char f[1600];
	size_t n;

	/* Broadcast and multicast destinations, a foreign station. */
	static const unsigned char bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const unsigned char mcast[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
	static const unsigned char other[6] = {0x02, 0, 0, 0, 0, 0x77};
	const unsigned char *dsts[3] = {bcast, mcast, other};

	for (int i = 0; i < 3; i++) {
		n = good(f, sizeof(f), 0, 64, 1);
		memcpy(f, dsts[i], 6);
		CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_NOT_OUR_MAC);
	}
	/* A node whose own MAC has the group bit never matches (misconfiguration). */
	struct ls_fast_node odd = node;

	odd.mac[0] = 0x03;
	n = good(f, sizeof(f), 0, 64, 1);
	f[0] = 0x03;
	CHECK_EQ(ls_fast_accept(f, n, &odd, NULL), LS_FAST_NOT_OUR_MAC);
	/* Broadcast source MAC (the old fast track answered these). */
	n = good(f, sizeof(f), 0, 64, 1);
	memcpy(f + 6, bcast, 6);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_BAD_SRC_MAC);
	/* Foreign destination IP, and a frame "from" our own IP to a foreign one. */
	n = ls_build_udp(f, sizeof(f), 0, 0, 4244, 64);
	f[14 + 19] = 99;
	ls_finish_udp(f, 0, 1);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_NOT_OUR_IP);
	n = ls_build_udp(f, sizeof(f), 0, 0, 4244, 64);
	memcpy(f + 14 + 12, node.ip, 4);
	f[14 + 19] = 1;
	ls_finish_udp(f, 0, 1);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_NOT_OUR_IP);
	/* Sources nobody may answer: ours, 0.0.0.0, loopback, multicast, limited broadcast. */
	static const unsigned char bad_src[5][4] = {
		{192, 0, 2, 10}, {0, 0, 0, 0}, {127, 0, 0, 1}, {224, 0, 0, 251}, {255, 255, 255, 255}};

	for (int i = 0; i < 5; i++) {
		n = ls_build_udp(f, sizeof(f), 0, 0, 4244, 64);
		memcpy(f + 14 + 12, bad_src[i], 4);
		ls_finish_udp(f, 0, 1);
		CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_BAD_SRC_IP);
	}
	/* Checksums: one flipped payload bit; zero UDP checksum is fine; bad IP header sum. */
	n = good(f, sizeof(f), 0, 64, 1);
	f[n - 1] ^= 0x10;
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_BAD_UDP_CSUM);
	n = good(f, sizeof(f), 0, 64, 0);
	f[n - 1] ^= 0x10;
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_ACCEPT);
	n = good(f, sizeof(f), 0, 64, 1);
	f[14 + 11] ^= 0x01;
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_BAD_IP_CSUM);
	/* VLAN-tagged, other port, truncated, fragment, not UDP. */
	n = ls_build_udp(f, sizeof(f), 1, 0, 4244, 64);
	ls_finish_udp(f, 1, 1);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_VLAN);
	n = ls_build_udp(f, sizeof(f), 0, 0, 4242, 64);
	ls_finish_udp(f, 0, 1);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_OTHER_PORT);
	n = good(f, sizeof(f), 0, 64, 1);
	CHECK_EQ(ls_fast_accept(f, n - 1, &node, NULL), LS_FAST_NOT_UDP);
	CHECK_EQ(ls_fast_accept(f, 13, &node, NULL), LS_FAST_NOT_UDP);
	CHECK_EQ(ls_fast_accept(NULL, n, &node, NULL), LS_FAST_NOT_UDP);
	n = ls_build_udp(f, sizeof(f), 0, 0, 4244, 64);
	f[14 + 6] = 0x20; /* MF */
	ls_finish_udp(f, 0, 1);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_NOT_UDP);
	n = ls_build_udp(f, sizeof(f), 0, 0, 4244, 64);
	f[14 + 9] = 6;
	ls_finish_udp(f, 0, 0);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_NOT_UDP);
}

/* Every single-bit error outside the source MAC is caught by some rule: Ethernet destination
 * and type by the address/type checks, the IPv4 header by its checksum, UDP by its checksum. */
static void test_single_bit_errors(void)
{
	unsigned char f[256];
	size_t n = good(f, sizeof(f), 4, 100, 1);
	long accepted = 0;

	for (size_t at = 0; at < n; at++) {
		for (int b = 0; b < 8; b++) {
			f[at] ^= (unsigned char)(1u << b);
			enum ls_fast_verdict v = ls_fast_accept(f, n, &node, NULL);

			if (at >= 6 && at < 12) {
				accepted += (v == LS_FAST_ACCEPT);
			} else {
				CHECK(v != LS_FAST_ACCEPT);
			}
			f[at] ^= (unsigned char)(1u << b);
		}
	}
	/* Source MAC flips: accepted unless the group bit (bit 0 of byte 6) is set. */
	CHECK_EQ(accepted, 6 * 8 - 1);
	CHECK_EQ(ls_fast_accept(f, n, &node, NULL), LS_FAST_ACCEPT);
}

static void test_reply_of_accepted(void)
{
	unsigned char f[256];
	struct ls_udp_frame u, r;
	size_t n = good(f, sizeof(f), 0, 32, 1);

	CHECK_EQ(ls_fast_accept(f, n, &node, &u), LS_FAST_ACCEPT);
	CHECK_EQ(ls_udp_make_reply(f, n, &u), 0);
	/* The reply comes from us (unicast source), to the requester, with a valid IP header. */
	CHECK(memcmp(f + 6, node.mac, 6) == 0);
	CHECK((f[0] & 1) == 0);
	CHECK_EQ(ls_classify_udp(f, n, n, 49153, &r), LS_CLASS_MATCH);
	CHECK(memcmp(r.src_ip, node.ip, 4) == 0);
	CHECK_EQ(ls_ref_csum(f + 14, 20, 0), 0);
	CHECK_EQ(r.src_port, 4244);
	CHECK(ls_udp_checksum_ok(f, &r)); /* zero: not computed */
	CHECK_STR(ls_fast_verdict_name(LS_FAST_NOT_OUR_MAC), "not-our-mac");
	CHECK_STR(ls_fast_verdict_name(LS_FAST_COUNT), "invalid");
}

/* The streaming sum over random splits equals the one-shot sum; headers-only check plus the
 * streamed UDP sum gives the same verdict as the whole-frame test. */
static void test_streaming_sum_and_split_check(void)
{
	unsigned char f[1600];
	unsigned long long rng = 12345;

	for (int trial = 0; trial < 2000; trial++) {
		size_t pl = (size_t)(ls_rand_next(&rng) % 1400);
		int cs = (int)(ls_rand_next(&rng) & 1);
		size_t n = good(f, sizeof(f), 0, pl, cs);

		if (trial % 3 == 0) {
			f[(size_t)(ls_rand_next(&rng) % n)] ^= 0x04;
		}
		struct ls_udp_frame u;
		enum ls_fast_verdict whole = ls_fast_accept(f, n, &node, NULL);
		enum ls_fast_verdict v = ls_fast_check_headers(f, 14 + 20 + 8, n, &node, &u);

		if (v == LS_FAST_ACCEPT) {
			struct ls_inet_acc acc;
			size_t at = u.l4_offset, end = u.l4_offset + 8u + u.payload_len;

			ls_inet_acc_init(&acc);
			while (at < end) { /* pieces of 0..99 bytes, odd lengths included */
				size_t k = (size_t)(ls_rand_next(&rng) % 100);

				k = k > end - at ? end - at : k;
				ls_inet_acc_add(&acc, f + at, k);
				at += k;
			}
			CHECK_EQ(ls_inet_acc_sum(&acc),
				 ls_inet_sum(f + u.l4_offset, 8u + u.payload_len, 0));
			uint16_t field = (uint16_t)((f[u.l4_offset + 6] << 8) | f[u.l4_offset + 7]);

			v = ls_udp_checksum_ok_sum(&u, field, ls_inet_acc_sum(&acc)) ?
				    LS_FAST_ACCEPT : LS_FAST_BAD_UDP_CSUM;
		}
		CHECK_EQ(v, whole);
	}
}

static void test_peek(void)
{
	unsigned char f[256];
	uint16_t port = 0, len = 0;
	size_t n = good(f, sizeof(f), 0, 77, 1);

	CHECK(ls_peek_udp(f, n, &port, &len));
	CHECK_EQ(port, 4244);
	CHECK_EQ(len, 77);
	CHECK(!ls_peek_udp(f, 41, &port, &len));
	n = ls_build_udp(f, sizeof(f), 1, 0, 4244, 10); /* tagged: not pre-selected */
	CHECK(!ls_peek_udp(f, n, &port, &len));
	n = ls_build_udp(f, sizeof(f), 0, 4, 4244, 10); /* options: not pre-selected */
	CHECK(!ls_peek_udp(f, n, &port, &len));
}

int main(void)
{
	test_streaming_sum_and_split_check();
	test_peek();
	test_accepts();
	test_rejects();
	test_single_bit_errors();
	test_reply_of_accepted();
	TEST_DONE();
}
