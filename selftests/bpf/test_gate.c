/* test_gate.c — the XDP `gate` program run through BPF_PROG_TEST_RUN on
 * hand-built frames: pass, delay, shed (the RST compared byte for byte with
 * one built here independently, checksums included), IPv6, VLAN, SYN-ACK,
 * other ports, non-TCP, every truncation, fragments, options, shared
 * sources, allowance exhaustion, overload by tier, the attribution cache
 * following every change of the sources (learning, sharing, reloads,
 * eviction, two sources in one slot), and a differential fuzz against a
 * reference judge written in plain C. Maps are the skeleton's, unpinned,
 * filled through agent/kernel_maps.c as fairgated fills them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/kernel_maps.h"
#include "agent/src_index.h"
#include "selftests/common/percpu_zero.h"
#include "gate.skel.h"

#define PORT 8000
#define S_NS 1000000000ull

static struct gate_bpf *skel;
static struct fg_maps maps;
static struct fg_policy *pol;
static int prog_fd;
/* The second run of the table: fairgated's source index built and its
 * rebuilder running, so every case is judged through it as well. */
static bool index_on;

enum { ACME = 0, BETA = 1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * S_NS + (uint64_t)ts.tv_nsec;
}

/* ---- frames ---- */

struct spec {
	int v6;
	const char *src, *dst;
	uint16_t sport, dport;
	uint8_t flags;       /* TCP flags byte */
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

static const uint8_t mac_node[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t mac_client[6] = { 0x02, 0, 0, 0, 0, 0x02 };

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

/* RFC 1071 over big-endian 16-bit words, the textbook way. */
static uint32_t sum_be(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint16_t tcp_csum(int v6, const uint8_t *src, const uint8_t *dst, const uint8_t *tcp,
			 size_t len)
{
	uint32_t sum = 0;

	sum = sum_be(src, v6 ? 16 : 4, sum);
	sum = sum_be(dst, v6 ? 16 : 4, sum);
	sum += 6 + (uint32_t)len;
	return fold(sum_be(tcp, len, sum));
}

static size_t l2(uint8_t *b, const uint8_t *dst, const uint8_t *src, int vlans, uint16_t type)
{
	size_t o = 12;

	memcpy(b, dst, 6);
	memcpy(b + 6, src, 6);
	for (int i = 0; i < vlans; i++) {
		put16(b + o, i == 0 && vlans == 2 ? 0x88a8 : 0x8100);
		put16(b + o + 2, (uint16_t)(100 + i));
		o += 4;
	}
	put16(b + o, type);
	return o + 2;
}

static size_t build(uint8_t *b, const struct spec *sp)
{
	uint8_t src[16], dst[16];
	size_t o, l3, l4, tcp_len = 20 + (size_t)sp->tcp_opt + (size_t)sp->payload;
	uint8_t proto = sp->proto ? sp->proto : 6;

	memset(b, 0, 2048);
	inet_pton(sp->v6 ? AF_INET6 : AF_INET, sp->src, src);
	inet_pton(sp->v6 ? AF_INET6 : AF_INET, sp->dst, dst);
	o = l3 = l2(b, mac_node, mac_client, sp->vlans, sp->v6 ? 0x86dd : 0x0800);
	if (!sp->v6) {
		size_t ihl = 20 + (size_t)sp->ip_opt;

		b[o] = (uint8_t)(0x40 | (ihl / 4));
		put16(b + o + 2, (uint16_t)(ihl + tcp_len));
		put16(b + o + 4, 0x1234);
		put16(b + o + 6, sp->frag ? sp->frag : 0x4000);
		b[o + 8] = 61;
		b[o + 9] = proto;
		memcpy(b + o + 12, src, 4);
		memcpy(b + o + 16, dst, 4);
		for (int i = 0; i < sp->ip_opt; i++)
			b[o + 20 + (size_t)i] = 1; /* NOP options */
		put16(b + o + 10, fold(sum_be(b + o, ihl, 0)));
		o += ihl;
	} else {
		size_t ext = 8 * (size_t)sp->v6_ext;

		put32(b + o, 0x60012345);
		put16(b + o + 4, (uint16_t)(ext + tcp_len));
		b[o + 6] = sp->v6_ext ? 0 : proto;
		b[o + 7] = 61;
		memcpy(b + o + 8, src, 16);
		memcpy(b + o + 24, dst, 16);
		o += 40;
		for (int i = 0; i < sp->v6_ext; i++) {
			b[o] = i + 1 < sp->v6_ext ? 0 : proto;
			b[o + 1] = 0;
			b[o + 2] = 1; /* PadN */
			b[o + 3] = 4;
			o += 8;
		}
	}
	l4 = o;
	put16(b + o, sp->sport ? sp->sport : 40000);
	put16(b + o + 2, sp->dport ? sp->dport : PORT);
	put32(b + o + 4, sp->seq);
	b[o + 12] = (uint8_t)((5 + sp->tcp_opt / 4) << 4);
	b[o + 13] = sp->flags ? sp->flags : SYN;
	put16(b + o + 14, 64240);
	for (int i = 0; i < sp->tcp_opt; i++)
		b[o + 20 + (size_t)i] = 1;
	if (sp->tcp_opt >= 4) { /* MSS 1460 */
		b[o + 20] = 2; b[o + 21] = 4; put16(b + o + 22, 1460);
	}
	for (int i = 0; i < sp->payload; i++)
		b[o + 20 + (size_t)sp->tcp_opt + (size_t)i] = (uint8_t)('a' + i % 26);
	if (proto == 6)
		put16(b + o + 16, tcp_csum(sp->v6, src, dst, b + o, tcp_len));
	(void)l3;
	return l4 + tcp_len;
}

/* The RST+ACK the kernel would send for this SYN, built from the spec. */
static size_t expected_rst(uint8_t *b, const struct spec *sp)
{
	uint8_t src[16], dst[16];
	size_t o;
	uint32_t ack = sp->seq + 1 + (uint32_t)sp->payload + ((sp->flags & FIN) ? 1 : 0);

	memset(b, 0, 2048);
	inet_pton(sp->v6 ? AF_INET6 : AF_INET, sp->src, src);
	inet_pton(sp->v6 ? AF_INET6 : AF_INET, sp->dst, dst);
	o = l2(b, mac_client, mac_node, sp->vlans, sp->v6 ? 0x86dd : 0x0800);
	if (!sp->v6) {
		b[o] = 0x45;
		put16(b + o + 2, 40);
		put16(b + o + 6, 0x4000);
		b[o + 8] = 64;
		b[o + 9] = 6;
		memcpy(b + o + 12, dst, 4);
		memcpy(b + o + 16, src, 4);
		put16(b + o + 10, fold(sum_be(b + o, 20, 0)));
		o += 20;
	} else {
		put32(b + o, 0x60000000);
		put16(b + o + 4, 20);
		b[o + 6] = 6;
		b[o + 7] = 64;
		memcpy(b + o + 8, dst, 16);
		memcpy(b + o + 24, src, 16);
		o += 40;
	}
	put16(b + o, sp->dport ? sp->dport : PORT);
	put16(b + o + 2, sp->sport ? sp->sport : 40000);
	put32(b + o + 8, ack);
	b[o + 12] = 0x50;
	b[o + 13] = RST | ACK;
	put16(b + o + 16, tcp_csum(sp->v6, dst, src, b + o, 20));
	return o + 20;
}

/* ---- running and state ---- */

static int run(const uint8_t *in, size_t len, uint8_t *out, uint32_t *out_len)
{
	uint8_t scratch[2048];
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)len,
		    .data_out = out ? out : scratch, .data_size_out = 2048, .repeat = 1);
	int rc = bpf_prog_test_run_opts(prog_fd, &o);

	if (rc) {
		fprintf(stderr, "BPF_PROG_TEST_RUN failed: %d (len %zu)\n", rc, len);
		fail();
	}
	if (out_len)
		*out_len = o.data_size_out;
	return (int)o.retval;
}

static int run_spec(const struct spec *sp)
{
	uint8_t in[2048];

	return run(in, build(in, sp), NULL, NULL);
}

static struct fg_tenant_counters counters(uint32_t id)
{
	struct fg_tenant_counters c;

