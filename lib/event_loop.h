/* event_loop.h — the agent's single-threaded epoll loop.
 *
 * Everything in fairgated (control socket, proxy connections, metrics, timers)
 * registers on a loop. Alone, a loop is one thread's and takes no lock; with
 * agent.workers > 1 each worker thread runs a loop of its own and all of them
 * share one lock (fg_loop_share), held while any callback runs unless the
 * callback lets go of it for its own thread's work (fg_loop_unlock).
 * Timers are one-shot, ordered by
 * lib/id_heap.c keyed on CLOCK_MONOTONIC nanoseconds (ties in the order they
 * were armed); each timer knows its place in the heap, so arming, re-arming
 * and cancelling one costs O(log n) with n timers armed, never a search.
 */
#ifndef FAIRGATE_EVENT_LOOP_H
#define FAIRGATE_EVENT_LOOP_H

#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>

struct fg_loop;

/* Called with the epoll events that fired (EPOLLIN, EPOLLOUT, EPOLLHUP...). */
typedef void (*fg_fd_cb)(struct fg_loop *loop, int fd, uint32_t events, void *ctx);
typedef void (*fg_timer_cb)(struct fg_loop *loop, void *ctx);

struct fg_loop *fg_loop_new(void);
void fg_loop_free(struct fg_loop *loop);

int fg_loop_add(struct fg_loop *loop, int fd, uint32_t events, fg_fd_cb cb, void *ctx);
int fg_loop_mod(struct fg_loop *loop, int fd, uint32_t events);
/* Safe to call from inside a callback, including for the fd being served. */
int fg_loop_del(struct fg_loop *loop, int fd);

/* One-shot timer `after_ns` from now. Returns its id (> 0; 0 when out of
 * memory), which names this timer until it has run or is cancelled; after
 * that the id names nothing (cancelling or moving it does nothing), even
 * once its storage serves another timer. */
uint64_t fg_loop_timer(struct fg_loop *loop, uint64_t after_ns, fg_timer_cb cb, void *ctx);
/* The same at an absolute fg_now_ns() time (in the past: due now). */
uint64_t fg_loop_timer_at(struct fg_loop *loop, uint64_t when_ns, fg_timer_cb cb, void *ctx);
/* A one-shot timer due now that runs as soon as the fd callback now running
 * returns, not after the rest of the epoll batch (called outside an fd
 * callback, it runs with the other due timers). Never inside the caller. */
uint64_t fg_loop_soon(struct fg_loop *loop, fg_timer_cb cb, void *ctx);
/* Re-arm timer `id` to run at `when_ns`, earlier or later. From inside the
 * timer's own callback it arms the same timer again, with no allocation: an
 * owner that re-arms its timer there keeps it until it cancels it. false
 * when `id` names no timer (run, cancelled). */
bool fg_loop_timer_move(struct fg_loop *loop, uint64_t id, uint64_t when_ns);
/* Make timer `id` run no later than `when_ns`: moved when it is armed later
 * (or is running its callback), left alone otherwise, which costs no heap
 * work. For a deadline that often moves away (a read pushing an idle
 * timeout back): the timer stays where it was and its callback re-checks
 * the real deadline and re-arms. false when `id` names no timer. */
bool fg_loop_timer_due_by(struct fg_loop *loop, uint64_t id, uint64_t when_ns);
/* Also from inside a callback, for any timer (its own included). */
void fg_loop_timer_cancel(struct fg_loop *loop, uint64_t id);

/* Call after accept(2) on the listener `fd` failed with `err`. Returns true
 * when the caller should stop accepting for now, false when it may call
 * accept again at once (a connection that died in the queue). Out of
 * descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) leaves a
 * level-triggered listener readable with nothing acceptable, so the loop
 * would spin: the listener is parked (no events) for FG_ACCEPT_BACKOFF_NS,
 * then watched again; so is it on any error accept should never return. */
