/* test_gate_verdicts.c — gate's verdicts through BPF_PROG_TEST_RUN on
 * hand-built frames: pass, delay (and its sampled shed event), SYN-ACK and
 * other flags, other ports, non-TCP, unattributed sources and ended
 * windows, every truncation of four frame shapes, fragments and bad header
 * lengths, learned and shared sources, the allowance, overload by tier, a
 * policy reload that moves tenants by name, one between two policies that
 * each fill the source trie, and a differential fuzz
 * against a reference judge written here in plain C. Fixture:
 * gate_fixture.h. */
#include "selftests/bpf/gate_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static void passes_without_a_window(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 1000 };

	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_passed, 1);
	ASSERT_EQ(counters(ACME).syn_shed, 0);
	ASSERT_EQ(node_counters().syn_judged, 1);
	/* The same tenant on its second protected port. */
	sp.dport = 8443;
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_passed, 2);
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
	ASSERT_VERDICT(&sp, XDP_DROP);
	ASSERT_EQ(counters(ACME).syn_delayed, 1);
	ASSERT_EQ(counters(ACME).syn_passed, 0);
	/* Sampled: the first one of a tenant is always reported. */
	assert_true(ring_buffer__consume(rb) >= 1);
	ASSERT_EQ(ev.tenant_id, ACME);
	ASSERT_EQ(ev.reason, FG_SHED_DELAY);
	ASSERT_EQ(ev.dport, PORT);
	ASSERT_EQ(ev.sport, 40000);
	ring_buffer__free(rb);
	/* The other tenant is untouched. */
	sp.src = "10.2.0.9";
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(counters(BETA).syn_passed, 1);
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
		ASSERT_VERDICT(&sp, XDP_PASS);
	}
	/* Unprotected port. */
	struct spec other = { .src = "10.1.2.3", .dst = "10.0.0.1", .dport = 22 };
	ASSERT_VERDICT(&other, XDP_PASS);
	other.dport = 8001;
	ASSERT_VERDICT(&other, XDP_PASS);
	/* UDP and ICMP to the protected port number. */
	struct spec udp = { .src = "10.1.2.3", .dst = "10.0.0.1", .proto = 17 };
	ASSERT_VERDICT(&udp, XDP_PASS);
	struct spec icmp6 = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .proto = 58 };
	ASSERT_VERDICT(&icmp6, XDP_PASS);
	/* ARP. */
	uint8_t arp[60] = { 0 };
	l2(arp, mac_node, mac_client, 0, 0x0806);
	ASSERT_XDP(run(arp, sizeof(arp), NULL, NULL), XDP_PASS);
	struct fg_tenant_counters c = counters(ACME);
	assert_int_equal(c.syn_shed + c.syn_delayed + c.syn_passed, 0);
	ASSERT_EQ(node_counters().syn_judged, 0);
}