	assert_int_equal(fg_maps_tenant_counters(&maps, id, &c), 0);
	return c;
}

static struct fg_node_counters node_counters(void)
{
	struct fg_node_counters c;

	assert_int_equal(fg_maps_node_counters(&maps, &c), 0);
	return c;
}

static void add_cidr(struct fg_tenant *t, int fam, const char *addr, int len)
{
	struct fg_cidr *c = &t->sources[t->n_sources++];

	c->family = (uint8_t)fam;
	c->prefixlen = (uint8_t)len;
	inet_pton(fam, addr, c->addr);
}

static void make_policy(struct fg_policy *p)
{
	fg_policy_defaults(p);
	p->n_tiers = 2;
	snprintf(p->tiers[0].name, FG_NAME_MAX, "standard");
	p->tiers[0].weight = 1;
	p->tiers[0].kv_cap_tokens = 131072;
	snprintf(p->tiers[1].name, FG_NAME_MAX, "premium");
	p->tiers[1].weight = 2;
	p->tiers[1].kv_cap_tokens = 262144;
	p->n_tenants = 2;
	snprintf(p->tenants[ACME].name, FG_NAME_MAX, "acme");
	p->tenants[ACME].id = ACME;
	p->tenants[ACME].tier = 1;
	p->tenants[ACME].units_per_s = 9000;
	p->tenants[ACME].burst_s = 60;
	add_cidr(&p->tenants[ACME], AF_INET, "10.1.0.0", 16);
	add_cidr(&p->tenants[ACME], AF_INET6, "2001:db8:1::", 48);
	snprintf(p->tenants[BETA].name, FG_NAME_MAX, "beta");
	p->tenants[BETA].id = BETA;
	p->tenants[BETA].tier = 0;
	p->tenants[BETA].units_per_s = 3000;
	p->tenants[BETA].burst_s = 60;
	add_cidr(&p->tenants[BETA], AF_INET, "10.2.0.0", 16);
	add_cidr(&p->tenants[BETA], AF_INET6, "2001:db8:2::", 48);
	p->agent.n_protected_ports = 2;
	p->agent.protected_ports[0] = PORT;
	p->agent.protected_ports[1] = 8443;
	p->agent.deny_allowance_per_s = 0;
	p->agent.shed_rst_per_s = 0; /* every shed SYN gets its RST, but in rst_budget_* */
}

/* Empty src_learned (collect the keys first: restarting a hash walk
 * after every delete is quadratic when it is full). */
static void forget_learned(void)
{
	struct fg_src_key *keys = calloc(FG_MAP_MAX_LEARNED + 1, sizeof(*keys));
	uint32_t n = 0;

	assert_non_null(keys);
	for (int more = !bpf_map_get_next_key(maps.src_learned_fd, NULL, &keys[0]);
	     more && n < FG_MAP_MAX_LEARNED; n++)
		more = !bpf_map_get_next_key(maps.src_learned_fd, &keys[n], &keys[n + 1]);
	for (uint32_t i = 0; i < n; i++)
		bpf_map_delete_elem(maps.src_learned_fd, &keys[i]);
	free(keys);
	fg_maps_sources_changed(&maps); /* deleted behind kernel_maps.c's back */
}

/* Each test starts from: policy applied, no windows, no allowance, no
 * overload, no learned sources, counters zero. */
static int reset(void **state)
{
	char err[256];

	(void)state;
	make_policy(pol);
	if (fg_maps_apply_policy(&maps, pol, err, sizeof(err))) {
		fprintf(stderr, "apply: %s\n", err);
		return -1;
	}
	for (uint32_t i = 0; i < 4; i++) {
		fg_maps_set_deny(&maps, i, 0, FG_VERDICT_ALLOW, 0);
		maps.tenants[i].allow_tat_ns = 0;
		maps.tenants[i].rst_tat_ns = 0;
		if (fg_test_zero_percpu(skel->maps.FG_MAP_TENANT_STATS, i)) {
			fprintf(stderr, "zeroing tenant_stats[%u] failed\n", i);
			return -1;
		}
	}
	if (fg_test_zero_percpu(skel->maps.FG_MAP_NODE_STATS, 0)) {
		fprintf(stderr, "zeroing node_stats failed\n");
		return -1;
	}
	forget_learned();
	fg_maps_set_overload_rank(&maps, -1);
	if (index_on && fg_src_index_rebuild(&maps)) {
		fprintf(stderr, "source index: rebuild failed\n");
		return -1;
	}
	return 0;
}

static int setup(void **state)
{
	struct bpf_map *map;
	char err[256];

	(void)state;
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	skel = gate_bpf__open();
	if (!skel)
		return -1;
	/* No pins: this test must not touch the node's /sys/fs/bpf/fairgate. */
	bpf_object__for_each_map(map, skel->obj)
		bpf_map__set_pin_path(map, NULL);
	if (gate_bpf__load(skel)) {
		fprintf(stderr, "gate_bpf__load failed (are you root?)\n");
		return -1;
	}
	prog_fd = bpf_program__fd(skel->progs.fg_gate);
	if (fg_maps_from_object(&maps, skel->obj, err, sizeof(err))) {
		fprintf(stderr, "maps: %s\n", err);
		return -1;
	}
	pol = calloc(1, sizeof(*pol));
	return pol ? 0 : -1;
}

static int setup_with_index(void **state)
{
	char err[256];

	index_on = true;
	if (setup(state))
		return -1;
	if (fg_src_index_start(&maps, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fg_maps_close(&maps);
	gate_bpf__destroy(skel);
	free(pol);
	return 0;
}

static void deny(uint32_t id, int verdict, uint64_t for_ns)
{
	assert_int_equal(fg_maps_set_deny(&maps, id, now_ns() + for_ns, verdict, FG_DENY_OPERATOR), 0);
}

/* ---- the table ---- */

static void passes_without_a_window(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 1000 };

	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(counters(ACME).syn_passed, 1);
	assert_int_equal(counters(ACME).syn_shed, 0);
	assert_int_equal(node_counters().syn_judged, 1);
	/* The same tenant on its second protected port. */
	sp.dport = 8443;
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(counters(ACME).syn_passed, 2);
}

static int count_event(void *ctx, void *data, size_t len)
{
	struct fg_shed_event *out = ctx;

	if (len >= sizeof(*out))
		*out = *(struct fg_shed_event *)data;
	return 0;
}

static void delay_drops_the_syn(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 1000, .tcp_opt = 20 };
	struct fg_shed_event ev = { 0 };
	struct ring_buffer *rb = ring_buffer__new(maps.shed_events_fd, count_event, &ev, NULL);

	assert_non_null(rb);
	ring_buffer__consume(rb); /* drain earlier tests' events */
	memset(&ev, 0, sizeof(ev));
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_DROP);
	assert_int_equal(counters(ACME).syn_delayed, 1);
	assert_int_equal(counters(ACME).syn_passed, 0);
	/* Sampled: the first one of a tenant is always reported. */
	assert_true(ring_buffer__consume(rb) >= 1);
	assert_int_equal(ev.tenant_id, ACME);
	assert_int_equal(ev.reason, FG_SHED_DELAY);
	assert_int_equal(ev.dport, PORT);
	assert_int_equal(ev.sport, 40000);
	ring_buffer__free(rb);
	/* The other tenant is untouched. */
	sp.src = "10.2.0.9";
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(counters(BETA).syn_passed, 1);
}

/* The frame gate sends back for an RST of want_len bytes: the frame's own
 * length with the surplus zeroed when it is at most FG_RST_PAD_MAX bytes,
 * else cut to the RST. */
static void expect_rst_frame(const uint8_t *out, uint32_t out_len, size_t in_len,
			     size_t want_len)
{
	if (in_len > want_len && in_len - want_len <= FG_RST_PAD_MAX) {
		assert_int_equal(out_len, in_len);
		for (size_t i = want_len; i < in_len; i++)
			if (out[i])
				fail_msg("byte %zu behind the RST is %02x, not padding", i, out[i]);
	} else {
		assert_int_equal(out_len, want_len);
	}
}

