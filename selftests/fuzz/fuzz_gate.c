/* fuzz_gate.c — libFuzzer target: the XDP `gate` program, loaded into the
 * running kernel, judging arbitrary frames through BPF_PROG_TEST_RUN, each
 * verdict checked against a reference judge written here in plain C.
 *
 * The BPF code is not instrumented, so coverage comes from the reference:
 * libFuzzer steers towards frames that take new paths through the rules
 * the gate must follow, and every such frame is a differential test. The
 * scene (fixed at start): tenant acme (10.1.0.0/16, 2001:db8:1::/48) in a
 * shed window, beta (10.2.0.0/16, 2001:db8:2::/48) in a delay window, no
 * allowance, ports 8000 and 8443 protected, nothing learned. Invariants:
 * the verdict is the reference's; a shed answer (XDP_TX) is byte for byte
 * the RST+ACK built here from the input — MACs, VLAN tags, addresses and
 * ports swapped back, ACK = SEQ + payload + SYN + FIN, checksums valid —
 * followed by zeros up to the frame's length when the frame was at most
 * FG_RST_PAD_MAX bytes longer, by nothing otherwise.
 *
 * Needs root (BPF); the maps are the skeleton's own, never pinned, so a
 * running fairgated on this node is not touched. */
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "maps/kernel_maps.h"
#include "gate.skel.h"
#include "selftests/fuzz/fuzz_common.h"

#define MAX_FRAME 1600
#define ETH_HLEN 14
#define SYN 0x02
#define ACK 0x10
#define RST 0x04
#define FIN 0x01

enum { ACME = 0, BETA = 1 };

static struct gate_bpf *skel;
static struct fg_maps maps;
static int prog_fd;

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p) { return (uint32_t)be16(p) << 16 | be16(p + 2); }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += be16(p + i);
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

/* ---- the reference ---- */

/* What the reference learned from a frame it judges. */
struct syn {
	size_t l3, l4;          /* offsets of the IP and TCP headers */
	bool v6;
	uint8_t src[16];        /* IPv4 as ::ffff:a.b.c.d, like the maps */
	uint32_t seg_len;       /* payload + SYN + FIN */
};

/* A SYN (no ACK, no RST) to a protected port that parses with certainty;
 * false for anything the gate must let through unjudged. */
static bool parse(const uint8_t *f, size_t len, struct syn *s)
{
	size_t o = ETH_HLEN, l4_len;
	uint16_t type = be16(f + 12);

	memset(s, 0, sizeof(*s));
	for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8); tags++) {
		if (o + 4 > len)
			return false;
		type = be16(f + o + 2);
		o += 4;
	}
	s->l3 = o;
	if (type == 0x0800) {
		if (o + 20 > len || f[o + 9] != 6 || f[o] >> 4 != 4 || (f[o] & 15) < 5)
			return false;
		if (be16(f + o + 6) & 0x3fff) /* MF or an offset: a fragment */
			return false;
		size_t ihl = (size_t)(f[o] & 15) * 4, total = be16(f + o + 2);
		if (total < ihl || total > len - o)
			return false;
		s->src[10] = s->src[11] = 0xff;
		memcpy(s->src + 12, f + o + 12, 4);
		s->l4 = o + ihl;
		l4_len = total - ihl;
	} else if (type == 0x86dd) {
		if (o + 40 > len || f[o] >> 4 != 6)
			return false;
		size_t payload = be16(f + o + 4), at = o + 40;
		uint8_t next = f[o + 6];
		if (payload > len - o - 40)
			return false;
		/* hop-by-hop, routing, destination options: at most four */
		for (int n = 0; next == 0 || next == 43 || next == 60; n++) {
			if (n == 4 || at + 2 > len)
				return false;
			next = f[at];
			at += ((size_t)f[at + 1] + 1) * 8;
			if (at > 1024)
				return false;
		}
		if (next != 6 || payload < at - o - 40)
			return false;
		s->v6 = true;
		memcpy(s->src, f + o + 8, 16);
		s->l4 = at;
		l4_len = payload - (at - o - 40);
	} else {
		return false;
	}
	if (s->l4 + 20 > len)
		return false;
	const uint8_t *tcp = f + s->l4;
	size_t doff = (size_t)(tcp[12] >> 4) * 4;
	if (!(tcp[13] & SYN) || tcp[13] & (ACK | RST))
		return false;
	if (doff < 20 || l4_len < doff)
		return false;
	uint16_t dport = be16(tcp + 2);
	if (dport != 8000 && dport != 8443)
		return false;
	s->seg_len = (uint32_t)(l4_len - doff) + 1 + (tcp[13] & FIN ? 1 : 0);
	return true;
}

