/* Minimal unit-test helpers for the latscope core (host only). SPDX-License-Identifier: BSD-2-Clause */
#ifndef LS_TEST_H_
#define LS_TEST_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ls_test_failures;
static int ls_test_checks;

#define CHECK(cond)                                                                           \
	do {                                                                                  \
		ls_test_checks++;                                                             \
		if (!(cond)) {                                                                \
			ls_test_failures++;                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                             \
	} while (0)

#define CHECK_EQ(a, b)                                                                        \
	do {                                                                                  \
		long long ls_a_ = (long long)(a), ls_b_ = (long long)(b);                     \
		ls_test_checks++;                                                             \
		if (ls_a_ != ls_b_) {                                                         \
			ls_test_failures++;                                                   \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n",   \
				__FILE__, __LINE__, #a, ls_a_, #b, ls_b_);                    \
		}                                                                             \
	} while (0)

#define CHECK_STR(a, b)                                                                       \
	do {                                                                                  \
		ls_test_checks++;                                                             \
		if (strcmp((a), (b)) != 0) {                                                  \
			ls_test_failures++;                                                   \
			fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got  \"%s\"\n  want \"%s\"\n", \
				__FILE__, __LINE__, (a), (b));                                \
		}                                                                             \
	} while (0)

#define TEST_DONE()                                                                           \
	do {                                                                                  \
		printf("%d checks, %d failures\n", ls_test_checks, ls_test_failures);         \
		return ls_test_failures ? 1 : 0;                                              \
	} while (0)

/* xorshift64*: deterministic pseudo-random numbers for the bounded fuzz tests. */
static inline unsigned long long ls_rand_next(unsigned long long *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* Build an Ethernet II [+802.1Q] / IPv4 [+options] / UDP frame. Returns its length. */
static inline size_t ls_build_udp(unsigned char *f, size_t cap, int vlan, size_t ip_opts,
				  unsigned short dport, size_t payload)
{
	size_t off = 14 + (vlan ? 4 : 0), ihl = 20 + ip_opts;
	size_t total = off + ihl + 8 + payload;
	static const unsigned char dst[6] = {0x02, 0, 0, 0, 0, 0x01};
	static const unsigned char src[6] = {0x02, 0, 0, 0, 0, 0x02};

	if (total > cap || ip_opts % 4 || ip_opts > 40) {
		abort();
	}
	memset(f, 0, total);
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	if (vlan) {
		f[12] = 0x81; f[13] = 0x00; f[14] = 0x20; f[15] = 0x05; /* PCP 1, VID 5 */
		f[16] = 0x08; f[17] = 0x00;
	} else {
		f[12] = 0x08; f[13] = 0x00;
	}
	unsigned char *ip = f + off;
	ip[0] = (unsigned char)(0x40 | (ihl / 4));
	ip[2] = (unsigned char)((ihl + 8 + payload) >> 8);
	ip[3] = (unsigned char)(ihl + 8 + payload);
	ip[6] = 0x40; /* DF */
	ip[8] = 64;
	ip[9] = 17;
	ip[12] = 192; ip[13] = 0; ip[14] = 2; ip[15] = 1;   /* 192.0.2.1 (TEST-NET-1) */
	ip[16] = 192; ip[17] = 0; ip[18] = 2; ip[19] = 10;  /* 192.0.2.10 */
	for (size_t i = 0; i < ip_opts; i++) {
		ip[20 + i] = 1; /* NOP options */
	}
	unsigned char *udp = ip + ihl;
	udp[0] = 0xc0; udp[1] = 0x01; /* source port 49153 */
	udp[2] = (unsigned char)(dport >> 8); udp[3] = (unsigned char)dport;
	udp[4] = (unsigned char)((8 + payload) >> 8); udp[5] = (unsigned char)(8 + payload);
	for (size_t i = 0; i < payload; i++) {
		udp[8 + i] = (unsigned char)(i * 7 + 3);
	}
	return total;
}

/* Plain RFC 1071 reference sum, kept apart from the code under test. */
static inline unsigned ls_ref_csum(const unsigned char *p, size_t n, unsigned long acc)
{
	for (size_t i = 0; i < n; i++) {
		acc += (i & 1) ? p[i] : (unsigned long)p[i] << 8;
	}
	while (acc >> 16) {
		acc = (acc & 0xffff) + (acc >> 16);
	}
	return (unsigned)(~acc & 0xffff);
}

/* Fill in the IPv4 header checksum and (if udp_csum) the UDP checksum of a built frame. */
static inline void ls_finish_udp(unsigned char *f, int vlan, int udp_csum)
{
	unsigned char *ip = f + 14 + (vlan ? 4 : 0);
	size_t ihl = (size_t)(ip[0] & 15) * 4;
	unsigned char *udp = ip + ihl;
	size_t ulen = ((size_t)udp[4] << 8) | udp[5];
	unsigned char pseudo[12] = {ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19],
				    0, 17, (unsigned char)(ulen >> 8), (unsigned char)ulen};

	ip[10] = ip[11] = 0;
	unsigned c = ls_ref_csum(ip, ihl, 0);

	ip[10] = (unsigned char)(c >> 8);
	ip[11] = (unsigned char)c;
	udp[6] = udp[7] = 0;
	if (udp_csum) {
		unsigned long acc = 0xffffu & ~ls_ref_csum(pseudo, 12, 0);

		c = ls_ref_csum(udp, ulen, acc);
		if (c == 0) {
			c = 0xffff; /* RFC 768: a computed zero is sent as all ones */
		}
		udp[6] = (unsigned char)(c >> 8);
		udp[7] = (unsigned char)c;
	}
}

#endif /* LS_TEST_H_ */