static void unattributed_and_expired_pass(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	struct spec stranger = { .src = "192.0.2.1", .dst = "10.0.0.1" };
	ASSERT_VERDICT(&stranger, XDP_PASS);
	ASSERT_EQ(node_counters().unattributed, 1);
	/* A window that ended is no window (gate reads the coarse clock,
	 * up to a tick behind: "ended" here is a second ago). */
	assert_int_equal(fg_maps_set_deny(&maps, ACME, now_ns() - S_NS, FG_VERDICT_SHED, 1), 0);
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	ASSERT_VERDICT(&sp, XDP_PASS);
	/* allow clears it. */
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	ASSERT_VERDICT(&sp, XDP_TX);
	fg_maps_set_deny(&maps, ACME, 0, FG_VERDICT_ALLOW, 0);
	ASSERT_VERDICT(&sp, XDP_PASS);
	/* A window past the policy's tenants (inactive slot) never judges. */
	fg_maps_set_deny(&maps, 5, now_ns() + 60 * S_NS, FG_VERDICT_SHED, 1);
	struct fg_src_key k;
	fg_src_key_parse("192.0.2.5", &k);
	assert_true(fg_maps_learn_source(&maps, &k, 5, now_ns()) >= 0);
	struct spec ghost = { .src = "192.0.2.5", .dst = "10.0.0.1" };
	ASSERT_VERDICT(&ghost, XDP_PASS);
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
			ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
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
		ASSERT_VERDICT(&sp, XDP_PASS);
	}
	sp.frag = 0;
	/* ihl < 5, version 5, doff < 5, doff beyond the datagram, tot_len short. */
	len = build(in, &sp);
	in[14] = 0x44;
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	in[14] = 0x55;
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	in[14 + 20 + 12] = 0x40;
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	in[14 + 20 + 12] = 0xf0;
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	put16(in + 16, 30); /* tot_len < ihl + tcp */
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	len = build(in, &sp);
	put16(in + 16, 10); /* tot_len < ihl */
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	/* IPv6 fragment header, and five extension headers. */
	struct spec v6 = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .v6_ext = 1 };
	len = build(in, &v6);
	in[14 + 6] = 44;
	ASSERT_XDP(run(in, len, NULL, NULL), XDP_PASS);
	v6.v6_ext = 5;
	ASSERT_VERDICT(&v6, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_shed, 0);
	assert_true(node_counters().not_judged >= 10);
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
	ASSERT_VERDICT(&in_acme_cidr, XDP_TX);
	ASSERT_EQ(counters(BETA).syn_shed, 1);
	/* Seen with acme too: shared, so the static CIDR (acme) decides. */
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	ASSERT_VERDICT(&in_acme_cidr, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_passed, 1);
	/* An address with no CIDR: learned for beta → shed; shared → pass. */
	fg_src_key_parse("192.0.2.10", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0); /* same tenant again */
	ASSERT_VERDICT(&nat, XDP_TX);
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	ASSERT_VERDICT(&nat, XDP_PASS);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 1); /* stays shared */
	ASSERT_VERDICT(&nat, XDP_PASS);
	struct fg_node_counters nc = node_counters();
	ASSERT_EQ(nc.shared_source, 3);
	ASSERT_EQ(nc.unattributed, 2);
	/* IPv6 learned. */
	struct spec v6 = { .v6 = 1, .src = "2001:db8:99::5", .dst = "2001:db8::1" };
	ASSERT_VERDICT(&v6, XDP_PASS);
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
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_VERDICT(&sp, XDP_TX);
	ASSERT_VERDICT(&sp, XDP_TX);
	struct fg_tenant_counters c = counters(ACME);
	ASSERT_EQ(c.allowance_used, 2);
	ASSERT_EQ(c.syn_passed, 2);
	ASSERT_EQ(c.syn_shed, 2);
	/* Another tenant's allowance is its own. */
	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };
	ASSERT_VERDICT(&beta, XDP_PASS);
	ASSERT_VERDICT(&beta, XDP_PASS);
	ASSERT_VERDICT(&beta, XDP_DROP);
	/* Half a second later one more token has come back. */
	usleep(550 * 1000);
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_VERDICT(&sp, XDP_TX);
	ASSERT_EQ(counters(ACME).allowance_used, 3);
	/* The allowance is only for deny windows: outside one nothing is used. */
	fg_maps_set_deny(&maps, ACME, 0, 0, 0);
	for (int i = 0; i < 5; i++)
		ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(counters(ACME).allowance_used, 3);
}