static int tenant_of(const uint8_t src[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!memcmp(src, v4mapped, 12) && src[12] == 10 && (src[13] == 1 || src[13] == 2))
		return src[13] == 1 ? ACME : BETA;
	if (be32(src) == 0x20010db8 && (be16(src + 4) == 1 || be16(src + 4) == 2))
		return be16(src + 4) == 1 ? ACME : BETA;
	return -1;
}

static int reference(const uint8_t *f, size_t len, struct syn *s)
{
	if (!parse(f, len, s))
		return XDP_PASS;
	switch (tenant_of(s->src)) {
	case ACME: /* shed: an RST, without any IP options / extension headers */
		return XDP_TX;
	case BETA: /* delay */
		return XDP_DROP;
	default:
		return XDP_PASS;
	}
}

/* The RST+ACK for a SYN the reference sheds, built from the input. */
static size_t expected_rst(const uint8_t *f, const struct syn *s, uint8_t *out)
{
	size_t l3 = s->l3, l4 = l3 + (s->v6 ? 40 : 20);
	const uint8_t *tcp_in = f + s->l4;

	memcpy(out, f + 6, 6);           /* back to the sender */
	memcpy(out + 6, f, 6);
	memcpy(out + 12, f + 12, l3 - 12); /* ethertype and VLAN tags as they came */
	uint8_t *ip = out + l3, *tcp = out + l4;
	uint32_t sum = 0;
	if (s->v6) {
		memset(ip, 0, 40);
		put32(ip, 0x60000000);
		put16(ip + 4, 20);
		ip[6] = 6;
		ip[7] = 64;
		memcpy(ip + 8, f + l3 + 24, 16);
		memcpy(ip + 24, f + l3 + 8, 16);
		sum = sum16(ip + 8, 32, 0);
	} else {
		memset(ip, 0, 20);
		ip[0] = 0x45;
		put16(ip + 2, 40);
		put16(ip + 6, 0x4000);
		ip[8] = 64;
		ip[9] = 6;
		memcpy(ip + 12, f + l3 + 16, 4);
		memcpy(ip + 16, f + l3 + 12, 4);
		put16(ip + 10, fold(sum16(ip, 20, 0)));
		sum = sum16(ip + 12, 8, 0);
	}
	memset(tcp, 0, 20);
	memcpy(tcp, tcp_in + 2, 2);
	memcpy(tcp + 2, tcp_in, 2);
	put32(tcp + 8, be32(tcp_in + 4) + s->seg_len);
	tcp[12] = 0x50;
	tcp[13] = RST | ACK;
	put16(tcp + 16, fold(sum16(tcp, 20, sum + 6 + 20)));
	return l4 + 20;
}