static void expect_rst(const struct spec *sp)
{
	uint8_t in[2048], out[2048], want[2048];
	size_t len = build(in, sp), want_len = expected_rst(want, sp);
	uint32_t out_len = 0;

	assert_int_equal(run(in, len, out, &out_len), XDP_TX);
	expect_rst_frame(out, out_len, len, want_len);
	if (memcmp(out, want, want_len)) {
		for (size_t i = 0; i < want_len; i++)
			if (out[i] != want[i])
				fprintf(stderr, "byte %zu: got %02x want %02x\n", i, out[i], want[i]);
		fail_msg("RST differs from the expected frame");
	}
	/* And the checksums verify the way a receiver checks them. */
	size_t l3 = 14 + 4 * (size_t)sp->vlans, l4 = l3 + (sp->v6 ? 40 : 20);
	if (!sp->v6)
		assert_int_equal(fold(sum_be(out + l3, 20, 0)), 0);
	assert_int_equal(tcp_csum(sp->v6, out + l3 + (sp->v6 ? 8 : 12),
				  out + l3 + (sp->v6 ? 24 : 16), out + l4, 20), 0);
}

static void shed_answers_rst_ack(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .sport = 51234, .seq = 0xfffffff0,
			   .tcp_opt = 20 };

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	expect_rst(&sp);
	assert_int_equal(counters(ACME).syn_shed, 1);
	assert_int_equal(node_counters().rst_sent, 1);
	/* A SYN carrying data (TFO) and FIN: ACK covers all of it. */
	struct spec data = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 77, .tcp_opt = 12,
			     .payload = 33, .flags = SYN | FIN };
	expect_rst(&data);
	/* Sequence wrap: 0xffffffff + 1 = 0. */
	struct spec wrap = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 0xffffffff };
	expect_rst(&wrap);
	assert_int_equal(counters(ACME).syn_shed, 3);
}

/* Bytes behind the datagram (a short frame's Ethernet padding, or junk)
 * are never reflected: zeroed when few, cut when many. */
static void shed_trailing_bytes(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 5 };
	uint8_t in[2048], out[2048], want[2048];
	size_t want_len = expected_rst(want, &sp);
	uint32_t out_len = 0;

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	for (int tcp_opt = 0; tcp_opt <= 20; tcp_opt += 20) {
		for (size_t trailing = 6; trailing <= 1000; trailing += 994) {
			sp.tcp_opt = tcp_opt;
			size_t len = build(in, &sp);
			memset(in + len, 'x', trailing);
			assert_int_equal(run(in, len + trailing, out, &out_len), XDP_TX);
			expect_rst_frame(out, out_len, len + trailing, want_len);
			assert_memory_equal(out, want, want_len);
		}
	}
	assert_int_equal(counters(ACME).syn_shed, 4);
	assert_int_equal(node_counters().rst_fallback_drop, 0);
}

static void shed_ipv6(void **state)
{
	(void)state;
	struct spec sp = { .v6 = 1, .src = "2001:db8:1::42", .dst = "2001:db8::1", .seq = 4242,
			   .tcp_opt = 20 };

	assert_int_equal(run_spec(&sp), XDP_PASS);
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	expect_rst(&sp);
	sp.payload = 10;
	expect_rst(&sp);
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_DROP);
	struct spec beta = { .v6 = 1, .src = "2001:db8:2::7", .dst = "2001:db8::1" };
	assert_int_equal(run_spec(&beta), XDP_PASS);
	assert_int_equal(counters(ACME).syn_shed, 2);
	assert_int_equal(counters(ACME).syn_delayed, 1);
	assert_int_equal(counters(BETA).syn_passed, 1);
}

static void shed_vlan_tagged(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	struct spec one = { .src = "10.1.2.3", .dst = "10.0.0.1", .vlans = 1, .tcp_opt = 8 };
	expect_rst(&one);
	struct spec two = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .vlans = 2 };
	expect_rst(&two);
	/* Three tags: more than we walk, not judged. */
	struct spec three = { .src = "10.1.2.3", .dst = "10.0.0.1", .vlans = 3 };
	assert_int_equal(run_spec(&three), XDP_PASS);
	assert_int_equal(counters(ACME).syn_shed, 2);
}

static void syn_ack_and_others_pass(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	uint8_t flag_sets[] = { SYN | ACK, ACK, ACK | FIN, RST, RST | ACK, SYN | RST, 0, FIN };

	for (size_t i = 0; i < sizeof(flag_sets); i++) {
		struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .flags = flag_sets[i] };

		if (!flag_sets[i])
			sp.flags = 0x40; /* ECE alone */
		assert_int_equal(run_spec(&sp), XDP_PASS);
	}
	/* Unprotected port. */
	struct spec other = { .src = "10.1.2.3", .dst = "10.0.0.1", .dport = 22 };
	assert_int_equal(run_spec(&other), XDP_PASS);
	other.dport = 8001;
	assert_int_equal(run_spec(&other), XDP_PASS);
	/* UDP and ICMP to the protected port number. */
	struct spec udp = { .src = "10.1.2.3", .dst = "10.0.0.1", .proto = 17 };
	assert_int_equal(run_spec(&udp), XDP_PASS);
	struct spec icmp6 = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .proto = 58 };
	assert_int_equal(run_spec(&icmp6), XDP_PASS);
	/* ARP. */
	uint8_t arp[60] = { 0 };
	l2(arp, mac_node, mac_client, 0, 0x0806);
	assert_int_equal(run(arp, sizeof(arp), NULL, NULL), XDP_PASS);
	struct fg_tenant_counters c = counters(ACME);
	assert_int_equal(c.syn_shed + c.syn_delayed + c.syn_passed, 0);
	assert_int_equal(node_counters().syn_judged, 0);
}

static void unattributed_and_expired_pass(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	struct spec stranger = { .src = "192.0.2.1", .dst = "10.0.0.1" };
	assert_int_equal(run_spec(&stranger), XDP_PASS);
	assert_int_equal(node_counters().unattributed, 1);
	/* A window that ended is no window (gate reads the coarse clock,
	 * up to a tick behind: "ended" here is a second ago). */
	assert_int_equal(fg_maps_set_deny(&maps, ACME, now_ns() - S_NS, FG_VERDICT_SHED, 1), 0);
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	assert_int_equal(run_spec(&sp), XDP_PASS);
	/* allow clears it. */
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_TX);
	fg_maps_set_deny(&maps, ACME, 0, FG_VERDICT_ALLOW, 0);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	/* A window past the policy's tenants (inactive slot) never judges. */
	fg_maps_set_deny(&maps, 5, now_ns() + 60 * S_NS, FG_VERDICT_SHED, 1);
	struct fg_src_key k;
	fg_src_key_parse("192.0.2.5", &k);
	assert_true(fg_maps_learn_source(&maps, &k, 5, now_ns()) >= 0);
	struct spec ghost = { .src = "192.0.2.5", .dst = "10.0.0.1" };
	assert_int_equal(run_spec(&ghost), XDP_PASS);
	fg_maps_set_deny(&maps, 5, 0, FG_VERDICT_ALLOW, 0);
}

static void truncated_frames_never_judged(void **state)
{
	(void)state;
	struct spec specs[] = {
		{ .src = "10.1.2.3", .dst = "10.0.0.1", .tcp_opt = 20, .payload = 5 },
		{ .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .tcp_opt = 12 },
		{ .src = "10.1.2.3", .dst = "10.0.0.1", .vlans = 2, .tcp_opt = 4 },
		{ .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .v6_ext = 2 },
	};

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++) {
		uint8_t in[2048];
		size_t full = build(in, &specs[s]);

		/* XDP test runs need at least an Ethernet header. */
		for (size_t len = 14; len < full; len++)
			assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
		/* Trailing bytes after the datagram (Ethernet padding) are fine. */
		int full_rc = run(in, full, NULL, NULL);
		assert_true(full_rc == XDP_TX || full_rc == XDP_DROP);
		memset(in + full, 0, 16);
		assert_int_equal(run(in, full + 16, NULL, NULL), full_rc);
	}
}