static void overload_sheds_low_tiers(void **state)
{
	(void)state;
	struct spec acme = { .src = "10.1.2.3", .dst = "10.0.0.1" };   /* premium, rank 1 */
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };   /* standard, rank 0 */

	ASSERT_EQ(maps.tenants[ACME].tier_rank, 1);
	ASSERT_EQ(maps.tenants[BETA].tier_rank, 0);
	assert_string_equal(maps.tenants[ACME].tier, "premium");
	fg_maps_set_overload_rank(&maps, 0, UINT64_MAX);
	ASSERT_VERDICT(&beta, XDP_TX);
	ASSERT_VERDICT(&acme, XDP_PASS);
	fg_maps_set_overload_rank(&maps, 1, UINT64_MAX);
	ASSERT_VERDICT(&beta, XDP_TX);
	ASSERT_VERDICT(&acme, XDP_TX);
	fg_maps_set_overload_rank(&maps, -1, 0);
	ASSERT_VERDICT(&beta, XDP_PASS);
	ASSERT_VERDICT(&acme, XDP_PASS);
	ASSERT_EQ(counters(BETA).overload_shed, 2);
	ASSERT_EQ(counters(BETA).syn_shed, 2);
	ASSERT_EQ(counters(ACME).overload_shed, 1);
	/* A delay window wins over overload's shed for that tenant. */
	fg_maps_set_overload_rank(&maps, 1, UINT64_MAX);
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	ASSERT_VERDICT(&acme, XDP_DROP);
}

/* An overload nobody renews lapses on its own: the agent that set it died
 * (its last renewal held FG_OVERLOAD_LEASE_NS), and gate sheds no more. */
static void an_unrenewed_overload_lapses(void **state)
{
	(void)state;
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };   /* standard, rank 0 */

	fg_maps_set_overload_rank(&maps, 0, now_ns() + 60 * S_NS);
	ASSERT_VERDICT(&beta, XDP_TX);
	fg_maps_set_overload_rank(&maps, 0, now_ns() - S_NS); /* its last renewal, a lease ago */
	ASSERT_VERDICT(&beta, XDP_PASS);
	ASSERT_EQ(counters(BETA).overload_shed, 1);
	ASSERT_EQ(maps.node->overload_below, 1); /* the rank is still there: only its end passed */
	/* and the renewal the agent makes brings it back at once */
	fg_maps_set_overload_rank(&maps, 0, now_ns() + FG_OVERLOAD_LEASE_NS);
	ASSERT_VERDICT(&beta, XDP_TX);
	fg_maps_set_overload_rank(&maps, -1, 0);
	ASSERT_EQ(maps.node->overload_until_ns, 0);
}

static void policy_reload_keeps_state_by_name(void **state)
{
	(void)state;
	char err[256];
	struct spec acme = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	struct fg_src_key k;

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	ASSERT_VERDICT(&acme, XDP_TX);
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
	ASSERT_EQ(maps.tenants[2].verdict, FG_VERDICT_SHED);
	ASSERT_EQ(maps.tenants[0].deny_until_ns, 0);
	ASSERT_EQ(counters(2).syn_shed, 1);
	ASSERT_EQ(counters(0).syn_shed, 0);
	struct fg_src_learned v;
	assert_int_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	ASSERT_EQ(v.tenant_id, 1);
	/* The CIDR now points at acme's new id. */
	ASSERT_VERDICT(&acme, XDP_TX);
	ASSERT_EQ(counters(2).syn_shed, 2);
	/* Dropping beta from the policy forgets what was learned for it. */
	p->tenants[1] = p->tenants[2];
	p->tenants[1].id = 1;
	p->n_tenants = 2;
	assert_int_equal(fg_maps_apply_policy(&maps, p, err, sizeof(err)), 0);
	assert_int_not_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	assert_int_equal(fg_maps_tenant_id(&maps, "beta"), -1);
	ASSERT_EQ(counters(1).syn_shed, 2);
	fg_policy_free(p);
}

/* As many tenants as the maps hold, the last FG_SOURCE_TENANTS of them
 * with all their CIDRs, none shared with generation gen's others:
 * 10.(100 + gen).X.Y/32, together the whole source trie. The highest ids
 * carry the sources, so the top of the id range is what gets judged. */
