/* test_event_loop.c — the agent loop's timers: the id fg_loop_timer returns
 * names the timer it armed (cancelling it cancels that one, even after the
 * heap reordered), and timers run in deadline order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/event_loop.h"

static int fired[8];
static int order[8], n_order;

static void cb(struct fg_loop *loop, void *ctx)
{
	int i = (int)(intptr_t)ctx;

	fired[i]++;
	order[n_order++] = i;
	if (n_order == 3)
		fg_loop_stop(loop);
}

static void cancel_names_the_armed_timer(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();
	assert_non_null(loop);
	/* later deadlines first, so each new timer moves up the heap */
	uint64_t id_slow = fg_loop_timer(loop, 30000000, cb, (void *)(intptr_t)0);
	uint64_t id_mid = fg_loop_timer(loop, 20000000, cb, (void *)(intptr_t)1);
	uint64_t id_fast = fg_loop_timer(loop, 10000000, cb, (void *)(intptr_t)2);
	uint64_t id_x = fg_loop_timer(loop, 5000000, cb, (void *)(intptr_t)3);
	assert_true(id_slow && id_mid && id_fast && id_x);
	fg_loop_timer_cancel(loop, id_x); /* must cancel timer 3, not another one */
	assert_int_equal(fg_loop_run(loop), 0);
	assert_int_equal(fired[3], 0);
	assert_int_equal(n_order, 3);
	assert_int_equal(order[0], 2);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 0);
	fg_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cancel_names_the_armed_timer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
