/* Unit tests of the frame classifier and checksum/reply helpers. SPDX-License-Identifier: BSD-2-Clause */
#include "latscope_core/classify.h"
#include "latscope_core/fast.h"
#include "ls_test.h"

static void test_plain_and_vlan_and_options(void)
{
	unsigned char f[1600];
	struct ls_udp_frame u;

	for (int vlan = 0; vlan <= 1; vlan++) {
		for (size_t opts = 0; opts <= 40; opts += 4) {
			size_t n = ls_build_udp(f, sizeof(f), vlan, opts, 4242, 100);

			memset(&u, 0xaa, sizeof(u));
			CHECK_EQ(ls_classify_udp(f, n, n, 4242, &u), LS_CLASS_MATCH);
			CHECK_EQ(u.has_vlan, vlan);
			CHECK_EQ(u.vlan_tci, vlan ? 0x2005 : 0);
			CHECK_EQ(u.l3_offset, 14 + 4 * vlan);
			CHECK_EQ(u.l4_offset, 14 + 4 * vlan + 20 + opts);
			CHECK_EQ(u.payload_offset, u.l4_offset + 8);
			CHECK_EQ(u.payload_len, 100);
			CHECK_EQ(u.ip_total_len, 20 + opts + 8 + 100);
			CHECK_EQ(u.src_port, 49153);
			CHECK_EQ(u.dst_port, 4242);
			CHECK_EQ(u.dst_ip[3], 10);
			CHECK_EQ(u.src_ip[3], 1);
			/* Only the headers need be contiguous. */
			CHECK_EQ(ls_classify_udp(f, u.payload_offset, n, 4242, NULL), LS_CLASS_MATCH);
			CHECK_EQ(ls_classify_udp(f, u.payload_offset - 1, n, 4242, NULL),
				 LS_CLASS_TRUNCATED);
			/* Port 0 matches any port; another port does not. */
			CHECK_EQ(ls_classify_udp(f, n, n, 0, NULL), LS_CLASS_MATCH);
			CHECK_EQ(ls_classify_udp(f, n, n, 4243, &u), LS_CLASS_OTHER_PORT);
			CHECK_EQ(u.dst_port, 4242);
		}
	}
}

static void test_rejections(void)
{
	unsigned char f[256];
	size_t n = ls_build_udp(f, sizeof(f), 0, 0, 7, 18); /* 64-byte frame with FCS */

	CHECK_EQ(n, 60);
	CHECK_EQ(ls_classify_udp(f, n, n, 7, NULL), LS_CLASS_MATCH);
	/* Ethernet padding after the datagram is allowed. */
	CHECK_EQ(ls_classify_udp(f, n, n + 20, 7, NULL), LS_CLASS_MATCH);
	/* Each truncation point. */
	for (size_t k = 0; k < 42; k++) {
		CHECK_EQ(ls_classify_udp(f, k, k, 7, NULL), LS_CLASS_TRUNCATED);
	}
	/* Datagram longer than the frame. */
	CHECK_EQ(ls_classify_udp(f, 42, 50, 7, NULL), LS_CLASS_TRUNCATED);
	CHECK_EQ(ls_classify_udp(f, n, n - 1, 7, NULL), LS_CLASS_TRUNCATED); /* hdr_len > frame */
	CHECK_EQ(ls_classify_udp(NULL, 0, 0, 7, NULL), LS_CLASS_TRUNCATED);

	unsigned char g[256];

#define MUT(stmt, want)                                                   \
	do {                                                              \
		memcpy(g, f, n);                                          \
		stmt;                                                     \
		CHECK_EQ(ls_classify_udp(g, n, n, 7, NULL), (want));      \
	} while (0)
	MUT(g[12] = 0x86; g[13] = 0xdd, LS_CLASS_NOT_IPV4);          /* IPv6 */
	MUT(g[12] = 0x08; g[13] = 0x06, LS_CLASS_NOT_IPV4);          /* ARP */
	MUT(g[14] = 0x65, LS_CLASS_BAD_IPV4);                        /* version 6 */
	MUT(g[14] = 0x44, LS_CLASS_BAD_IPV4);                        /* IHL 4 */
	MUT(g[16] = 0; g[17] = 19, LS_CLASS_BAD_IPV4);               /* total < IHL */
	MUT(g[16] = 0; g[17] = 27, LS_CLASS_BAD_UDP);                /* no room for UDP */
	MUT(g[16] = 0; g[17] = 47, LS_CLASS_TRUNCATED);              /* beyond frame */
	MUT(g[20] = 0x20, LS_CLASS_FRAGMENT);                        /* MF */
	MUT(g[21] = 0x01, LS_CLASS_FRAGMENT);                        /* offset 8 */
	MUT(g[23] = 6, LS_CLASS_NOT_UDP);                            /* TCP */
	MUT(g[38] = 0; g[39] = 7, LS_CLASS_BAD_UDP);                 /* UDP len 7 */
	MUT(g[38] = 0; g[39] = 27, LS_CLASS_BAD_UDP);                /* UDP len > IP payload */
	MUT(g[12] = 0x81; g[13] = 0x00, LS_CLASS_NOT_IPV4);          /* VLAN, inner 0x4500 */
#undef MUT
	CHECK_STR(ls_class_name(LS_CLASS_MATCH), "match");
	CHECK_STR(ls_class_name(LS_CLASS_OTHER_PORT), "other-port");
	CHECK_STR(ls_class_name((enum ls_class)99), "invalid");
}

