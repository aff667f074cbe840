/* test_sim_kv_pool.c — the simulator's KV block pool: allocation and
 * release, LRU eviction order of cached blocks, hash chains with
 * cache_salt, and the prefix-cache index against a reference model under
 * random operations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim/kv_pool.h"

static struct sim_block_hash hash_of(uint32_t k)
{
	struct sim_block_hash h;
	uint32_t toks[16];

	for (int i = 0; i < 16; i++)
		toks[i] = k * 31u + (uint32_t)i;
	sim_block_hash_compute(&h, NULL, toks, 16, NULL, 0);
	return h;
}

static void alloc_and_release_count_blocks(void **state)
{
	(void)state;
	struct sim_kv_pool p;
	uint32_t b[8];

	assert_int_equal(sim_kv_pool_init(&p, 8, 16), 0);
	assert_int_equal(sim_kv_pool_alloc(&p, 5, b), 0);
	assert_int_equal(sim_kv_pool_num_free(&p), 3);
	assert_int_equal(sim_kv_pool_alloc(&p, 4, b + 5), -1); /* all or nothing */
	assert_int_equal(sim_kv_pool_num_free(&p), 3);
	double usage = sim_kv_pool_usage(&p);
	assert_true(usage > 0.62 && usage < 0.63);
	sim_kv_pool_release(&p, b, 5);
	assert_int_equal(sim_kv_pool_num_free(&p), 8);
	sim_kv_pool_destroy(&p);
}

static void shared_block_survives_one_release(void **state)
{
	(void)state;
	struct sim_kv_pool p;
	uint32_t b;
	struct sim_block_hash h = hash_of(1);

	sim_kv_pool_init(&p, 4, 16);
	sim_kv_pool_alloc(&p, 1, &b);
	sim_kv_pool_cache_block(&p, b, &h);
	assert_int_equal(sim_kv_pool_lookup(&p, &h), b);
	sim_kv_pool_touch(&p, b); /* a second sequence shares it */
	sim_kv_pool_release(&p, &b, 1);
	assert_int_equal(sim_kv_pool_num_free(&p), 3);
	sim_kv_pool_release(&p, &b, 1);
	assert_int_equal(sim_kv_pool_num_free(&p), 4);
	/* freed but still cached: a hit can take it back */
	assert_int_equal(sim_kv_pool_lookup(&p, &h), b);
	sim_kv_pool_touch(&p, b);
	assert_int_equal(sim_kv_pool_num_free(&p), 3);
	sim_kv_pool_destroy(&p);
}

static void eviction_takes_least_recent_and_sequence_tails_first(void **state)
{
	(void)state;
	struct sim_kv_pool p;
	uint32_t a[2], b[2], fresh[2];
	struct sim_block_hash h[4] = { hash_of(10), hash_of(11), hash_of(20), hash_of(21) };

	sim_kv_pool_init(&p, 4, 16);
	sim_kv_pool_alloc(&p, 2, a);
	sim_kv_pool_alloc(&p, 2, b);
	for (int i = 0; i < 2; i++) {
		sim_kv_pool_cache_block(&p, a[i], &h[i]);
		sim_kv_pool_cache_block(&p, b[i], &h[2 + i]);
	}
	sim_kv_pool_release(&p, a, 2); /* a freed first: least recent */
	sim_kv_pool_release(&p, b, 2);
	assert_int_equal(p.num_cached, 4);
	sim_kv_pool_alloc(&p, 1, fresh);
	/* a's tail block goes first, its head (the shared prefix) survives */
	assert_int_equal(fresh[0], a[1]);
	assert_int_equal(sim_kv_pool_lookup(&p, &h[1]), SIM_NO_BLOCK);
	assert_int_equal(sim_kv_pool_lookup(&p, &h[0]), a[0]);
	sim_kv_pool_alloc(&p, 1, fresh + 1);
	assert_int_equal(fresh[1], a[0]);
	assert_int_equal(sim_kv_pool_lookup(&p, &h[2]), b[0]);
	assert_int_equal(p.evictions, 2);
	assert_int_equal(p.num_cached, 2);
	sim_kv_pool_destroy(&p);
}

