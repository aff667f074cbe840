/* gate_fixture.c — the gate test programs' shared fixture (see
 * gate_fixture.h): load, maps, frames, BPF_PROG_TEST_RUN, checks. */
#include "selftests/bpf/gate_fixture.h"
#include "selftests/common/percpu_zero.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gate.skel.h"

struct fg_maps maps;
struct fg_policy *pol;
bool index_on;
static struct gate_bpf *skel;
static int prog_fd;

const uint8_t mac_node[6] = { 0x02, 0, 0, 0, 0, 0x01 };
const uint8_t mac_client[6] = { 0x02, 0, 0, 0, 0, 0x02 };

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * S_NS + (uint64_t)ts.tv_nsec;
}

/* ---- frames ---- */

uint32_t sum_be(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint16_t tcp_csum(int v6, const uint8_t *src, const uint8_t *dst, const uint8_t *tcp, size_t len)
{
	uint32_t sum = 0;

	sum = sum_be(src, v6 ? 16 : 4, sum);
	sum = sum_be(dst, v6 ? 16 : 4, sum);
	sum += 6 + (uint32_t)len;
	return fold(sum_be(tcp, len, sum));
}

size_t l2(uint8_t *b, const uint8_t *dst, const uint8_t *src, int vlans, uint16_t type)
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

size_t build(uint8_t *b, const struct spec *sp)
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

size_t expected_rst(uint8_t *b, const struct spec *sp)
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

int run(const uint8_t *in, size_t len, uint8_t *out, uint32_t *out_len)
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

int run_spec(const struct spec *sp)
{
	uint8_t in[2048];

	return run(in, build(in, sp), NULL, NULL);
}

struct fg_tenant_counters counters(uint32_t id)
{
	struct fg_tenant_counters c;

	assert_int_equal(fg_maps_tenant_counters(&maps, id, &c), 0);
	return c;
}

struct fg_node_counters node_counters(void)
{
	struct fg_node_counters c;

	assert_int_equal(fg_maps_node_counters(&maps, &c), 0);
	return c;
}

void add_cidr(struct fg_tenant *t, int fam, const char *addr, int len)
{
	struct fg_cidr *c = &t->sources[t->n_sources++];

	c->family = (uint8_t)fam;
	c->prefixlen = (uint8_t)len;
	inet_pton(fam, addr, c->addr);
}

void make_policy(struct fg_policy *p)
{
	fg_policy_release(p);
	fg_policy_defaults(p);
	if (fg_policy_alloc_tenants(p, 3)) /* room for a test's third */
		abort();
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

void deny(uint32_t id, int verdict, uint64_t for_ns)
{
	assert_int_equal(fg_maps_set_deny(&maps, id, now_ns() + for_ns, verdict, FG_DENY_OPERATOR), 0);
}

void expect_rst_frame(const uint8_t *out, uint32_t out_len, size_t in_len, size_t want_len)
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

void expect_rst(const struct spec *sp)
{
	uint8_t in[2048], out[2048], want[2048];
	size_t len = build(in, sp), want_len = expected_rst(want, sp);
	uint32_t out_len = 0;

	ASSERT_XDP(run(in, len, out, &out_len), XDP_TX);
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
int gate_reset(void **state)
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
	fg_maps_set_overload_rank(&maps, -1, 0);
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
	fg_policy_free(pol);
	return 0;
}

/* ---- checks ---- */

const char *xdp_name(int verdict)
{
	static const char *const names[] = { "XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX",
					     "XDP_REDIRECT" };

	return verdict >= 0 && verdict < 5 ? names[verdict] : "(not an XDP action)";
}

void gate_assert_eq(long long got, long long want, const char *what, const char *file, int line)
{
	if (got == want)
		return;
	print_error("# %s:%d: error: %s is %lld, want %lld\n", file, line, what, got, want);
	_fail(file, line);
}

void gate_assert_xdp(int got, int want, const char *what, const char *file, int line)
{
	if (got == want)
		return;
	print_error("# %s:%d: error: %s is %s, want %s\n", file, line, what, xdp_name(got),
		    xdp_name(want));
	_fail(file, line);
}

void gate_assert_verdict(const struct spec *sp, int want, const char *file, int line)
{
	int got = run_spec(sp);

	if (got == want)
		return;
	print_error("# %s:%d: error: gate says %s, want %s: IPv%d %s:%u -> %s:%u flags 0x%02x "
		    "seq %u, %d option bytes, %d payload, %d VLAN tags, %d IP option bytes, %d "
		    "extension headers, protocol %u, frag_off 0x%04x\n",
		    file, line, xdp_name(got), xdp_name(want), sp->v6 ? 6 : 4, sp->src,
		    sp->sport ? sp->sport : 40000, sp->dst, sp->dport ? sp->dport : PORT,
		    sp->flags ? sp->flags : SYN, sp->seq, sp->tcp_opt, sp->payload, sp->vlans,
		    sp->ip_opt, sp->v6_ext, sp->proto ? sp->proto : 6, sp->frag);
	_fail(file, line);
}

/* ---- the program ---- */

int gate_fixture_main(const char *name, const struct CMUnitTest *tests, size_t n,
		      bool again_with_index)
{
	char with_index[128];
	int failed;

	if (geteuid() != 0) {
		printf("1..1\nok 1 - %s # SKIP needs root for BPF_PROG_TEST_RUN\n", name);
		return 0;
	}
	failed = _cmocka_run_group_tests(name, tests, n, setup, teardown);
	if (again_with_index) {
		snprintf(with_index, sizeof(with_index), "%s, source index on", name);
		failed += _cmocka_run_group_tests(with_index, tests, n, setup_with_index, teardown);
	}
	return failed;
}
