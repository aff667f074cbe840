/* test_id_set.c — lib/id_set: members listed once in the order added,
 * out-of-range ids refused, fill and clear, and filter keeping the chosen
 * members in order while the rest leave (against a plain membership array
 * over random operations). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/id_set.h"
#include "selftests/unit/xorshift.h"

#define IDS 500

static void add_once_in_order(void **state)
{
	(void)state;
	struct fg_idset s;

	assert_int_equal(fg_idset_init(&s, 10), 0);
	assert_true(fg_idset_add(&s, 7));
	assert_true(fg_idset_add(&s, 2));
	assert_false(fg_idset_add(&s, 7));
	assert_false(fg_idset_add(&s, 10)); /* past the slots */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.ids[0], 7);
	assert_int_equal(s.ids[1], 2);
	assert_true(fg_idset_has(&s, 2));
	assert_false(fg_idset_has(&s, 3));
	assert_false(fg_idset_has(&s, 99));
	fg_idset_clear(&s);
	assert_int_equal(s.n, 0);
	assert_false(fg_idset_has(&s, 7));
	assert_true(fg_idset_add(&s, 7));
	fg_idset_fill(&s, 4);
	assert_int_equal(s.n, 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(s.ids[i], i);
	assert_false(fg_idset_has(&s, 7)); /* fill is exactly 0..n-1 */
	fg_idset_fill(&s, 50);             /* at most the slots */
	assert_int_equal(s.n, 10);
	fg_idset_free(&s);
	assert_int_equal(fg_idset_init(&s, 0), 0); /* an empty policy: one slot */
	assert_true(fg_idset_add(&s, 0));
	fg_idset_free(&s);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t draw(uint32_t n)
{
	return (uint32_t)(fg_xorshift64(&rng) % n);
}

struct odd_ctx {
	uint32_t visits;
	uint32_t seen[IDS];
};

/* keeps the odd ids, and sees every member once */
static bool keep_odd(uint32_t id, void *ctx)
{
	struct odd_ctx *c = ctx;
	c->seen[id]++;
	c->visits++;
	return id & 1;
}

static void filter_against_reference(void **state)
{
	(void)state;
	struct fg_idset s;
	bool ref[IDS] = { false };

	assert_int_equal(fg_idset_init(&s, IDS), 0);
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 200; k++) {
			uint32_t id = draw(IDS);
			assert_int_equal(fg_idset_add(&s, id), !ref[id]);
			ref[id] = true;
		}
		uint32_t before[IDS], n_before = s.n, want = 0;
		for (uint32_t k = 0; k < s.n; k++)
			before[k] = s.ids[k];
		struct odd_ctx c = { 0 };
		fg_idset_filter(&s, keep_odd, &c);
		uint32_t members = 0;
		for (uint32_t i = 0; i < IDS; i++) {
			members += ref[i];
			assert_int_equal(c.seen[i], ref[i] ? 1 : 0);
			ref[i] = ref[i] && (i & 1);
			want += ref[i];
			assert_int_equal(fg_idset_has(&s, i), ref[i]);
		}
		assert_int_equal(c.visits, members);
		assert_int_equal(n_before, members);
		assert_int_equal(s.n, want);
		/* the kept ones in the order they were added */
		uint32_t w = 0;
		for (uint32_t k = 0; k < n_before; k++)
			if (before[k] & 1)
				assert_int_equal(s.ids[w++], before[k]);
		if (round % 10 == 9) {
			fg_idset_clear(&s);
			for (uint32_t i = 0; i < IDS; i++)
				ref[i] = false;
		}
	}
	fg_idset_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_once_in_order),
		cmocka_unit_test(filter_against_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
