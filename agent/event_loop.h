/* event_loop.h — the agent's single-threaded epoll loop.
 *
 * Everything in fairgated (control socket, proxy connections, metrics, timers)
 * registers here; one thread, no locks. Timers are one-shot, ordered by a
 * binary heap keyed on CLOCK_MONOTONIC nanoseconds.
 */
#ifndef FAIRGATE_EVENT_LOOP_H
#define FAIRGATE_EVENT_LOOP_H

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
void fg_loop_timer_cancel(struct fg_loop *loop, uint64_t id);

/* Run until fg_loop_stop(); returns 0, or -1 on an epoll error. */
int fg_loop_run(struct fg_loop *loop);
void fg_loop_stop(struct fg_loop *loop);

/* CLOCK_MONOTONIC in nanoseconds: the clock deny windows are written in,
 * the same one bpf_ktime_get_ns() reads. */
uint64_t fg_now_ns(void);

#endif