static void malformed_headers_pass(void **state)
{
	(void)state;
	uint8_t in[2048];
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .tcp_opt = 8 };
	size_t len;

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	/* Fragments: first (MF), middle, last. */
	uint16_t frags[] = { 0x2000, 0x2010, 0x0010 };
	for (size_t i = 0; i < 3; i++) {
		sp.frag = frags[i];
		assert_int_equal(run_spec(&sp), XDP_PASS);
	}
	sp.frag = 0;
	/* ihl < 5, version 5, doff < 5, doff beyond the datagram, tot_len short. */
	len = build(in, &sp);
	in[14] = 0x44;
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	in[14] = 0x55;
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	in[14 + 20 + 12] = 0x40;
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	in[14 + 20 + 12] = 0xf0;
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	put16(in + 16, 30); /* tot_len < ihl + tcp */
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	put16(in + 16, 10); /* tot_len < ihl */
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	/* IPv6 fragment header, and five extension headers. */
	struct spec v6 = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .v6_ext = 1 };
	len = build(in, &v6);
	in[14 + 6] = 44;
	assert_int_equal(run(in, len, NULL, NULL), XDP_PASS);
	v6.v6_ext = 5;
	assert_int_equal(run_spec(&v6), XDP_PASS);
	assert_int_equal(counters(ACME).syn_shed, 0);
	assert_true(node_counters().not_judged >= 10);
}

static void options_shed_by_rst(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	/* IPv4 options / IPv6 extension headers: the RST carries none of
	 * them (an RST must not echo them), its TCP header moved up behind a
	 * plain IP header. */
	struct spec v4 = { .src = "10.1.2.3", .dst = "10.0.0.1", .ip_opt = 8, .tcp_opt = 12,
			   .seq = 99 };
	expect_rst(&v4);
	struct spec v6 = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .v6_ext = 4,
			   .tcp_opt = 20, .payload = 7, .seq = 0xfffffffe };
	expect_rst(&v6);
	assert_int_equal(counters(ACME).syn_shed, 2);
	assert_int_equal(node_counters().rst_sent, 2);
	assert_int_equal(node_counters().rst_fallback_drop, 0);
	/* Without a window they pass like any SYN. */
	fg_maps_set_deny(&maps, ACME, 0, 0, 0);
	assert_int_equal(run_spec(&v4), XDP_PASS);
	assert_int_equal(run_spec(&v6), XDP_PASS);
}

static void learned_and_shared_sources(void **state)
{
	(void)state;
	struct fg_src_key k;
	struct spec nat = { .src = "192.0.2.10", .dst = "10.0.0.1" };
	struct spec in_acme_cidr = { .src = "10.1.9.9", .dst = "10.0.0.1" };

	deny(BETA, FG_VERDICT_SHED, 60 * S_NS);
	/* Learned beats static: an acme-CIDR address that authenticated as beta. */
	fg_src_key_parse("10.1.9.9", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(run_spec(&in_acme_cidr), XDP_TX);
	assert_int_equal(counters(BETA).syn_shed, 1);
	/* Seen with acme too: shared, so the static CIDR (acme) decides. */
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	assert_int_equal(run_spec(&in_acme_cidr), XDP_PASS);
	assert_int_equal(counters(ACME).syn_passed, 1);
	/* An address with no CIDR: learned for beta → shed; shared → pass. */
	fg_src_key_parse("192.0.2.10", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0); /* same tenant again */
	assert_int_equal(run_spec(&nat), XDP_TX);
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	assert_int_equal(run_spec(&nat), XDP_PASS);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 1); /* stays shared */
	assert_int_equal(run_spec(&nat), XDP_PASS);
	struct fg_node_counters nc = node_counters();
	assert_int_equal(nc.shared_source, 3);
	assert_int_equal(nc.unattributed, 2);
	/* IPv6 learned. */
	struct spec v6 = { .v6 = 1, .src = "2001:db8:99::5", .dst = "2001:db8::1" };
	assert_int_equal(run_spec(&v6), XDP_PASS);
	fg_src_key_parse("2001:db8:99::5", &k);
	fg_maps_learn_source(&maps, &k, BETA, now_ns());
	expect_rst(&v6);
}

static void allowance_then_shed(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };

	/* 2 per second, burst 2: two pass, the third is shed. */
	maps.node->allow_interval_ns = S_NS / 2;
	maps.node->allow_burst = 2;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(run_spec(&sp), XDP_TX);
	assert_int_equal(run_spec(&sp), XDP_TX);
	struct fg_tenant_counters c = counters(ACME);
	assert_int_equal(c.allowance_used, 2);
	assert_int_equal(c.syn_passed, 2);
	assert_int_equal(c.syn_shed, 2);
	/* Another tenant's allowance is its own. */
	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };
	assert_int_equal(run_spec(&beta), XDP_PASS);
	assert_int_equal(run_spec(&beta), XDP_PASS);
	assert_int_equal(run_spec(&beta), XDP_DROP);
	/* Half a second later one more token has come back. */
	usleep(550 * 1000);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(run_spec(&sp), XDP_TX);
	assert_int_equal(counters(ACME).allowance_used, 3);
	/* The allowance is only for deny windows: outside one nothing is used. */
	fg_maps_set_deny(&maps, ACME, 0, 0, 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(counters(ACME).allowance_used, 3);
}

static void rst_budget_drops_past_it(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };
	struct fg_tenant_counters c;
	char err[256];

	/* The policy's knob reaches the node: 2 RSTs per second, burst 2. */
	pol->agent.shed_rst_per_s = 2;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	assert_int_equal(maps.node->rst_interval_ns, S_NS / 2);
	assert_int_equal(maps.node->rst_burst, 2);
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	expect_rst(&sp);
	expect_rst(&sp);
	/* Spent: dropped, and the frame is left as it came. */
	assert_int_equal(run_spec(&sp), XDP_DROP);
	assert_int_equal(run_spec(&sp), XDP_DROP);
	c = counters(ACME);
	assert_int_equal(c.syn_shed, 2);
	assert_int_equal(c.shed_dropped, 2);
	assert_int_equal(c.syn_delayed, 0);
	/* Each tenant has its own budget, overload sheds spend it too. */
	fg_maps_set_overload_rank(&maps, 0);
	assert_int_equal(run_spec(&beta), XDP_TX);
	assert_int_equal(run_spec(&beta), XDP_TX);
	assert_int_equal(run_spec(&beta), XDP_DROP);
	assert_int_equal(counters(BETA).overload_shed, 2);
	assert_int_equal(counters(BETA).shed_dropped, 1);
	fg_maps_set_overload_rank(&maps, -1);
	/* Half a second later one RST has come back. */
	usleep(550 * 1000);
	assert_int_equal(run_spec(&sp), XDP_TX);
	assert_int_equal(run_spec(&sp), XDP_DROP);
	/* A delay window never spends it. */
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_DROP);
	c = counters(ACME);
	assert_int_equal(c.syn_shed, 3);
	assert_int_equal(c.shed_dropped, 3);
	assert_int_equal(c.syn_delayed, 1);
	/* off: no budget. */
	pol->agent.shed_rst_per_s = 0;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	assert_int_equal(maps.node->rst_interval_ns, 0);
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	for (int i = 0; i < 5; i++)
		assert_int_equal(run_spec(&sp), XDP_TX);
}

static void overload_sheds_low_tiers(void **state)
{
	(void)state;
	struct spec acme = { .src = "10.1.2.3", .dst = "10.0.0.1" };   /* premium, rank 1 */
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };   /* standard, rank 0 */

	assert_int_equal(maps.tenants[ACME].tier_rank, 1);
	assert_int_equal(maps.tenants[BETA].tier_rank, 0);
	assert_string_equal(maps.tenants[ACME].tier, "premium");
	fg_maps_set_overload_rank(&maps, 0);
	assert_int_equal(run_spec(&beta), XDP_TX);
	assert_int_equal(run_spec(&acme), XDP_PASS);
	fg_maps_set_overload_rank(&maps, 1);
	assert_int_equal(run_spec(&beta), XDP_TX);
	assert_int_equal(run_spec(&acme), XDP_TX);
	fg_maps_set_overload_rank(&maps, -1);
	assert_int_equal(run_spec(&beta), XDP_PASS);
	assert_int_equal(run_spec(&acme), XDP_PASS);
	assert_int_equal(counters(BETA).overload_shed, 2);
	assert_int_equal(counters(BETA).syn_shed, 2);
	assert_int_equal(counters(ACME).overload_shed, 1);
	/* A delay window wins over overload's shed for that tenant. */
	fg_maps_set_overload_rank(&maps, 1);
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	assert_int_equal(run_spec(&acme), XDP_DROP);
}

