/* test_event_loop.c — the agent loop's timers: the id fg_loop_timer returns
 * names the timer it armed (cancelling it cancels that one, even after the
 * heap reordered, and a stale id names nothing once its slot serves another
 * timer), timers run in deadline order (ties in arming order) through many
 * cancels and moves, a move earlier or later and fg_loop_timer_due_by
 * reorder them, a callback may cancel any timer or re-arm its own (which
 * then runs in the next pass, not again in this one), and a fg_loop_soon
 * timer runs right after the fd callback that armed it, before the rest of
 * the epoll batch (a plain zero-delay timer waits for the batch to end).
 * Deadlines are set in the past where order is what is checked, so a
 * loaded machine cannot change the result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* ---- order through cancels and moves ------------------------------------ */

#define MANY 5000

struct many {
	uint64_t id[MANY], when[MANY], armed[MANY]; /* armed: the arming order */
	bool live[MANY];
	uint32_t fired[MANY], n_fired, expect[MANY], n_expect;
};
static struct many m;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t draw(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void record_many(struct fg_loop *loop, void *ctx)
{
	(void)loop;
	m.fired[m.n_fired++] = (uint32_t)(uintptr_t)ctx;
}

static int by_deadline_then_arming(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (m.when[x] != m.when[y])
		return m.when[x] < m.when[y] ? -1 : 1;
	return m.armed[x] < m.armed[y] ? -1 : m.armed[x] > m.armed[y];
}

/* 5,000 timers due in the past (500 distinct times, so many ties), then
 * cancels wherever they sit in the heap, moves earlier and later, due_by
 * calls that move some and leave others, and new timers in the cancelled
 * ones' slots: one run fires exactly the live ones, each once, in the
 * order of their deadlines and then of when each was last armed. */
static void many_timers_run_in_order(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();
	uint64_t base = fg_now_ns() - 10000000000ull, order = 0;

	assert_non_null(loop);
	memset(&m, 0, sizeof(m));
	for (uint32_t i = 0; i < MANY; i++) {
		m.when[i] = base + draw(500) * 1000;
		m.armed[i] = order++;
		m.id[i] = fg_loop_timer_at(loop, m.when[i], record_many, (void *)(uintptr_t)i);
		assert_true(m.id[i]);
		m.live[i] = true;
	}
	for (uint32_t k = 0; k < 3 * MANY; k++) {
		uint32_t i = draw(MANY);
		uint64_t when = base + draw(500) * 1000;
		switch (draw(3)) {
		case 0: /* twice is harmless */
			fg_loop_timer_cancel(loop, m.id[i]);
			m.live[i] = false;
			break;
		case 1:
			assert_int_equal(fg_loop_timer_move(loop, m.id[i], when), m.live[i]);
			if (m.live[i]) {
				m.when[i] = when;
				m.armed[i] = order++;
			}
			break;
		default: /* moved only when that is earlier */
			assert_int_equal(fg_loop_timer_due_by(loop, m.id[i], when), m.live[i]);
			if (m.live[i] && when < m.when[i]) {
				m.when[i] = when;
				m.armed[i] = order++;
			}
			break;
		}
	}
	/* new timers take the cancelled ones' slots: the stale ids must not
	 * name them */
	for (uint32_t i = 0, fresh = 0; i < MANY && fresh < 1000; i++) {
		if (m.live[i])
			continue;
		uint64_t stale = m.id[i];
		m.when[i] = base + draw(500) * 1000;
		m.armed[i] = order++;
		m.id[i] = fg_loop_timer_at(loop, m.when[i], record_many, (void *)(uintptr_t)i);
		assert_true(m.id[i] && m.id[i] != stale);
		fg_loop_timer_cancel(loop, stale);
		assert_false(fg_loop_timer_move(loop, stale, base));
		assert_false(fg_loop_timer_due_by(loop, stale, base));
		m.live[i] = true;
		fresh++;
	}
	for (uint32_t i = 0; i < MANY; i++)
		if (m.live[i])
			m.expect[m.n_expect++] = i;
	assert_true(m.n_expect > MANY / 4);
	qsort(m.expect, m.n_expect, sizeof(m.expect[0]), by_deadline_then_arming);
	fg_loop_timer(loop, 50000000, stop_cb, NULL);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_int_equal(m.n_fired, m.n_expect);
	assert_memory_equal(m.fired, m.expect, m.n_expect * sizeof(m.fired[0]));
	for (uint32_t i = 0; i < MANY; i++) /* every id is stale now */
		assert_false(fg_loop_timer_move(loop, m.id[i], base));
	fg_loop_free(loop);
}

/* ---- re-arming -------------------------------------------------------- */

static void record(struct fg_loop *loop, void *ctx)
{
	(void)loop;
	order[n_order++] = (int)(intptr_t)ctx;
}

static void rearm_earlier_and_later(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();
	uint64_t now = fg_now_ns();

	assert_non_null(loop);
	n_order = 0;
	uint64_t a = fg_loop_timer_at(loop, now + 40000000, record, (void *)(intptr_t)1);
	uint64_t b = fg_loop_timer_at(loop, now + 20000000, record, (void *)(intptr_t)2);
	fg_loop_timer_at(loop, now + 30000000, record, (void *)(intptr_t)3);
	assert_true(fg_loop_timer_move(loop, a, now + 10000000)); /* earlier: first */
	assert_true(fg_loop_timer_move(loop, b, now + 50000000)); /* later: last */
	fg_loop_timer_at(loop, now + 80000000, stop_cb, NULL);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_int_equal(n_order, 3);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 3);
	assert_int_equal(order[2], 2);
	fg_loop_free(loop);
}