static void salt_and_parent_change_the_hash(void **state)
{
	(void)state;
	uint32_t toks[16] = { 1, 2, 3 };
	struct sim_block_hash plain, plain2, salted, salted2, other, child_a, child_b;

	sim_block_hash_compute(&plain, NULL, toks, 16, NULL, 0);
	sim_block_hash_compute(&plain2, NULL, toks, 16, NULL, 0);
	sim_block_hash_compute(&salted, NULL, toks, 16, "acme", 4);
	sim_block_hash_compute(&salted2, NULL, toks, 16, "acme", 4);
	sim_block_hash_compute(&other, NULL, toks, 16, "globex", 6);
	assert_memory_equal(&plain, &plain2, sizeof(plain));
	assert_memory_equal(&salted, &salted2, sizeof(salted));
	assert_memory_not_equal(&plain, &salted, sizeof(plain));
	assert_memory_not_equal(&salted, &other, sizeof(salted));
	/* the salt only enters the first block; later blocks differ via the chain */
	sim_block_hash_compute(&child_a, &plain, toks, 16, "ignored", 7);
	sim_block_hash_compute(&child_b, &plain, toks, 16, NULL, 0);
	assert_memory_equal(&child_a, &child_b, sizeof(child_a));
	sim_block_hash_compute(&child_b, &salted, toks, 16, NULL, 0);
	assert_memory_not_equal(&child_a, &child_b, sizeof(child_a));
}

static void duplicate_hash_registers_once(void **state)
{
	(void)state;
	struct sim_kv_pool p;
	uint32_t b[2];
	struct sim_block_hash h = hash_of(5);

	sim_kv_pool_init(&p, 2, 16);
	sim_kv_pool_alloc(&p, 2, b);
	sim_kv_pool_cache_block(&p, b[0], &h);
	sim_kv_pool_cache_block(&p, b[1], &h);
	assert_int_equal(p.num_cached, 1);
	assert_int_equal(sim_kv_pool_lookup(&p, &h), b[0]);
	sim_kv_pool_destroy(&p);
}

/* Random churn; the index must always agree with a plain array. */
static void index_matches_reference_under_churn(void **state)
{
	(void)state;
	enum { N = 64, KEYS = 200 };
	struct sim_kv_pool p;
	int32_t ref_block_of[KEYS];   /* key -> block, -1 if not cached */
	int32_t ref_key_of[N];        /* block -> key, -1 */
	uint32_t held[N];
	uint32_t n_held = 0;
	uint64_t rng = 12345;

	sim_kv_pool_init(&p, N, 16);
	for (int i = 0; i < KEYS; i++)
		ref_block_of[i] = -1;
	for (int i = 0; i < N; i++)
		ref_key_of[i] = -1;
	for (int step = 0; step < 20000; step++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(rng >> 33);
		if (r % 2 == 0 && sim_kv_pool_num_free(&p) > 0) {
			uint32_t b;
			assert_int_equal(sim_kv_pool_alloc(&p, 1, &b), 0);
			if (ref_key_of[b] >= 0)
				ref_block_of[ref_key_of[b]] = -1; /* evicted */
			ref_key_of[b] = -1;
			uint32_t key = (r >> 8) % KEYS;
			if (ref_block_of[key] < 0) {
				struct sim_block_hash h = hash_of(key);
				sim_kv_pool_cache_block(&p, b, &h);
				ref_block_of[key] = (int32_t)b;
				ref_key_of[b] = (int32_t)key;
			}
			held[n_held++] = b;
		} else if (n_held) {
			uint32_t i = (r >> 8) % n_held;
			sim_kv_pool_release(&p, &held[i], 1);
			held[i] = held[--n_held];
		}
		uint32_t probe = (r >> 16) % KEYS;
		struct sim_block_hash h = hash_of(probe);
		uint32_t got = sim_kv_pool_lookup(&p, &h);
		assert_int_equal(got, ref_block_of[probe] < 0 ? SIM_NO_BLOCK
							       : (uint32_t)ref_block_of[probe]);
		assert_int_equal(sim_kv_pool_num_free(&p) + n_held, N);
	}
	sim_kv_pool_destroy(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(alloc_and_release_count_blocks),
		cmocka_unit_test(shared_block_survives_one_release),
		cmocka_unit_test(eviction_takes_least_recent_and_sequence_tails_first),
		cmocka_unit_test(salt_and_parent_change_the_hash),
		cmocka_unit_test(duplicate_hash_registers_once),
		cmocka_unit_test(index_matches_reference_under_churn),
	};
	return cmocka_run_group_tests_name("sim_kv_pool", tests, NULL, NULL);
}