static void policy_reload_keeps_state_by_name(void **state)
{
	(void)state;
	char err[256];
	struct spec acme = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	struct fg_src_key k;

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	assert_int_equal(run_spec(&acme), XDP_TX);
	fg_src_key_parse("192.0.2.77", &k);
	fg_maps_learn_source(&maps, &k, BETA, now_ns());
	/* New policy: gamma first, then beta, then acme. */
	struct fg_policy *p = calloc(1, sizeof(*p));
	assert_non_null(p);
	make_policy(p);
	struct fg_tenant a = p->tenants[ACME], b = p->tenants[BETA];
	memset(&p->tenants[0], 0, sizeof(p->tenants[0]));
	snprintf(p->tenants[0].name, FG_NAME_MAX, "gamma");
	p->tenants[1] = b;
	p->tenants[1].id = 1;
	p->tenants[2] = a;
	p->tenants[2].id = 2;
	p->n_tenants = 3;
	assert_int_equal(fg_maps_apply_policy(&maps, p, err, sizeof(err)), 0);
	assert_int_equal(fg_maps_tenant_id(&maps, "acme"), 2);
	assert_int_equal(fg_maps_tenant_id(&maps, "gamma"), 0);
	assert_int_equal(maps.tenants[2].verdict, FG_VERDICT_SHED);
	assert_int_equal(maps.tenants[0].deny_until_ns, 0);
	assert_int_equal(counters(2).syn_shed, 1);
	assert_int_equal(counters(0).syn_shed, 0);
	struct fg_src_learned v;
	assert_int_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	assert_int_equal(v.tenant_id, 1);
	/* The CIDR now points at acme's new id. */
	assert_int_equal(run_spec(&acme), XDP_TX);
	assert_int_equal(counters(2).syn_shed, 2);
	/* Dropping beta from the policy forgets what was learned for it. */
	p->tenants[1] = p->tenants[2];
	p->tenants[1].id = 1;
	p->n_tenants = 2;
	assert_int_equal(fg_maps_apply_policy(&maps, p, err, sizeof(err)), 0);
	assert_int_not_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	assert_int_equal(fg_maps_tenant_id(&maps, "beta"), -1);
	assert_int_equal(counters(1).syn_shed, 2);
	free(p);
}

/* ---- the attribution cache ---- */

/* Every change of what attributes a source shows in the very next SYN,
 * although the one before it had cached the old answer. */
static void cache_follows_learning(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.7.7", .dst = "10.0.0.1" };
	struct fg_src_key k;

	deny(BETA, FG_VERDICT_SHED, 60 * S_NS);
	for (int i = 0; i < 3; i++)
		assert_int_equal(run_spec(&sp), XDP_PASS); /* acme by CIDR, cached */
	assert_int_equal(counters(ACME).syn_passed, 3);
	fg_src_key_parse("10.1.7.7", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(run_spec(&sp), XDP_TX); /* learned beta wins */
	assert_int_equal(run_spec(&sp), XDP_TX);
	assert_int_equal(counters(BETA).syn_shed, 2);
	/* Refreshing the same answer keeps it. */
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(run_spec(&sp), XDP_TX);
	/* Shared: back to the CIDR, and every SYN counts as a shared source,
	 * answered from the cache or not. */
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(counters(ACME).syn_passed, 7);
	assert_int_equal(node_counters().shared_source, 4);
	/* Unattributed answers are cached and counted per SYN too. */
	struct spec stranger = { .src = "198.51.100.9", .dst = "10.0.0.1" };
	for (int i = 0; i < 3; i++)
		assert_int_equal(run_spec(&stranger), XDP_PASS);
	assert_int_equal(node_counters().unattributed, 3);
	fg_src_key_parse("198.51.100.9", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(run_spec(&stranger), XDP_TX);
	/* Deleted behind kernel_maps.c's back, then announced: forgotten. */
	assert_int_equal(bpf_map_delete_elem(maps.src_learned_fd, &k), 0);
	fg_maps_sources_changed(&maps);
	assert_int_equal(run_spec(&stranger), XDP_PASS);
	assert_int_equal(node_counters().unattributed, 4);
}

static void cache_follows_policy_reload(void **state)
{
	(void)state;
	char err[256];
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	struct spec v6 = { .v6 = 1, .src = "2001:db8:1::77", .dst = "2001:db8::1" };

	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(run_spec(&v6), XDP_PASS);
	/* The same tenants, but acme's CIDRs now belong to beta. */
	make_policy(pol);
	struct fg_cidr a4 = pol->tenants[ACME].sources[0], a6 = pol->tenants[ACME].sources[1];
	pol->tenants[ACME].n_sources = 0;
	pol->tenants[BETA].sources[pol->tenants[BETA].n_sources++] = a4;
	pol->tenants[BETA].sources[pol->tenants[BETA].n_sources++] = a6;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	assert_int_equal(run_spec(&sp), XDP_DROP);
	assert_int_equal(run_spec(&v6), XDP_DROP);
	/* And gone altogether: unattributed. */
	pol->tenants[BETA].n_sources -= 2;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(counters(BETA).syn_delayed, 2);
	assert_int_equal(node_counters().unattributed, 1);
}

static uint32_t cache_slot(const struct fg_src_key *k)
{
	uint64_t a[2];

	memcpy(a, k->addr, sizeof(a));
	return fg_src_cache_slot(maps.node->src_hash_key, a[0], a[1]);
}

/* An edit that bypasses kernel_maps.c (bpftool on the pins) bumps no
 * generation; the cache still lets it show within its lifetime, 256 ticks
 * (≤ 2.6 s even at HZ=100). */
static void cache_expires_edits_behind_its_back(void **state)
{
	(void)state;
	struct spec sp = { .src = "198.51.100.77", .dst = "10.0.0.1" };
	struct fg_src_learned v = { .tenant_id = BETA };
	struct fg_src_key k;
	int tries = 0;

	deny(BETA, FG_VERDICT_SHED, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_PASS); /* unattributed, cached */
	fg_src_key_parse("198.51.100.77", &k);
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	while (run_spec(&sp) != XDP_TX) {
		assert_true(++tries < 400);
		usleep(10 * 1000);
	}
	fprintf(stderr, "# seen after %d ms\n", tries * 10);
}

/* A learned entry naming no tenant (bpftool, a corrupt pin) is judged
 * unattributed, from the cache too: the answer must not wrap into an id. */
static void cache_keeps_bad_ids_unattributed(void **state)
{
	(void)state;
	struct spec sp = { .src = "198.51.100.78", .dst = "10.0.0.1" };
	struct fg_src_learned v = { .tenant_id = 0x10000 + BETA };
	struct fg_src_key k;

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	deny(BETA, FG_VERDICT_SHED, 60 * S_NS);
	fg_src_key_parse("198.51.100.78", &k);
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	fg_maps_sources_changed(&maps);
	for (int i = 0; i < 3; i++)
		assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(node_counters().unattributed, 3);
	v.tenant_id = 0xffffffff;
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	fg_maps_sources_changed(&maps);
	for (int i = 0; i < 3; i++)
		assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(node_counters().unattributed, 6);
}

/* Two sources whose hashes pick the same slot take turns in it; neither
 * is ever judged by the other's answer. */
static void colliding_sources(void **state)
{
	(void)state;
	struct fg_src_key a, b;
	char text_a[64], text_b[64];
	uint32_t want;
	int found = 0;

	fg_src_key_parse("10.1.0.1", &a);
	want = cache_slot(&a);
	/* 65536 slots: some address in beta's /16 lands in the same one
	 * with probability 1 - (1 - 2^-16)^65536 ≈ 63%; also try 10.2/16's
	 * IPv6 neighbour 2001:db8:2::/48 if not. */
	for (uint32_t i = 0; i < 65536 && !found; i++) {
		snprintf(text_b, sizeof(text_b), "10.2.%u.%u", i >> 8, i & 255);
		fg_src_key_parse(text_b, &b);
		found = cache_slot(&b) == want;
	}
	for (uint32_t i = 0; i < (1u << 20) && !found; i++) {
		snprintf(text_b, sizeof(text_b), "2001:db8:2::%x:%x", i >> 16, i & 0xffff);
		fg_src_key_parse(text_b, &b);
		found = cache_slot(&b) == want;
	}
	assert_true(found);
	fg_src_key_format(&a, text_a, sizeof(text_a));
	struct spec sa = { .src = text_a, .dst = "10.0.0.1" };
	struct spec sb = { .v6 = strchr(text_b, ':') != NULL, .src = text_b,
			   .dst = strchr(text_b, ':') ? "2001:db8::1" : "10.0.0.1" };

	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(run_spec(&sa), XDP_PASS);
		assert_int_equal(run_spec(&sa), XDP_PASS);
		assert_int_equal(run_spec(&sb), XDP_DROP);
	}
	assert_int_equal(counters(ACME).syn_passed, 12);
	assert_int_equal(counters(BETA).syn_delayed, 6);
}

/* src_learned is a plain hash aged by kernel_maps.c: when full, learning
 * one more forgets the least recently seen eighth, and gate's cached
 * answers for them go too. */
static void learned_full_forgets_the_oldest(void **state)
{
	(void)state;
	struct fg_src_key k, oldest, newest;
	struct fg_src_learned v;
	struct spec old_src = { .src = "198.18.0.0", .dst = "10.0.0.1" };
	uint64_t t0 = now_ns();

	for (uint32_t i = 0; i < FG_MAP_MAX_LEARNED; i++) {
		char text[32];

		snprintf(text, sizeof(text), "198.18.%u.%u", i >> 8, i & 255);
		fg_src_key_parse(text, &k);
		assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, t0 + i), 0);
		if (i == 0)
			oldest = k;
		newest = k;
	}
	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	assert_int_equal(run_spec(&old_src), XDP_DROP); /* learned beta, cached */
	fg_src_key_parse("203.0.113.1", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, t0 + FG_MAP_MAX_LEARNED), 0);
	assert_int_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	assert_int_not_equal(bpf_map_lookup_elem(maps.src_learned_fd, &oldest, &v), 0);
	assert_int_equal(bpf_map_lookup_elem(maps.src_learned_fd, &newest, &v), 0);
	uint32_t n = 0;
	for (int more = !bpf_map_get_next_key(maps.src_learned_fd, NULL, &k); more;
	     more = !bpf_map_get_next_key(maps.src_learned_fd, &k, &k))
		n++;
	assert_int_equal(n, FG_MAP_MAX_LEARNED - FG_MAP_MAX_LEARNED / 8 + 1);
	/* 198.18.0.0 was forgotten: no CIDR, so unattributed, cache or not. */
	assert_int_equal(run_spec(&old_src), XDP_PASS);
	assert_int_equal(counters(BETA).syn_delayed, 1);
}

