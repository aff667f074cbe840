/* test_event_loop_shared.c — loops that share one lock (fg_loop_share, what
 * agent.workers runs on): every callback runs holding the lock, and the
 * loop releases it while it waits, so another thread can take it; a timer
 * armed or moved from another thread wakes the loop's thread out of
 * epoll_wait (whose timeout did not know of it: without the wake it would
 * sleep out its 1 s cap); a stop from another thread ends the loop at once;
 * fg_loop_run returns holding the lock; unsharing makes the loop run
 * without one again; fg_loop_current names the loop a callback runs
 * on, in each thread its own; and a callback that lets go of the lock
 * (fg_loop_unlock) lets another thread take it until fg_loop_lock,
 * while an unshared loop has none to let go; the time a loop's thread
 * holds the lock and waits for it is counted (fg_loop_lock_times); the
 * fg_loop_on_unlocked callback runs once a pass without the lock, and one
 * that takes it back makes the loop pass again holding it. Times are measured against the loop's 1 s cap with
 * wide margins, so a loaded machine does not change the result. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <cmocka.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/event_loop.h"

/* Far below the loop's 1 s cap on epoll_wait, far above scheduling noise. */
#define WOKEN_WITHIN_NS 600000000ull

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct runner {
	struct fg_loop *loop;
	pthread_t thread;
	int rc;
	int held_after_run;   /* trylock's answer right after fg_loop_run returned */
	uint64_t returned_ns;
};

