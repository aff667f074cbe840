/* gate_fixture.h — what the gate test programs (test_gate_*.c) share: the
 * skeleton loaded without pins and its maps filled through
 * maps/kernel_maps.c as fairgated fills them, frames built by hand from a
 * spec, BPF_PROG_TEST_RUN, the RST gate must answer with (built here
 * independently of gate.bpf.c), and checks that print what differed.
 *
 * Every case starts from gate_reset(): two tenants, acme (premium,
 * 10.1.0.0/16 and 2001:db8:1::/48) and beta (standard, 10.2.0.0/16 and
 * 2001:db8:2::/48), protected ports 8000 and 8443, no windows, allowance,
 * RST budget or overload, no learned sources, counters zero. */
#ifndef FAIRGATE_GATE_FIXTURE_H
#define FAIRGATE_GATE_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <linux/bpf.h>

#include "maps/kernel_maps.h"
#include "maps/src_index.h"

#define PORT 8000
#define S_NS 1000000000ull

enum { ACME = 0, BETA = 1 };

/* The maps of the loaded gate (unpinned), the policy gate_reset applied
 * (a case may change and re-apply it), and whether this run of the table
 * has fairgated's source index built and its rebuilder running. */
extern struct fg_maps maps;
extern struct fg_policy *pol;
extern bool index_on;

/* ---- frames ---- */

struct spec {
	int v6;
	const char *src, *dst;
	uint16_t sport, dport; /* 0: 40000, PORT */
	uint8_t flags;       /* TCP flags byte; 0: SYN */
	uint32_t seq;
	int tcp_opt;         /* bytes of TCP options, multiple of 4 */
	int payload;
	int vlans;
	int ip_opt;          /* IPv4 option bytes, multiple of 4 */
	int v6_ext;          /* hop-by-hop headers of 8 bytes */
	uint8_t proto;       /* 0 = TCP */
	uint16_t frag;       /* IPv4 frag_off, host order */
};

#define SYN 0x02
#define ACK 0x10
#define RST 0x04
#define FIN 0x01

extern const uint8_t mac_node[6], mac_client[6];

static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}
static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

/* RFC 1071 over big-endian 16-bit words, the textbook way. */
uint32_t sum_be(const uint8_t *p, size_t n, uint32_t sum);
uint16_t fold(uint32_t sum);
uint16_t tcp_csum(int v6, const uint8_t *src, const uint8_t *dst, const uint8_t *tcp, size_t len);

/* Ethernet header (with vlans tags) of an ethertype; its length. */
size_t l2(uint8_t *b, const uint8_t *dst, const uint8_t *src, int vlans, uint16_t type);
/* The frame of a spec into b (2048 bytes); its length. */
size_t build(uint8_t *b, const struct spec *sp);
/* The RST+ACK the kernel would send for this SYN, built from the spec. */
size_t expected_rst(uint8_t *b, const struct spec *sp);

/* ---- running and state ---- */

uint64_t now_ns(void);
/* gate's verdict for a frame (out, if given: 2048 bytes for the frame it
 * sent back); a failed BPF_PROG_TEST_RUN fails the case. */
int run(const uint8_t *in, size_t len, uint8_t *out, uint32_t *out_len);
int run_spec(const struct spec *sp);
struct fg_tenant_counters counters(uint32_t id);
struct fg_node_counters node_counters(void);
void deny(uint32_t id, int verdict, uint64_t for_ns);
void add_cidr(struct fg_tenant *t, int fam, const char *addr, int len);
/* gate_reset's policy, into p. */
void make_policy(struct fg_policy *p);

/* The frame gate sends back for an RST of want_len bytes: the frame's own
 * length with the surplus zeroed when it is at most FG_RST_PAD_MAX bytes,
 * else cut to the RST. */
void expect_rst_frame(const uint8_t *out, uint32_t out_len, size_t in_len, size_t want_len);
/* The spec's SYN is answered with exactly expected_rst(), checksums that
 * verify as a receiver checks them. */
void expect_rst(const struct spec *sp);

/* ---- checks, kernel-selftests style: on a mismatch they print the
 * expression, what it was and what was wanted, and fail the case at the
 * caller's line ---- */

#define ASSERT_EQ(got, want) \
	gate_assert_eq((long long)(got), (long long)(want), #got, __FILE__, __LINE__)
/* gate's verdict on the spec's frame (described when it differs). */
#define ASSERT_VERDICT(sp, want) gate_assert_verdict((sp), (want), __FILE__, __LINE__)
/* An XDP action, by name when it differs. */
#define ASSERT_XDP(got, want) gate_assert_xdp((got), (want), #got, __FILE__, __LINE__)

void gate_assert_eq(long long got, long long want, const char *what, const char *file, int line);
void gate_assert_verdict(const struct spec *sp, int want, const char *file, int line);
void gate_assert_xdp(int got, int want, const char *what, const char *file, int line);
const char *xdp_name(int verdict);

/* ---- the program ---- */

int gate_reset(void **state);
/* Runs tests as group `name` with gate loaded and, with again_with_index,
 * a second time with fairgated's source index built and its rebuilder
 * running, as in fairgated (not for cases that switch the index by hand).
 * Without root: one skipped case. Returns the failures. */
int gate_fixture_main(const char *name, const struct CMUnitTest *tests, size_t n,
		      bool again_with_index);

#endif
