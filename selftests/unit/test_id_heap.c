/* test_id_heap.c — lib/id_heap: the indexed min-heap against a linear scan
 * over the same keys, on many random inserts, removals, key changes and
 * pops (ties included: keys are drawn from a small range). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "lib/id_heap.h"
#include "selftests/unit/xorshift.h"

#define IDS 300

struct keyed {
	uint64_t key[IDS];
	bool in[IDS];             /* the reference's membership */
	uint32_t heap[IDS], pos[IDS], n;
};

static bool key_less(uint32_t a, uint32_t b, const void *ctx)
{
	const struct keyed *k = ctx;
	return k->key[a] < k->key[b] || (k->key[a] == k->key[b] && a < b);
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t draw(uint32_t n)
{
	return (uint32_t)(fg_xorshift64(&rng_state) % n);
}

/* The least member by the same order, by scanning: -1 if none. */
static int linear_min(const struct keyed *k)
{
	int best = -1;
	for (uint32_t i = 0; i < IDS; i++)
		if (k->in[i] && (best < 0 || key_less(i, (uint32_t)best, k)))
			best = (int)i;
	return best;
}

static void check_invariants(const struct keyed *k)
{
	uint32_t members = 0;
	for (uint32_t i = 0; i < IDS; i++) {
		members += k->in[i];
		assert_int_equal(k->pos[i] != 0, k->in[i]);
		if (k->pos[i])
			assert_int_equal(k->heap[k->pos[i] - 1], i);
	}
	assert_int_equal(members, k->n);
	for (uint32_t i = 1; i < k->n; i++)
		assert_false(key_less(k->heap[i], k->heap[(i - 1) / 2], k));
}

static void matches_linear_scan(void **state)
{
	(void)state;
	struct keyed *k = test_calloc(1, sizeof(*k));
	struct fg_idheap h = { k->heap, k->pos, &k->n, key_less, k };

	for (int op = 0; op < 200000; op++) {
		uint32_t id = draw(IDS);
		switch (draw(5)) {
		case 0: /* insert (or fix, when present) */
			k->key[id] = draw(64);
			fg_idheap_insert(&h, id);
			k->in[id] = true;
			break;
		case 1:
			fg_idheap_remove(&h, id);
			k->in[id] = false;
			break;
		case 2: /* a key moves either way, present or not */
			k->key[id] = draw(64);
			fg_idheap_fix(&h, id);
			break;
		case 3: {
			int want = linear_min(k);
			if (want < 0) {
				assert_true(fg_idheap_empty(&h));
			} else {
				assert_int_equal(fg_idheap_top(&h), want);
				assert_int_equal(fg_idheap_pop(&h), want);
				k->in[want] = false;
			}
			break;
		}
		default: {
			int want = linear_min(k);
			if (want >= 0)
				assert_int_equal(fg_idheap_top(&h), want);
			else
				assert_true(fg_idheap_empty(&h));
		}
		}
		if (op % 997 == 0)
			check_invariants(k);
	}
	check_invariants(k);
	/* drained in order */
	for (int want; (want = linear_min(k)) >= 0; k->in[want] = false)
		assert_int_equal(fg_idheap_pop(&h), want);
	assert_true(fg_idheap_empty(&h));
	test_free(k);
}

static void single_and_duplicate_keys(void **state)
{
	(void)state;
	struct keyed *k = test_calloc(1, sizeof(*k));
	struct fg_idheap h = { k->heap, k->pos, &k->n, key_less, k };

	assert_true(fg_idheap_empty(&h));
	fg_idheap_remove(&h, 7); /* absent: nothing */
	fg_idheap_fix(&h, 7);
	assert_true(fg_idheap_empty(&h));
	for (uint32_t i = IDS; i-- > 0;) /* all equal keys: id order */
		fg_idheap_insert(&h, i);
	fg_idheap_insert(&h, 5); /* twice: still once */
	assert_int_equal(k->n, IDS);
	for (uint32_t i = 0; i < IDS; i++)
		assert_int_equal(fg_idheap_pop(&h), i);
	assert_true(fg_idheap_empty(&h));
	test_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(matches_linear_scan),
		cmocka_unit_test(single_and_duplicate_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
