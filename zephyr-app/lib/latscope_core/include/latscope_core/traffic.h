/*
 * latscope portable core: the test-traffic payload header written by `latscope traffic`.
 * Layout (big-endian), at the start of every UDP payload, followed by padding up to the size:
 *   0  u16 magic 0x4C54 ("LT")
 *   2  u16 run id (low 16 bits of the host's run identifier)
 *   4  u32 sequence number (0, 1, 2, ... per run)
 *   8  u64 intended send time, ns on the host's monotonic clock
 * The DUT echoes the payload unchanged; it parses the header only to count and to filter sizes.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#ifndef LATSCOPE_CORE_TRAFFIC_H_
#define LATSCOPE_CORE_TRAFFIC_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LS_TRAFFIC_MAGIC   0x4C54u
#define LS_TRAFFIC_HDR_LEN 16u

struct ls_traffic_hdr {
	uint16_t run_id;
	uint32_t seq;
	uint64_t intended_ns;
};

/** Parse the header; false if the payload is shorter than 16 bytes or the magic differs. */
bool ls_traffic_parse(const uint8_t *payload, size_t len, struct ls_traffic_hdr *out);

/**
 * The sequence number alone (bytes 4..7), for marker identity: needs the magic and 8 bytes
 * of payload. False (and @p seq untouched) otherwise.
 */
bool ls_traffic_seq(const uint8_t *payload, size_t len, uint32_t *seq);

/** Write the header into @p payload (>= 16 bytes). Returns false if len is too short. */
bool ls_traffic_write(uint8_t *payload, size_t len, const struct ls_traffic_hdr *hdr);

#ifdef __cplusplus
}
#endif

#endif /* LATSCOPE_CORE_TRAFFIC_H_ */
