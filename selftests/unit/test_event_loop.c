/* test_event_loop.c — the agent loop's timers: the id fg_loop_timer returns
 * names the timer it armed (cancelling it cancels that one, even after the
 * heap reordered), timers run in deadline order, and a fg_loop_soon timer
 * runs right after the fd callback that armed it, before the rest of the
 * epoll batch (a plain zero-delay timer waits for the batch to end). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <cmocka.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/event_loop.h"

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

/* Two eventfds ready at once: one epoll batch with both. The first one's
 * callback arms a timer; "order" records who ran when (fd callbacks as
 * 10 + their index). */
static int armed_soon;

static void fd_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	uint64_t v;
	int i = (int)(intptr_t)ctx;

	(void)events;
	assert_int_equal(read(fd, &v, sizeof(v)), (int)sizeof(v));
	order[n_order++] = 10 + i;
	if (n_order == 1) {
		if (armed_soon)
			fg_loop_soon(loop, cb, (void *)(intptr_t)5);
		else
			fg_loop_timer(loop, 0, cb, (void *)(intptr_t)5);
	}
}

static void stop_cb(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	fg_loop_stop(loop);
}

static void run_batch(int soon)
{
	struct fg_loop *loop = fg_loop_new();
	int efd[2] = { eventfd(1, EFD_NONBLOCK), eventfd(1, EFD_NONBLOCK) };
	uint64_t stop_id;

	assert_non_null(loop);
	assert_true(efd[0] >= 0 && efd[1] >= 0);
	memset(order, 0, sizeof(order));
	n_order = 0;
	armed_soon = soon;
	assert_int_equal(fg_loop_add(loop, efd[0], EPOLLIN, fd_cb, (void *)(intptr_t)0), 0);
	assert_int_equal(fg_loop_add(loop, efd[1], EPOLLIN, fd_cb, (void *)(intptr_t)1), 0);
	stop_id = fg_loop_timer(loop, 50000000, stop_cb, NULL); /* ends the run */
	assert_true(stop_id);
	assert_int_equal(fg_loop_run(loop), 0);
	fg_loop_del(loop, efd[0]);
	fg_loop_del(loop, efd[1]);
	close(efd[0]);
	close(efd[1]);
	fg_loop_free(loop);
}

static void soon_runs_before_the_rest_of_the_batch(void **state)
{
	(void)state;
	run_batch(1);
	assert_int_equal(n_order, 3);
	assert_true(order[0] == 10 || order[0] == 11);
	assert_int_equal(order[1], 5);                 /* the soon timer */
	assert_int_equal(order[2], order[0] == 10 ? 11 : 10);
}

static void zero_delay_timer_waits_for_the_batch(void **state)
{
	(void)state;
	run_batch(0);
	assert_int_equal(n_order, 3);
	assert_true(order[1] == 10 || order[1] == 11); /* both fds first */
	assert_int_equal(order[2], 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cancel_names_the_armed_timer),
		cmocka_unit_test(soon_runs_before_the_rest_of_the_batch),
		cmocka_unit_test(zero_delay_timer_waits_for_the_batch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