#define FG_SOURCE_TENANTS (FG_MAP_MAX_STATIC / FG_MAX_SOURCES)
static void fill_sources(struct fg_policy *p, int gen)
{
	char addr[32];

	make_policy(p);
	assert_int_equal(fg_policy_alloc_tenants(p, FG_MAX_TENANTS), 0);
	p->n_tenants = FG_MAX_TENANTS;
	for (uint32_t t = 0; t < FG_MAX_TENANTS; t++) {
		struct fg_tenant *tn = &p->tenants[t];

		snprintf(tn->name, FG_NAME_MAX, "t%05u", t);
		tn->id = t;
		tn->units_per_s = 1000;
		tn->burst_s = 60;
		if (t < FG_MAX_TENANTS - FG_SOURCE_TENANTS)
			continue;
		for (uint32_t s = 0; s < FG_MAX_SOURCES; s++) {
			uint32_t k = (t - (FG_MAX_TENANTS - FG_SOURCE_TENANTS)) * FG_MAX_SOURCES + s;
			snprintf(addr, sizeof(addr), "10.%d.%u.%u", 100 + gen, k >> 8, k & 255);
			add_cidr(tn, AF_INET, addr, 32);
		}
	}
}

/* A reload from one policy that fills the source trie to another that
 * does, with no CIDR in common: old and new do not fit side by side, and
 * the reload still succeeds, leaving exactly the new policy's. */
static void reload_between_full_source_lists(void **state)
{
	(void)state;
	char err[256];
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_lpm_key key, next;
	uint32_t n = 0;

	assert_non_null(p);
	_Static_assert(FG_SOURCE_TENANTS * FG_MAX_SOURCES == FG_MAP_MAX_STATIC, "the trie, full");
	for (int gen = 1; gen <= 2; gen++) {
		fill_sources(p, gen);
		if (fg_maps_apply_policy(&maps, p, err, sizeof(err)))
			fail_msg("policy %d (%d CIDRs): %s", gen, FG_MAP_MAX_STATIC, err);
	}
	for (int more = !bpf_map_get_next_key(maps.src_tenant_fd, NULL, &key); more;
	     more = !bpf_map_get_next_key(maps.src_tenant_fd, &key, &next), key = next)
		n++;
	ASSERT_EQ(n, FG_MAP_MAX_STATIC);
	struct spec last = { .src = "10.102.63.255", .dst = "10.0.0.1" };
	struct spec gone = { .src = "10.101.63.255", .dst = "10.0.0.1" };
	deny(FG_MAX_TENANTS - 1, FG_VERDICT_SHED, 60 * S_NS);
	ASSERT_VERDICT(&last, XDP_TX);
	ASSERT_VERDICT(&gone, XDP_PASS);
	fg_policy_free(p);
}

/* ---- differential fuzz ---- */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(passes_without_a_window, gate_reset),
		cmocka_unit_test_setup(delay_drops_the_syn, gate_reset),
		cmocka_unit_test_setup(syn_ack_and_others_pass, gate_reset),
		cmocka_unit_test_setup(unattributed_and_expired_pass, gate_reset),
		cmocka_unit_test_setup(truncated_frames_never_judged, gate_reset),
		cmocka_unit_test_setup(malformed_headers_pass, gate_reset),
		cmocka_unit_test_setup(learned_and_shared_sources, gate_reset),
		cmocka_unit_test_setup(allowance_then_shed, gate_reset),
		cmocka_unit_test_setup(overload_sheds_low_tiers, gate_reset),
		cmocka_unit_test_setup(an_unrenewed_overload_lapses, gate_reset),
		cmocka_unit_test_setup(policy_reload_keeps_state_by_name, gate_reset),
		cmocka_unit_test_setup(reload_between_full_source_lists, gate_reset),
		cmocka_unit_test_setup(fuzz_matches_reference, gate_reset),
	};

	return gate_fixture_main("gate verdicts", tests, sizeof(tests) / sizeof(tests[0]), true);
}
