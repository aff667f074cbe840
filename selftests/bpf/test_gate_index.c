/* test_gate_index.c — fairgated's source index as gate reads it: answers
 * equal to the maps' for random addresses over nested and overlapping
 * CIDRs, learned, shared and hand-edited sources (also past the prefix
 * lengths it indexes), each answered by the path meant to; learning keeps
 * it valid and shows at once; it is trusted only while valid, unwritten
 * and young; and sources learned during rebuilds reach the published
 * half. These switch the index by hand, so they run once, not a second
 * time with its rebuilder on. Fixture: gate_fixture.h. */
#include "selftests/bpf/gate_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

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

	fg_policy_release(pol);
	fg_policy_defaults(pol);
	pol->n_tiers = 1;
	snprintf(pol->tiers[0].name, FG_NAME_MAX, "standard");
	pol->tiers[0].weight = 1;
	assert_int_equal(fg_policy_alloc_tenants(pol, (uint32_t)n), 0);
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
	ASSERT_EQ(st.static_by_trie, too_many_lengths);
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
			ASSERT_EQ(c1.attr_without_index, c0.attr_without_index);
		answered += c1.attr_without_index == c0.attr_without_index;
		ASSERT_EQ(c2.attr_without_index, c1.attr_without_index + 1);
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
	ASSERT_VERDICT(&sp, XDP_PASS);
	fg_src_key_parse(sp.src, &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_true(index_valid());
	/* the map changed, the index learned it too: delete the map's entry
	 * behind kernel_maps.c's back, and the index still answers */
	ASSERT_VERDICT(&sp, XDP_TX);
	struct fg_src_learned v;
	assert_int_equal(bpf_map_lookup_elem(maps.src_learned_fd, &k, &v), 0);
	assert_int_equal(bpf_map_delete_elem(maps.src_learned_fd, &k), 0);
	ASSERT_VERDICT(&sp, XDP_TX);
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	/* shared with acme: no longer beta's; no CIDR covers it */
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	assert_true(index_valid());
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(node_counters().shared_source, 1);
	ASSERT_EQ(node_counters().unattributed, 2);
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
	ASSERT_VERDICT(&sp, XDP_PASS);
	uint64_t built = hd->built_ns;
	hd->built_ns = built - FG_IDX_MAX_AGE_NS - S_NS; /* its rebuilder died */
	ASSERT_VERDICT(&sp, XDP_TX);
	hd->built_ns = built + FG_IDX_CLOCK_SLACK_NS + S_NS; /* written in the future: not trusted */
	ASSERT_VERDICT(&sp, XDP_TX);
	hd->built_ns = built;
	set_index_valid(false);
	ASSERT_VERDICT(&sp, XDP_TX);
	set_index_valid(true);
	ASSERT_VERDICT(&sp, XDP_PASS);
	/* a rebuild reads the edit */
	assert_int_equal(fg_src_index_rebuild(&maps), 0);
	ASSERT_VERDICT(&sp, XDP_TX);
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
		ASSERT_VERDICT(&sp, XDP_DROP);
	}
	ASSERT_EQ(counters(BETA).syn_delayed, (uint64_t)learned);
	ASSERT_EQ(node_counters().attr_without_index, without);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(index_matches_maps, gate_reset),
		cmocka_unit_test_setup(index_past_its_prefix_lengths, gate_reset),
		cmocka_unit_test_setup(index_follows_learning, gate_reset),
		cmocka_unit_test_setup(index_trusted_only_when_current, gate_reset),
		cmocka_unit_test_setup(index_keeps_learns_made_during_a_rebuild, gate_reset),
	};

	return gate_fixture_main("gate index", tests, sizeof(tests) / sizeof(tests[0]), false);
}
