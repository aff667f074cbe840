/* test_gate_cache.c — gate's attribution cache: it follows learning,
 * sharing, deletion and policy reloads on the very next SYN, lets an edit
 * behind fairgated's back show within its lifetime, keeps ids that name no
 * tenant unattributed, never lends one source's answer to another hashed
 * to the same slot, and drops the answers of the oldest eighth a full
 * src_learned forgets. Fixture: gate_fixture.h. */
#include "selftests/bpf/gate_fixture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

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
	ASSERT_EQ(counters(ACME).syn_passed, 3);
	fg_src_key_parse("10.1.7.7", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	assert_int_equal(run_spec(&sp), XDP_TX); /* learned beta wins */
	ASSERT_VERDICT(&sp, XDP_TX);
	ASSERT_EQ(counters(BETA).syn_shed, 2);
	/* Refreshing the same answer keeps it. */
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	ASSERT_VERDICT(&sp, XDP_TX);
	/* Shared: back to the CIDR, and every SYN counts as a shared source,
	 * answered from the cache or not. */
	assert_int_equal(fg_maps_learn_source(&maps, &k, ACME, now_ns()), 1);
	for (int i = 0; i < 4; i++)
		ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_passed, 7);
	ASSERT_EQ(node_counters().shared_source, 4);
	/* Unattributed answers are cached and counted per SYN too. */
	struct spec stranger = { .src = "198.51.100.9", .dst = "10.0.0.1" };
	for (int i = 0; i < 3; i++)
		ASSERT_VERDICT(&stranger, XDP_PASS);
	ASSERT_EQ(node_counters().unattributed, 3);
	fg_src_key_parse("198.51.100.9", &k);
	assert_int_equal(fg_maps_learn_source(&maps, &k, BETA, now_ns()), 0);
	ASSERT_VERDICT(&stranger, XDP_TX);
	/* Deleted behind kernel_maps.c's back, then announced: forgotten. */
	assert_int_equal(bpf_map_delete_elem(maps.src_learned_fd, &k), 0);
	fg_maps_sources_changed(&maps);
	ASSERT_VERDICT(&stranger, XDP_PASS);
	ASSERT_EQ(node_counters().unattributed, 4);
}

static void cache_follows_policy_reload(void **state)
{
	(void)state;
	char err[256];
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	struct spec v6 = { .v6 = 1, .src = "2001:db8:1::77", .dst = "2001:db8::1" };

	deny(BETA, FG_VERDICT_DELAY, 60 * S_NS);
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_VERDICT(&v6, XDP_PASS);
	/* The same tenants, but acme's CIDRs now belong to beta. */
	make_policy(pol);
	struct fg_cidr a4 = pol->tenants[ACME].sources[0], a6 = pol->tenants[ACME].sources[1];
	pol->tenants[ACME].n_sources = 0;
	pol->tenants[BETA].sources[pol->tenants[BETA].n_sources++] = a4;
	pol->tenants[BETA].sources[pol->tenants[BETA].n_sources++] = a6;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	ASSERT_VERDICT(&sp, XDP_DROP);
	ASSERT_VERDICT(&v6, XDP_DROP);
	/* And gone altogether: unattributed. */
	pol->tenants[BETA].n_sources -= 2;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(counters(BETA).syn_delayed, 2);
	ASSERT_EQ(node_counters().unattributed, 1);
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
		ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(node_counters().unattributed, 3);
	v.tenant_id = 0xffffffff;
	assert_int_equal(bpf_map_update_elem(maps.src_learned_fd, &k, &v, BPF_ANY), 0);
	fg_maps_sources_changed(&maps);
	for (int i = 0; i < 3; i++)
		ASSERT_VERDICT(&sp, XDP_PASS);
	ASSERT_EQ(node_counters().unattributed, 6);
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
		ASSERT_VERDICT(&sa, XDP_PASS);
		ASSERT_VERDICT(&sa, XDP_PASS);
		ASSERT_VERDICT(&sb, XDP_DROP);
	}
	ASSERT_EQ(counters(ACME).syn_passed, 12);
	ASSERT_EQ(counters(BETA).syn_delayed, 6);
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
	ASSERT_VERDICT(&old_src, XDP_PASS);
	ASSERT_EQ(counters(BETA).syn_delayed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(cache_follows_learning, gate_reset),
		cmocka_unit_test_setup(cache_follows_policy_reload, gate_reset),
		cmocka_unit_test_setup(cache_expires_edits_behind_its_back, gate_reset),
		cmocka_unit_test_setup(cache_keeps_bad_ids_unattributed, gate_reset),
		cmocka_unit_test_setup(colliding_sources, gate_reset),
		cmocka_unit_test_setup(learned_full_forgets_the_oldest, gate_reset),
	};

	return gate_fixture_main("gate cache", tests, sizeof(tests) / sizeof(tests[0]), true);
}