static void test_checksums_and_reply(void)
{
	/* RFC 1071 section 3 worked example: one's-complement sum 0xddf2. */
	static const unsigned char rfc[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
	/* Classic IPv4 header example (checksum field zeroed); its checksum is 0xb861. */
	static const unsigned char hdr[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40,
					    0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
					    0x00, 0xc7};
	unsigned char f[512], orig[512];
	struct ls_udp_frame u;

	CHECK_EQ(ls_inet_sum(rfc, sizeof(rfc), 0), 0xddf2);
	CHECK_EQ(ls_inet_fold(ls_inet_sum(rfc, sizeof(rfc), 0)), 0x220d);
	CHECK_EQ(ls_inet_fold(ls_inet_sum(hdr, sizeof(hdr), 0)), 0xb861);
	CHECK_EQ(ls_inet_sum(rfc, 3, 0), 0x0001 + 0xf200); /* odd length pads with zero */

	size_t n = ls_build_udp(f, sizeof(f), 1, 8, 4242, 64);

	f[n - 64 - 2] = 0x12; /* a non-zero UDP checksum the reply must clear */
	f[n - 64 - 1] = 0x34;
	memcpy(orig, f, n);
	CHECK_EQ(ls_classify_udp(f, n, n, 4242, &u), LS_CLASS_MATCH);
	CHECK_EQ(ls_udp_make_reply(f, n, &u), 0);
	CHECK(memcmp(f, orig + 6, 6) == 0 && memcmp(f + 6, orig, 6) == 0);
	CHECK(memcmp(f + u.l3_offset + 12, orig + u.l3_offset + 16, 4) == 0);
	CHECK(memcmp(f + u.l3_offset + 16, orig + u.l3_offset + 12, 4) == 0);
	CHECK_EQ(f[u.l4_offset + 1], orig[u.l4_offset + 3]);
	CHECK_EQ(f[u.l4_offset + 3], orig[u.l4_offset + 1]);
	CHECK_EQ(f[u.l4_offset + 6] | f[u.l4_offset + 7], 0);
	/* A correct header checksum makes the header sum fold to zero. */
	CHECK_EQ(ls_inet_fold(ls_inet_sum(f + u.l3_offset, 28, 0)), 0);
	CHECK(memcmp(f + u.payload_offset, orig + u.payload_offset, 64) == 0);
	/* The reply is itself a valid datagram to the sender's port. */
	CHECK_EQ(ls_classify_udp(f, n, n, 49153, NULL), LS_CLASS_MATCH);
	CHECK_EQ(ls_udp_make_reply(f, u.payload_offset - 1, &u), -1);
	CHECK_EQ(ls_udp_make_reply(NULL, n, &u), -1);

	/* The fast track's reply checksum, from a payload sum taken in two pieces (a buffer chain):
	 * the receiver's check (RFC 768 sum over pseudo-header, header and payload folds to 0)
	 * accepts it, and one changed payload byte makes it fail. */
	struct ls_udp_frame r;
	struct ls_inet_acc acc;

	CHECK_EQ(ls_classify_udp(f, n, n, 49153, &r), LS_CLASS_MATCH);
	ls_inet_acc_init(&acc);
	ls_inet_acc_add(&acc, f + r.payload_offset, 13);
	ls_inet_acc_add(&acc, f + r.payload_offset + 13, r.payload_len - 13u);
	uint16_t csum = ls_udp_fill_checksum(f, n, &r, ls_inet_acc_sum(&acc));

	CHECK(csum != 0u);
	CHECK_EQ((f[r.l4_offset + 6] << 8) | f[r.l4_offset + 7], csum);
	CHECK(ls_udp_checksum_ok(f, &r));
	f[r.payload_offset + 5] ^= 0x40u;
	CHECK(!ls_udp_checksum_ok(f, &r));
	f[r.payload_offset + 5] ^= 0x40u;
	/* Swapping addresses and ports keeps the one's-complement sum: the reply's checksum equals
	 * a correct checksum of the request (computed here on a copy of the request). */
	memcpy(orig, f, n);
	CHECK_EQ(ls_udp_make_reply(orig, n, &r), 0);
	CHECK_EQ(ls_classify_udp(orig, n, n, 4242, &u), LS_CLASS_MATCH);
	CHECK_EQ(ls_udp_fill_checksum(orig, n, &u, ls_inet_sum(orig + u.payload_offset,
							       u.payload_len, 0)), csum);
	CHECK_EQ(ls_udp_fill_checksum(f, u.payload_offset - 1, &u, 0), 0);
}

int main(void)
{
	test_plain_and_vlan_and_options();
	test_rejections();
	test_checksums_and_reply();
	TEST_DONE();
}