/* ---- the kernel side ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void add_cidr(struct fg_tenant *t, int family, const char *text, int prefix)
{
	struct fg_cidr *c = &t->sources[t->n_sources++];

	c->family = (uint8_t)family;
	c->prefixlen = (uint8_t)prefix;
	FUZZ_CHECK(inet_pton(family, text, c->addr) == 1, "bad CIDR %s", text);
}

static void scene(void)
{
	static struct fg_policy p;
	char err[256];

	fg_policy_release(&p);
	fg_policy_defaults(&p);
	p.n_tiers = 1;
	snprintf(p.tiers[0].name, FG_NAME_MAX, "standard");
	p.tiers[0].weight = 1;
	p.tiers[0].kv_cap_tokens = 131072;
	FUZZ_CHECK(!fg_policy_alloc_tenants(&p, 2), "out of memory");
	p.n_tenants = 2;
	const char *names[2] = { "acme", "beta" };
	for (uint32_t i = 0; i < 2; i++) {
		struct fg_tenant *t = &p.tenants[i];
		snprintf(t->name, FG_NAME_MAX, "%s", names[i]);
		t->id = i;
		t->units_per_s = 1000;
		t->burst_s = 60;
	}
	add_cidr(&p.tenants[ACME], AF_INET, "10.1.0.0", 16);
	add_cidr(&p.tenants[ACME], AF_INET6, "2001:db8:1::", 48);
	add_cidr(&p.tenants[BETA], AF_INET, "10.2.0.0", 16);
	add_cidr(&p.tenants[BETA], AF_INET6, "2001:db8:2::", 48);
	p.agent.n_protected_ports = 2;
	p.agent.protected_ports[0] = 8000;
	p.agent.protected_ports[1] = 8443;
	p.agent.deny_allowance_per_s = 0;
	p.agent.shed_rst_per_s = 0; /* the reference judge answers every shed SYN with an RST */
	FUZZ_CHECK(!fg_maps_apply_policy(&maps, &p, err, sizeof(err)), "apply policy: %s", err);
	fg_maps_set_overload_rank(&maps, -1, 0);
	/* a day: longer than any fuzzing run */
	FUZZ_CHECK(!fg_maps_set_deny(&maps, ACME, now_ns() + 86400000000000ull, FG_VERDICT_SHED,
				     FG_DENY_OPERATOR), "deny acme");
	FUZZ_CHECK(!fg_maps_set_deny(&maps, BETA, now_ns() + 86400000000000ull, FG_VERDICT_DELAY,
				     FG_DENY_OPERATOR), "deny beta");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct bpf_map *map;
	char err[256];

	(void)argc;
	(void)argv;
	if (geteuid() != 0) {
		fprintf(stderr, "fuzz_gate: needs root for BPF_PROG_TEST_RUN\n");
		exit(77);
	}
	skel = gate_bpf__open();
	FUZZ_CHECK(skel, "open gate skeleton");
	/* No pins: never touch the node's /sys/fs/bpf/fairgate. */
	bpf_object__for_each_map(map, skel->obj)
		bpf_map__set_pin_path(map, NULL);
	FUZZ_CHECK(!gate_bpf__load(skel), "load gate");
	prog_fd = bpf_program__fd(skel->progs.fg_gate);
	FUZZ_CHECK(!fg_maps_from_object(&maps, skel->obj, err, sizeof(err)), "maps: %s", err);
	scene();
	return 0;
}

static void hex(const char *what, const uint8_t *p, size_t n)
{
	fprintf(stderr, "%s (%zu):", what, n);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %02x", p[i]);
	fputc('\n', stderr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[4096], want[MAX_FRAME];
	struct syn s;

	if (size < ETH_HLEN || size > MAX_FRAME)
		return -1; /* XDP test runs need an Ethernet header; keep it a frame */
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = data, .data_size_in = (uint32_t)size,
		    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
	FUZZ_CHECK(!bpf_prog_test_run_opts(prog_fd, &o), "BPF_PROG_TEST_RUN failed (len %zu)", size);

	int expect = reference(data, size, &s);
	if ((int)o.retval != expect) {
		hex("frame", data, size);
		FUZZ_CHECK(0, "gate answered %u, reference %d", o.retval, expect);
	}
	if (expect == XDP_TX) {
		size_t n = expected_rst(data, &s, want);
		/* a few surplus bytes stay, zeroed; more are cut */
		size_t out_n = size > n && size - n <= FG_RST_PAD_MAX ? size : n;
		bool padding_zero = true;

		for (size_t i = n; i < out_n && i < o.data_size_out; i++)
			padding_zero &= !out[i];
		if (o.data_size_out != out_n || memcmp(out, want, n) || !padding_zero) {
			hex("frame", data, size);
			hex("gate's RST", out, o.data_size_out);
			hex("expected RST", want, n);
			FUZZ_CHECK(0, "RST differs from the one the SYN calls for");
		}
	} else {
		FUZZ_CHECK(o.data_size_out == size && !memcmp(out, data, size),
			   "a frame not shed was modified");
	}
	return 0;
}