#define FG_ACCEPT_BACKOFF_NS 50000000ull
bool fg_loop_accept_failed(struct fg_loop *loop, int fd, int err);

/* Make the loop one of several threads' loops sharing `lock`: fg_loop_run
 * is then called holding it, releases it only while it waits in
 * epoll_wait, and returns holding it; every fd and timer callback runs
 * under it. Any thread holding it may use any loop (add, del, arm, move,
 * stop): a timer armed or moved, or a stop, from a thread other than the
 * loop's own wakes that thread through an eventfd. Call before fg_loop_run;
 * NULL makes it one thread's again (once the others are gone). -1 with
 * errno when the eventfd cannot be made. */
int fg_loop_share(struct fg_loop *loop, pthread_mutex_t *lock);
/* The shared lock, taken and given by the loop's own thread, timed
 * (fg_loop_lock_times). fg_loop_run takes and gives it itself; these are
 * for the rest: before the first run and around joining the others, and
 * from inside one of the loop's own callbacks, to let go of the lock for
 * work that touches only what this thread owns (and atomics), never the
 * loop itself nor anything another thread reaches under the lock. Unlock
 * returns true when it let go (then fg_loop_lock must follow before the
 * callback returns); a loop that is not shared has no lock: false, at the
 * cost of one test. */
void fg_loop_lock(struct fg_loop *loop);
bool fg_loop_unlock(struct fg_loop *loop);
/* A shared loop's thread calls cb once a pass, after it has let go of the
 * lock and before it waits: work on what only this thread touches, done
 * without the lock (the proxy's sends of the requests this thread
 * dispatched in the pass). cb returns false without the lock; or true
 * holding it again (fg_loop_lock) for what it could not finish alone,
 * and the loop then runs its due timers and passes again before it waits.
 * NULL: none. */
typedef bool (*fg_unlocked_cb)(struct fg_loop *loop, void *ctx);
void fg_loop_on_unlocked(struct fg_loop *loop, fg_unlocked_cb cb, void *ctx);
void *fg_loop_unlocked_ctx(const struct fg_loop *loop);
/* Whether a shared loop's thread is past its pass: from when it lets go of
 * the lock at a pass's end (before its fg_loop_on_unlocked callback) until
 * its epoll_wait returns. Work another thread leaves for that callback
 * (under a lock of its own) and then reads false here is found at the end
 * of the pass the loop runs next, without a wake; read true, the callback
 * may have looked already and the loop may sleep. */
bool fg_loop_asleep(const struct fg_loop *loop);
/* Wakes a shared loop's thread out of epoll_wait (or makes its next wait
 * return at once), from any thread, holding the lock or not: for work left
 * for its fg_loop_on_unlocked callback after it may have looked. */
void fg_loop_wake(struct fg_loop *loop);
/* Whether the loop shares a lock with others (fg_loop_share). */
bool fg_loop_shared(const struct fg_loop *loop);
/* How long the loop's thread has held the shared lock (callbacks and
 * timers, and any holding outside fg_loop_run) and waited to take it;
 * read by a thread holding the lock. */
void fg_loop_lock_times(const struct fg_loop *loop, uint64_t *held_ns, uint64_t *wait_ns);

/* Run until fg_loop_stop(); returns 0, or -1 on an epoll error. Each pass
 * runs only the timers already due, and armed or last moved, when it
 * began, so timers that re-arm themselves at once cannot keep the loop
 * from fds (the signalfd). */
int fg_loop_run(struct fg_loop *loop);
void fg_loop_stop(struct fg_loop *loop);
/* The loop this thread is running (inside fg_loop_run), or NULL: where
 * work that may run on any of several shared loops runs with no hand-off
 * to another thread. */
struct fg_loop *fg_loop_current(void);

/* CLOCK_MONOTONIC in nanoseconds: the clock deny windows are written in,
 * the same one bpf_ktime_get_ns() reads. */
uint64_t fg_now_ns(void);

#endif
