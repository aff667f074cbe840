/* event_loop.h — the agent's single-threaded epoll loop.
 *
 * Everything in fairgated (control socket, proxy connections, metrics, timers)
 * registers here; one thread, no locks. Timers are one-shot, ordered by a
 * binary heap keyed on CLOCK_MONOTONIC nanoseconds.
 */
#ifndef FAIRGATE_EVENT_LOOP_H
#define FAIRGATE_EVENT_LOOP_H

#include <stdbool.h>
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

/* One-shot timer `after_ns` from now; returns an id > 0 for fg_loop_timer_cancel. */
uint64_t fg_loop_timer(struct fg_loop *loop, uint64_t after_ns, fg_timer_cb cb, void *ctx);
/* A one-shot timer due now that runs as soon as the fd callback now running
 * returns, not after the rest of the epoll batch (called outside an fd
 * callback, it runs with the other due timers). Never inside the caller. */
uint64_t fg_loop_soon(struct fg_loop *loop, fg_timer_cb cb, void *ctx);
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

/* Run until fg_loop_stop(); returns 0, or -1 on an epoll error. Each pass
 * runs only the timers already due when it began, so timers that re-arm
 * themselves at once cannot keep the loop from fds (the signalfd). */
int fg_loop_run(struct fg_loop *loop);
void fg_loop_stop(struct fg_loop *loop);

/* CLOCK_MONOTONIC in nanoseconds: the clock deny windows are written in,
 * the same one bpf_ktime_get_ns() reads. */
uint64_t fg_now_ns(void);

#endif