/* ---- differential fuzz ---- */

struct judge { int act; int tx_ok; };

/* The rules of gate.bpf.c restated independently: what must happen to a
 * frame, given acme shed, beta delay, no allowance, no overload. */
static int reference(const uint8_t *f, size_t len)
{
	size_t o = 14, l4, l4_len;
	uint16_t type;
	uint8_t src[16] = { 0 };
	int v6;

	if (len < 14)
		return XDP_PASS;
	type = get16(f + 12);
	for (int i = 0; i < 2 && (type == 0x8100 || type == 0x88a8); i++) {
		if (len < o + 4)
			return XDP_PASS;
		type = get16(f + o + 2);
		o += 4;
	}
	if (type == 0x0800) {
		size_t ihl, tot;

		if (len < o + 20 || f[o + 9] != 6 || f[o] >> 4 != 4 || (f[o] & 15) < 5)
			return XDP_PASS;
		if (get16(f + o + 6) & 0x3fff)
			return XDP_PASS;
		ihl = (size_t)(f[o] & 15) * 4;
		tot = get16(f + o + 2);
		if (tot < ihl || tot > len - o)
			return XDP_PASS;
		v6 = 0;
		src[10] = src[11] = 0xff;
		memcpy(src + 12, f + o + 12, 4);
		l4 = o + ihl;
		l4_len = tot - ihl;
	} else if (type == 0x86dd) {
		size_t pl, p;
		uint8_t nh;
		int n = 0;

		if (len < o + 40 || f[o] >> 4 != 6)
			return XDP_PASS;
		pl = get16(f + o + 4);
		if (pl > len - o - 40)
			return XDP_PASS;
		nh = f[o + 6];
		p = o + 40;
		while (nh == 0 || nh == 43 || nh == 60) {
			if (n++ == 4 || len < p + 2)
				return XDP_PASS;
			nh = f[p];
			p += ((size_t)f[p + 1] + 1) * 8;
			if (p > 1024)
				return XDP_PASS;
		}
		if (nh != 6 || pl < p - o - 40)
			return XDP_PASS;
		v6 = 1;
		memcpy(src, f + o + 8, 16);
		l4 = p;
		l4_len = pl - (p - o - 40);
	} else {
		return XDP_PASS;
	}
	(void)v6;
	if (len < l4 + 20)
		return XDP_PASS;
	uint8_t flags = f[l4 + 13];
	size_t doff = (size_t)(f[l4 + 12] >> 4) * 4;
	if (!(flags & SYN) || (flags & ACK) || (flags & RST))
		return XDP_PASS;
	if (doff < 20 || l4_len < doff)
		return XDP_PASS;
	uint16_t dport = get16(f + l4 + 2);
	if (dport != PORT && dport != 8443)
		return XDP_PASS;
	static const uint8_t v4map[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	int tenant = -1;
	if (!memcmp(src, v4map, 12) && src[12] == 10 && src[13] == 1)
		tenant = ACME;
	else if (!memcmp(src, v4map, 12) && src[12] == 10 && src[13] == 2)
		tenant = BETA;
	else if (get32(src) == 0x20010db8 && get16(src + 4) == 1)
		tenant = ACME;
	else if (get32(src) == 0x20010db8 && get16(src + 4) == 2)
		tenant = BETA;
	if (tenant == BETA)
		return XDP_DROP;
	if (tenant == ACME)
		return XDP_TX;
	return XDP_PASS;
}

static size_t out_l3(const uint8_t *f)
{
	size_t o = 14;
	uint16_t type = get16(f + 12);

	for (int i = 0; i < 2 && (type == 0x8100 || type == 0x88a8); i++) {
		type = get16(f + o + 2);
		o += 4;
	}
	return o;
}

static void fuzz_matches_reference(void **state)
{
	(void)state;
	struct spec seeds[] = {
		{ .src = "10.1.2.3", .dst = "10.0.0.1", .tcp_opt = 20 },
		{ .src = "10.2.2.3", .dst = "10.0.0.1", .tcp_opt = 8, .payload = 4 },
		{ .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .tcp_opt = 12 },
		{ .v6 = 1, .src = "2001:db8:2::1", .dst = "2001:db8::1", .v6_ext = 2 },
		{ .src = "10.1.2.3", .dst = "10.0.0.1", .vlans = 1, .ip_opt = 4 },
		{ .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .vlans = 2 },
	};
	unsigned seed = (unsigned)time(NULL);
	int iterations = getenv("FG_FUZZ_ITERATIONS") ? atoi(getenv("FG_FUZZ_ITERATIONS")) : 20000;
	int counts[5] = { 0 };

	deny(ACME, FG_VERDICT_SHED, 600 * S_NS);
	deny(BETA, FG_VERDICT_DELAY, 600 * S_NS);
	srand(seed);
	for (int it = 0; it < iterations; it++) {
		uint8_t in[2048], out[2048];
		const struct spec *sp = &seeds[(unsigned)rand() % (sizeof(seeds) / sizeof(seeds[0]))];
		size_t len = build(in, sp);
		int flips = rand() % 4;
		uint32_t out_len;

		for (int i = 0; i < flips; i++) {
			size_t at = (size_t)rand() % (len < 90 ? len : 90);
			in[at] = rand() % 3 ? (uint8_t)rand() : (uint8_t)(in[at] ^ (1u << (rand() % 8)));
		}
		if (rand() % 4 == 0)
			len = 14 + (size_t)rand() % (len - 13);
		int want = reference(in, len);
		int got = run(in, len, out, &out_len);
		if (got != want) {
			fprintf(stderr, "seed %u iteration %d: gate %d, reference %d, len %zu:", seed, it,
				got, want, len);
			for (size_t i = 0; i < len; i++)
				fprintf(stderr, " %02x", in[i]);
			fprintf(stderr, "\n");
			fail();
		}
		counts[got < 5 ? got : 0]++;
		if (got == XDP_TX) {
			/* Whatever the input, the answer is a well-formed RST+ACK. */
			size_t l3 = out_l3(out);
			int is6 = out[l3] >> 4 == 6;
			size_t rst_len = l3 + (is6 ? 40 : 20) + 20;
			expect_rst_frame(out, out_len, len, rst_len);
			assert_int_equal(out[rst_len - 7], RST | ACK);
			if (!is6)
				assert_int_equal(fold(sum_be(out + l3, 20, 0)), 0);
			assert_int_equal(tcp_csum(is6, out + l3 + (is6 ? 8 : 12),
						  out + l3 + (is6 ? 24 : 16), out + rst_len - 20, 20), 0);
		}
	}
	fprintf(stderr, "# fuzz seed %u: %d pass, %d drop, %d tx\n", seed, counts[XDP_PASS],
		counts[XDP_DROP], counts[XDP_TX]);
	assert_true(counts[XDP_TX] > 0 && counts[XDP_DROP] > 0 && counts[XDP_PASS] > 0);
}

/* ---- the source index ---- */

static bool index_valid(void)
{
	struct fg_src_index_stats st;

	fg_src_index_get_stats(&maps, &st);
	return st.valid;
}

static void set_index_valid(bool on)
{
	__atomic_store_n(&maps.node->idx[maps.node->idx_active & 1].valid, on ? 1u : 0u,
			 __ATOMIC_RELEASE);
}

/* Which tenant gate attributed this SYN to (every tenant is in a delay
 * window, so its syn_delayed moves), or -1 (node unattributed moves). */
static int attributed(const struct spec *sp, int n_tenants)
{
	struct fg_tenant_counters before[16], after;
	uint64_t unattr = node_counters().unattributed;
	int got = -2;

	for (int i = 0; i < n_tenants; i++)
		before[i] = counters((uint32_t)i);
	run_spec(sp);
	for (int i = 0; i < n_tenants; i++) {
		after = counters((uint32_t)i);
		if (after.syn_delayed != before[i].syn_delayed) {
			assert_int_equal(got, -2);
			got = i;
		}
	}
	if (node_counters().unattributed != unattr) {
		assert_int_equal(got, -2);
		got = -1;
	}
	assert_int_not_equal(got, -2);
	return got;
}

/* A random address in a small space — IPv4 in 10.0.0.0/14, IPv6 in
 * 2001:db8::/46 — so that prefixes of every length overlap; wide: half of
 * them outside it. */
static void random_addr(unsigned *seed, int v6, bool wide, char *buf, size_t len)
{
	int first = rand_r(seed) % (wide ? 8 : 4);

	if (v6)
		snprintf(buf, len, "2001:db8:%x:%x::%x", first, rand_r(seed) % 4, rand_r(seed) % 4);
	else
		snprintf(buf, len, "10.%d.%d.%d", first, rand_r(seed) % 4, rand_r(seed) % 8);
}

/* Ten tenants with CIDRs of many lengths over one small space (nested and
 * overlapping across tenants), learned sources among them (some shared,
 * one naming no tenant), and gate's answer with the index compared with
 * its answer from the maps for the same address, cache off. With
 * too_many_lengths the CIDRs use more prefix lengths than the index takes,
 * so its static part is left to the trie. */
static void index_vs_maps(unsigned seed, bool too_many_lengths)
{
	static const int v4_lens[] = { 14, 16, 24, 29, 32 }, v6_lens[] = { 46, 48, 64, 128 };
	char err[256], a[64];
	int n = 10, agree = 0, attributed_n = 0, answered = 0;

	fg_policy_defaults(pol);
	pol->n_tiers = 1;
	snprintf(pol->tiers[0].name, FG_NAME_MAX, "standard");
	pol->tiers[0].weight = 1;
	pol->n_tenants = (uint32_t)n;
	pol->agent.n_protected_ports = 1;
	pol->agent.protected_ports[0] = PORT;
	pol->agent.deny_allowance_per_s = 0;
	for (int t = 0; t < n; t++) {
		struct fg_tenant *pt = &pol->tenants[t];

		snprintf(pt->name, FG_NAME_MAX, "t%d", t);
		pt->id = (uint32_t)t;
		pt->units_per_s = 1000;
		for (int c = 0; c < 4; c++) {
			int v6 = c & 1, len;

			if (too_many_lengths)
				len = v6 ? 48 + (t * 4 + c) % 81 : 16 + (t * 4 + c) % 17;
			else
				len = v6 ? v6_lens[rand_r(&seed) % 4] : v4_lens[rand_r(&seed) % 5];
			random_addr(&seed, v6, false, a, sizeof(a));
			add_cidr(pt, v6 ? AF_INET6 : AF_INET, a, len);
		}
	}
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	for (int i = 0; i < 120; i++) {
		struct fg_src_key k;

		random_addr(&seed, i & 1, false, a, sizeof(a));
		fg_src_key_parse(a, &k);
		fg_maps_learn_source(&maps, &k, (uint32_t)(rand_r(&seed) % n), now_ns());
		if (i % 7 == 0) /* and seen with another tenant: shared */
			fg_maps_learn_source(&maps, &k, (uint32_t)(rand_r(&seed) % n), now_ns());
	}
	struct fg_src_learned bad = { .tenant_id = 5000 };
	struct fg_src_key bk;
	fg_src_key_parse("10.1.1.1", &bk);
	bpf_map_update_elem(maps.src_learned_fd, &bk, &bad, BPF_ANY);
	for (int t = 0; t < n; t++)
		deny((uint32_t)t, FG_VERDICT_DELAY, 60 * S_NS);
	__atomic_store_n(&maps.node->attr_gen, 0, __ATOMIC_RELEASE); /* no cache */
	assert_int_equal(fg_src_index_rebuild(&maps), 0);
	struct fg_src_index_stats st;
	fg_src_index_get_stats(&maps, &st);
	assert_int_equal(st.static_by_trie, too_many_lengths);
	assert_true(st.learned >= 60);

	for (int i = 0; i < 600; i++) {
		struct spec sp = { .v6 = i & 1, .dst = i & 1 ? "2001:db8::1" : "10.0.0.1" };
		int with, without;

		random_addr(&seed, sp.v6, true, a, sizeof(a));
		sp.src = a;
		assert_true(index_valid());
		struct fg_node_counters c0 = node_counters(), c1, c2;
		with = attributed(&sp, n);
		c1 = node_counters();
		set_index_valid(false);
		without = attributed(&sp, n);
		c2 = node_counters();
		set_index_valid(true);
		/* the index answered the first (past its prefix lengths, only
		 * for learned sources), the maps the second, and both counted
		 * a shared source alike */
		if (!too_many_lengths)
			assert_int_equal(c1.attr_without_index, c0.attr_without_index);
		answered += c1.attr_without_index == c0.attr_without_index;
		assert_int_equal(c2.attr_without_index, c1.attr_without_index + 1);
		assert_int_equal(c2.shared_source - c1.shared_source, c1.shared_source - c0.shared_source);
		if (with != without) {
			fprintf(stderr, "seed %u: %s: index says %d, maps %d\n", seed, a, with, without);
			fail();
		}
		agree++;
		attributed_n += with >= 0;
	}
	fprintf(stderr, "# %d addresses agree (%d attributed, %d answered by the index)\n", agree,
		attributed_n, answered);
	assert_true(attributed_n > 100 && attributed_n < agree);
	assert_true(answered > 30);
}

static void index_matches_maps(void **state)
{
	(void)state;
	unsigned seed = (unsigned)time(NULL);

	fprintf(stderr, "# seed %u\n", seed);
	index_vs_maps(seed, false);
}

static void index_past_its_prefix_lengths(void **state)
{
	(void)state;
	unsigned seed = (unsigned)time(NULL) ^ 0x5a5a;

	fprintf(stderr, "# seed %u\n", seed);
	index_vs_maps(seed, true);
}

/* Learning keeps the index valid and shows at once, sharing included. */
static void index_follows_learning(void **state)
{
	(void)state;
	struct spec sp = { .src = "198.51.100.5", .dst = "10.0.0.1" };
	struct fg_src_key k;

	__atomic_store_n(&maps.node->attr_gen, 0, __ATOMIC_RELEASE); /* no cache */
	assert_int_equal(fg_src_index_rebuild(&maps), 0);
	deny(BETA, FG_VERDICT_SHED, 60 * S_NS);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	fg_src_key_parse(sp.src, &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_true(index_valid());
	/* the map changed, the index learned it too: delete the map's entry
	 * behind kernel_maps.c's back, and the index still answers */
	assert_int_equal(run_spec(&sp), XDP_TX);
	struct fg_src_learned v;
	assert_int_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	assert_int_equal(bpf_map_delete_elem(maps.src_learned_fd, &k), 0);
	assert_int_equal(run_spec(&sp), XDP_TX);
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	/* shared with acme: no longer beta's; no CIDR covers it */
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	assert_true(index_valid());
	assert_int_equal(run_spec(&sp), XDP_PASS);
	assert_int_equal(node_counters().shared_source, 1);
	assert_int_equal(node_counters().unattributed, 2);
}

/* The index counts only while valid, unwritten and young: otherwise gate
 * asks the maps. Made to disagree with them (the map edited behind its
 * back), the answer shows which was asked. */
static void index_trusted_only_when_current(void **state)
{
	(void)state;
	struct spec sp = { .src = "198.51.100.6", .dst = "10.0.0.1" };
	struct fg_src_learned v = { .tenant_id = BETA };
	struct fg_src_key k;
	struct fg_src_index_head *hd;

	__atomic_store_n(&maps.node->attr_gen, 0, __ATOMIC_RELEASE);
	deny(BETA, FG_VERDICT_SHED, 60 * S_NS);
	assert_int_equal(fg_src_index_rebuild(&maps), 0);
	fg_src_key_parse(sp.src, &k);
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	hd = &maps.node->idx[maps.node->idx_active & 1];
	assert_int_equal(run_spec(&sp), XDP_PASS); /* the index: unattributed */
	hd->seq |= 1;                              /* being written */
	assert_int_equal(run_spec(&sp), XDP_TX);   /* the map: beta */
	hd->seq += 1;
	assert_int_equal(run_spec(&sp), XDP_PASS);
	uint64_t built = hd->built_ns;
	hd->built_ns = built - FG_IDX_MAX_AGE_NS - S_NS; /* its rebuilder died */
	assert_int_equal(run_spec(&sp), XDP_TX);
	hd->built_ns = built + FG_IDX_CLOCK_SLACK_NS + S_NS; /* written in the future: not trusted */
	assert_int_equal(run_spec(&sp), XDP_TX);
	hd->built_ns = built;
	set_index_valid(false);
	assert_int_equal(run_spec(&sp), XDP_TX);
	set_index_valid(true);
	assert_int_equal(run_spec(&sp), XDP_PASS);
	/* a rebuild reads the edit */
	assert_int_equal(fg_src_index_rebuild(&maps), 0);
	assert_int_equal(run_spec(&sp), XDP_TX);
	/* a bulk change through kernel_maps.c stops it until rebuilt */
	fg_maps_sources_changed(&maps);
	assert_false(index_valid());
}

/* Sources learned while the rebuilder reads the maps reach the half it
 * publishes: rebuilds forced over and over while learning, then every
 * source learned is attributed by the index. */
static void index_keeps_learns_made_during_a_rebuild(void **state)
{
	(void)state;
	char err[256], a[64];
	struct fg_src_index_stats st;
	struct fg_src_key k;
	int learned = 3000;

	/* a big map, so a rebuild's reads take a while */
	for (int i = 0; i < 30000; i++) {
		snprintf(a, sizeof(a), "2001:db8:99::%x:%x", i >> 16, i & 0xffff);
		fg_src_key_parse(a, &k);
		assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 0);
	}
	assert_int_equal(fg_src_index_start(&maps, err, sizeof(err)), 0);
	for (int i = 0; i < learned; i++) {
		if (i % 100 == 0) {
			/* the last rebuild published, then a new one asked for,
			 * and learning goes on while it reads the maps */
			for (int w = 0; w < 500 && !index_valid(); w++)
				usleep(10 * 1000);
			assert_true(index_valid());
			fg_src_index_invalidate(&maps);
		}
		snprintf(a, sizeof(a), "198.18.%d.%d", i >> 8, i & 0xff);
		fg_src_key_parse(a, &k);
		assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
		usleep(20);
	}
	for (int i = 0; i < 500 && !index_valid(); i++)
		usleep(10 * 1000);
	assert_true(index_valid());
	fg_src_index_get_stats(&maps, &st);
	fprintf(stderr, "# %llu rebuilds, %llu redone, %llu learns carried into a new half\n",
		st.rebuilds, st.discarded, st.learned_while_building);
	assert_true(st.learned_while_building > 0);
	fg_src_index_stop(&maps); /* no rebuild may move the half from here */
	assert_true(index_valid());

	__atomic_store_n(&maps.node->attr_gen, 0, __ATOMIC_RELEASE); /* no cache */
	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	uint64_t without = node_counters().attr_without_index;
	for (int i = 0; i < learned; i++) {
		snprintf(a, sizeof(a), "198.18.%d.%d", i >> 8, i & 0xff);
		struct spec sp = { .src = a, .dst = "10.0.0.1" };
		assert_int_equal(run_spec(&sp), XDP_DROP);
	}
	assert_int_equal(counters(BETA).syn_delayed, (uint64_t)learned);
	assert_int_equal(node_counters().attr_without_index, without);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(passes_without_a_window, reset),
		cmocka_unit_test_setup(delay_drops_the_syn, reset),
		cmocka_unit_test_setup(shed_answers_rst_ack, reset),
		cmocka_unit_test_setup(shed_trailing_bytes, reset),
		cmocka_unit_test_setup(shed_ipv6, reset),
		cmocka_unit_test_setup(shed_vlan_tagged, reset),
		cmocka_unit_test_setup(syn_ack_and_others_pass, reset),
		cmocka_unit_test_setup(unattributed_and_expired_pass, reset),
		cmocka_unit_test_setup(truncated_frames_never_judged, reset),
		cmocka_unit_test_setup(malformed_headers_pass, reset),
		cmocka_unit_test_setup(options_shed_by_rst, reset),
		cmocka_unit_test_setup(learned_and_shared_sources, reset),
		cmocka_unit_test_setup(allowance_then_shed, reset),
		cmocka_unit_test_setup(rst_budget_drops_past_it, reset),
		cmocka_unit_test_setup(overload_sheds_low_tiers, reset),
		cmocka_unit_test_setup(policy_reload_keeps_state_by_name, reset),
		cmocka_unit_test_setup(cache_follows_learning, reset),
		cmocka_unit_test_setup(cache_follows_policy_reload, reset),
		cmocka_unit_test_setup(cache_expires_edits_behind_its_back, reset),
		cmocka_unit_test_setup(cache_keeps_bad_ids_unattributed, reset),
		cmocka_unit_test_setup(colliding_sources, reset),
		cmocka_unit_test_setup(learned_full_forgets_the_oldest, reset),
		cmocka_unit_test_setup(fuzz_matches_reference, reset),
		cmocka_unit_test_setup(index_matches_maps, reset),
		cmocka_unit_test_setup(index_past_its_prefix_lengths, reset),
		cmocka_unit_test_setup(index_follows_learning, reset),
		cmocka_unit_test_setup(index_trusted_only_when_current, reset),
		cmocka_unit_test_setup(index_keeps_learns_made_during_a_rebuild, reset),
	};
	/* The index tests switch it by hand: not with its rebuilder running. */
	const size_t n_table = sizeof(tests) / sizeof(tests[0]) - 5;

	if (geteuid() != 0) {
		printf("1..1\nok 1 - test_gate # SKIP needs root for BPF_PROG_TEST_RUN\n");
		return 0;
	}
	int failed = _cmocka_run_group_tests("gate", tests, sizeof(tests) / sizeof(tests[0]), setup,
					     teardown);
	return failed + _cmocka_run_group_tests("gate, source index on", tests, n_table,
						setup_with_index, teardown);
}