static void due_by_only_pulls_in(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();
	uint64_t base = fg_now_ns() - 1000000000ull;

	assert_non_null(loop);
	n_order = 0;
	uint64_t a = fg_loop_timer_at(loop, base + 50, record, (void *)(intptr_t)1);
	fg_loop_timer_at(loop, base + 30, record, (void *)(intptr_t)2);
	assert_true(fg_loop_timer_due_by(loop, a, base + 100)); /* later: stays at 50 */
	fg_loop_timer_at(loop, base + 70, record, (void *)(intptr_t)3);
	fg_loop_timer_at(loop, base + 80000000, stop_cb, NULL);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_int_equal(n_order, 3);
	assert_int_equal(order[0], 2);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 3);
	assert_false(fg_loop_timer_due_by(loop, a, base)); /* it ran: the id names nothing */

	n_order = 0;
	a = fg_loop_timer_at(loop, base + 50, record, (void *)(intptr_t)1);
	fg_loop_timer_at(loop, base + 30, record, (void *)(intptr_t)2);
	assert_true(fg_loop_timer_due_by(loop, a, base + 10)); /* earlier: moved */
	fg_loop_timer(loop, 50000000, stop_cb, NULL);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_int_equal(n_order, 2);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 2);
	fg_loop_free(loop);
}

/* ---- from inside callbacks --------------------------------------------- */

static uint64_t id_x, id_y, id_w, self_id;
static int self_runs;

static void x_cancels(struct fg_loop *loop, void *ctx)
{
	record(loop, ctx);
	fg_loop_timer_cancel(loop, id_y);  /* due in this very pass */
	fg_loop_timer_cancel(loop, id_x);  /* its own: nothing left to do after */
	/* a new timer, due already (after the third): it may take y's slot,
	 * which y's stale id must not name */
	id_w = fg_loop_timer_at(loop, fg_now_ns() - 500000000ull, record, (void *)(intptr_t)4);
	fg_loop_timer_cancel(loop, id_y);
	assert_false(fg_loop_timer_move(loop, id_y, 0));
}

static void cancel_from_inside_a_callback(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();
	uint64_t base = fg_now_ns() - 1000000000ull;

	assert_non_null(loop);
	n_order = 0;
	id_x = fg_loop_timer_at(loop, base + 1, x_cancels, (void *)(intptr_t)1);
	id_y = fg_loop_timer_at(loop, base + 2, record, (void *)(intptr_t)2);
	fg_loop_timer_at(loop, base + 3, record, (void *)(intptr_t)3);
	fg_loop_timer(loop, 50000000, stop_cb, NULL);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_true(id_w);
	assert_int_equal(n_order, 3);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 3); /* y never ran */
	assert_int_equal(order[2], 4); /* w, not cancelled by y's stale id */
	fg_loop_free(loop);
}

/* A timer that re-arms itself due at once, for ever: it runs once a pass,
 * so the eventfd it makes readable is served after its first run (without
 * the pass rule the loop would never leave the timers). */
static int self_efd, runs_when_served;

static void rearms_itself(struct fg_loop *loop, void *ctx)
{
	uint64_t one = 1;

	record(loop, ctx);
	if (++self_runs == 1)
		assert_int_equal(write(self_efd, &one, sizeof(one)), (int)sizeof(one));
	assert_true(fg_loop_timer_move(loop, self_id, 0)); /* due at once, again */
}

static void served(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	uint64_t v;

	(void)events;
	(void)ctx;
	assert_int_equal(read(fd, &v, sizeof(v)), (int)sizeof(v));
	runs_when_served = self_runs;
	fg_loop_timer_cancel(loop, self_id);
	fg_loop_stop(loop);
}

static void rearm_from_own_callback(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();

	assert_non_null(loop);
	n_order = 0;
	self_runs = 0;
	self_efd = eventfd(0, EFD_NONBLOCK);
	assert_true(self_efd >= 0);
	assert_int_equal(fg_loop_add(loop, self_efd, EPOLLIN, served, NULL), 0);
	self_id = fg_loop_timer_at(loop, 0, rearms_itself, (void *)(intptr_t)1);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_int_equal(runs_when_served, 1);
	assert_false(fg_loop_timer_move(loop, self_id, 0)); /* cancelled by the fd's callback */
	fg_loop_del(loop, self_efd);
	close(self_efd);
	fg_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cancel_names_the_armed_timer),
		cmocka_unit_test(soon_runs_before_the_rest_of_the_batch),
		cmocka_unit_test(zero_delay_timer_waits_for_the_batch),
		cmocka_unit_test(many_timers_run_in_order),
		cmocka_unit_test(rearm_earlier_and_later),
		cmocka_unit_test(due_by_only_pulls_in),
		cmocka_unit_test(cancel_from_inside_a_callback),
		cmocka_unit_test(rearm_from_own_callback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