static void *run_loop(void *arg)
{
	struct runner *r = arg;

	fg_loop_lock(r->loop); /* timed from here (fg_loop_lock_times) */
	r->rc = fg_loop_run(r->loop);
	r->returned_ns = fg_now_ns();
	r->held_after_run = pthread_mutex_trylock(&lock); /* EBUSY: still ours */
	if (!r->held_after_run)
		pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void start(struct runner *r)
{
	r->loop = fg_loop_new();
	assert_non_null(r->loop);
	assert_int_equal(fg_loop_share(r->loop, &lock), 0);
	assert_int_equal(pthread_create(&r->thread, NULL, run_loop, r), 0);
	/* let it reach epoll_wait with no timer armed: a 1 s timeout */
	usleep(100000);
}

static void finish_keep(struct runner *r)
{
	assert_int_equal(pthread_join(r->thread, NULL), 0);
	assert_int_equal(r->rc, 0);
	assert_int_equal(r->held_after_run, EBUSY);
}

static void finish(struct runner *r)
{
	finish_keep(r);
	fg_loop_free(r->loop);
}

static uint64_t fired_ns;
static int lock_in_callback;

static void stop_timer(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	fired_ns = fg_now_ns();
	lock_in_callback = pthread_mutex_trylock(&lock);
	if (!lock_in_callback)
		pthread_mutex_unlock(&lock);
	fg_loop_stop(loop);
}

static void foreign_timer_wakes_the_loop(void **state)
{
	struct runner r = { 0 };
	(void)state;

	fired_ns = 0;
	start(&r);
	pthread_mutex_lock(&lock); /* taken while the loop waits: it let go */
	uint64_t armed = fg_now_ns();
	assert_true(fg_loop_timer(r.loop, 10000000, stop_timer, NULL) != 0);
	pthread_mutex_unlock(&lock);
	finish(&r);
	assert_true(fired_ns >= armed + 10000000);
	assert_true(fired_ns - armed < WOKEN_WITHIN_NS);
	assert_int_equal(lock_in_callback, EBUSY);
}

static void foreign_move_wakes_the_loop(void **state)
{
	struct runner r = { 0 };
	(void)state;

	fired_ns = 0;
	r.loop = fg_loop_new();
	assert_non_null(r.loop);
	assert_int_equal(fg_loop_share(r.loop, &lock), 0);
	/* armed far out before the loop runs: its wait is the 1 s cap */
	uint64_t id = fg_loop_timer(r.loop, 3600000000000ull, stop_timer, NULL);
	assert_true(id != 0);
	assert_int_equal(pthread_create(&r.thread, NULL, run_loop, &r), 0);
	usleep(100000);
	pthread_mutex_lock(&lock);
	uint64_t moved = fg_now_ns();
	assert_true(fg_loop_timer_move(r.loop, id, moved));
	pthread_mutex_unlock(&lock);
	finish(&r);
	assert_true(fired_ns - moved < WOKEN_WITHIN_NS);
}

static int served_efd = -1;

static void fd_served(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	uint64_t v;
	(void)events;
	(void)ctx;
	assert_int_equal(read(fd, &v, sizeof(v)), (int)sizeof(v));
	lock_in_callback = pthread_mutex_trylock(&lock);
	if (!lock_in_callback)
		pthread_mutex_unlock(&lock);
	fg_loop_stop(loop);
}

static void fd_callbacks_hold_the_lock(void **state)
{
	struct runner r = { 0 };
	uint64_t one = 1;
	(void)state;

	lock_in_callback = 0;
	served_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(served_efd >= 0);
	start(&r);
	pthread_mutex_lock(&lock);
	/* an fd added from another thread: epoll itself takes it */
	assert_int_equal(fg_loop_add(r.loop, served_efd, EPOLLIN, fd_served, NULL), 0);
	pthread_mutex_unlock(&lock);
	assert_int_equal(write(served_efd, &one, sizeof(one)), (int)sizeof(one));
	finish(&r);
	assert_int_equal(lock_in_callback, EBUSY);
	close(served_efd);
}

static void foreign_stop_ends_the_loop(void **state)
{
	struct runner r = { 0 };
	(void)state;

	start(&r);
	pthread_mutex_lock(&lock);
	uint64_t asked = fg_now_ns();
	fg_loop_stop(r.loop);
	pthread_mutex_unlock(&lock);
	assert_int_equal(pthread_join(r.thread, NULL), 0);
	assert_true(r.returned_ns - asked < WOKEN_WITHIN_NS);
	assert_int_equal(r.held_after_run, EBUSY);
	fg_loop_free(r.loop);
}

static void unshared_runs_without_the_lock(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();

	assert_non_null(loop);
	assert_int_equal(fg_loop_share(loop, &lock), 0);
	assert_int_equal(fg_loop_share(loop, NULL), 0);
	assert_true(fg_loop_timer(loop, 0, stop_timer, NULL) != 0);
	lock_in_callback = -1;
	assert_int_equal(fg_loop_run(loop), 0); /* called without the lock */
	assert_int_equal(lock_in_callback, 0);  /* nobody held it */
	fg_loop_free(loop);
}

static struct fg_loop *seen_current;

static void note_current(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	seen_current = fg_loop_current();
	fg_loop_stop(loop);
}

static void current_is_the_running_loop(void **state)
{
	struct runner r = { 0 };
	(void)state;

	assert_null(fg_loop_current());
	seen_current = NULL;
	start(&r);
	pthread_mutex_lock(&lock);
	assert_true(fg_loop_timer(r.loop, 0, note_current, NULL) != 0);
	assert_null(fg_loop_current()); /* this thread runs no loop */
	pthread_mutex_unlock(&lock);
	finish_keep(&r);
	assert_ptr_equal(seen_current, r.loop);
	fg_loop_free(r.loop);
	assert_null(fg_loop_current());
}

static int other_got_lock;   /* the other thread's timedlock answer */
static bool released;
static int held_after_retake;

static void *take_lock(void *arg)
{
	struct timespec until;
	(void)arg;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2; /* not let go: it fails instead of hanging the test */
	other_got_lock = pthread_mutex_timedlock(&lock, &until);
	if (!other_got_lock)
		pthread_mutex_unlock(&lock);
	return NULL;
}

static void release_and_let_in(struct fg_loop *loop, void *ctx)
{
	pthread_t t;
	(void)ctx;

	released = fg_loop_unlock(loop);
	assert_int_equal(pthread_create(&t, NULL, take_lock, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (released)
		fg_loop_lock(loop);
	held_after_retake = pthread_mutex_trylock(&lock);
	if (!held_after_retake)
		pthread_mutex_unlock(&lock);
	fg_loop_stop(loop);
}

static void release_lets_another_thread_in(void **state)
{
	struct runner r = { 0 };
	(void)state;

	other_got_lock = -1;
	start(&r);
	pthread_mutex_lock(&lock);
	assert_true(fg_loop_timer(r.loop, 0, release_and_let_in, NULL) != 0);
	pthread_mutex_unlock(&lock);
	finish(&r);
	assert_true(released);
	assert_int_equal(other_got_lock, 0);        /* it got in meanwhile */
	assert_int_equal(held_after_retake, EBUSY); /* and the callback has it again */
}

static void unshared_has_nothing_to_release(void **state)
{
	(void)state;
	struct fg_loop *loop = fg_loop_new();

	assert_non_null(loop);
	other_got_lock = -1;
	held_after_retake = -1;
	assert_true(fg_loop_timer(loop, 0, release_and_let_in, NULL) != 0);
	assert_int_equal(fg_loop_run(loop), 0);
	assert_false(released);
	assert_int_equal(other_got_lock, 0);   /* nobody held it */
	assert_int_equal(held_after_retake, 0); /* nor does the callback */
	fg_loop_free(loop);
}

static void just_stop(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	fg_loop_stop(loop);
}

/* The stop comes on the next pass: the hold is counted when the loop
 * lets go of the lock for that pass's epoll_wait (fg_loop_run returns
 * holding it, uncounted). */
static void hold_lock_100ms(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	usleep(100000);
	assert_true(fg_loop_timer(loop, 0, just_stop, NULL) != 0);
}

static void lock_times_count_held_and_waited(void **state)
{
	struct runner r = { 0 };
	uint64_t held0, wait0, held, wait;
	(void)state;

	start(&r);
	pthread_mutex_lock(&lock);
	fg_loop_lock_times(r.loop, &held0, &wait0);
	/* wakes the loop's thread, which then waits for the lock held here */
	assert_true(fg_loop_timer(r.loop, 0, hold_lock_100ms, NULL) != 0);
	usleep(300000);
	pthread_mutex_unlock(&lock);
	finish_keep(&r);
	fg_loop_lock_times(r.loop, &held, &wait);
	assert_true(held - held0 >= 100000000ull); /* the callback's 100 ms */
	assert_true(held - held0 < 60000000000ull);
	assert_true(wait - wait0 >= 100000000ull); /* most of the 300 ms */
	assert_true(wait - wait0 < 60000000000ull);
	fg_loop_free(r.loop);
}

/* fg_loop_on_unlocked: called once a pass after the loop let go of the
 * lock (another thread could take it), on the loop's own thread, with
 * its context; fg_loop_asleep is true while the loop waits past its pass
 * and false while it runs one. */
static _Atomic int unlocked_calls, unlocked_trylock = -1;
static _Atomic bool unlocked_on_own_loop;
static bool asleep_in_pass = true;

static bool note_unlocked(struct fg_loop *loop, void *ctx)
{
	unlocked_calls++;
	unlocked_on_own_loop = fg_loop_current() == loop && fg_loop_unlocked_ctx(loop) == ctx;
	unlocked_trylock = pthread_mutex_trylock(&lock);
	if (!unlocked_trylock)
		pthread_mutex_unlock(&lock);
	return false;
}

static void note_asleep_and_stop(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	asleep_in_pass = fg_loop_asleep(loop);
	fg_loop_stop(loop);
}

static void unlocked_callback_runs_without_the_lock(void **state)
{
	struct runner r = { 0 };
	int ctx;
	(void)state;

	r.loop = fg_loop_new();
	assert_non_null(r.loop);
	assert_int_equal(fg_loop_share(r.loop, &lock), 0);
	fg_loop_on_unlocked(r.loop, note_unlocked, &ctx);
	assert_int_equal(pthread_create(&r.thread, NULL, run_loop, &r), 0);
	usleep(100000);
	pthread_mutex_lock(&lock); /* taken while the loop waits */
	assert_true(fg_loop_asleep(r.loop));
	assert_true(unlocked_calls >= 1);
	assert_true(unlocked_on_own_loop);
	assert_int_equal(unlocked_trylock, 0); /* nobody held it then */
	assert_true(fg_loop_timer(r.loop, 0, note_asleep_and_stop, NULL) != 0);
	pthread_mutex_unlock(&lock);
	finish(&r);
	assert_false(asleep_in_pass);
}

/* A callback that takes the lock back and returns true: the loop runs
 * what it armed and passes again, holding it, instead of giving it twice
 * (a default mutex given by a thread that does not hold it: undefined,
 * here a hang or an abort) or waiting out its 1 s cap. */
static int retake_calls;
static uint64_t retake_armed_ns;

static bool retake_and_arm(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	if (retake_calls++)
		return false;
	fg_loop_lock(loop);
	retake_armed_ns = fg_now_ns();
	assert_true(fg_loop_timer(loop, 0, stop_timer, NULL) != 0);
	return true;
}

static void unlocked_callback_holding_again_passes(void **state)
{
	struct runner r = { 0 };
	(void)state;

	fired_ns = 0;
	retake_calls = 0;
	r.loop = fg_loop_new();
	assert_non_null(r.loop);
	assert_int_equal(fg_loop_share(r.loop, &lock), 0);
	fg_loop_on_unlocked(r.loop, retake_and_arm, NULL);
	assert_int_equal(pthread_create(&r.thread, NULL, run_loop, &r), 0);
	finish(&r);
	assert_true(fired_ns >= retake_armed_ns);
	assert_true(fired_ns - retake_armed_ns < WOKEN_WITHIN_NS);
	assert_int_equal(lock_in_callback, EBUSY); /* the timer ran holding it */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(foreign_timer_wakes_the_loop),
		cmocka_unit_test(foreign_move_wakes_the_loop),
		cmocka_unit_test(fd_callbacks_hold_the_lock),
		cmocka_unit_test(foreign_stop_ends_the_loop),
		cmocka_unit_test(unshared_runs_without_the_lock),
		cmocka_unit_test(current_is_the_running_loop),
		cmocka_unit_test(release_lets_another_thread_in),
		cmocka_unit_test(unshared_has_nothing_to_release),
		cmocka_unit_test(lock_times_count_held_and_waited),
		cmocka_unit_test(unlocked_callback_runs_without_the_lock),
		cmocka_unit_test(unlocked_callback_holding_again_passes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
