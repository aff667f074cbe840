/* event_loop.c — epoll + a timer heap; see event_loop.h. */
#include "event_loop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fd_slot {
	fg_fd_cb cb;
	void *ctx;
	uint64_t gen;   /* bumped on del so a stale event in this batch is ignored */
	uint32_t events;
	uint64_t park_timer; /* a parked listener (fg_loop_accept_failed) */
	bool live;
};

struct timer {
	uint64_t when_ns;
	uint64_t id;
	fg_timer_cb cb;
	void *ctx;
};

struct fg_loop {
	int epfd;
	bool stop;
	struct fd_slot *fds;
	int nfds_cap;
	struct timer *heap;
	size_t heap_len, heap_cap;
	uint64_t next_timer_id;
	bool soon_due;         /* fg_loop_soon armed a timer: run timers after this callback */
};

uint64_t fg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct fg_loop *fg_loop_new(void)
{
	struct fg_loop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return NULL;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		free(loop);
		return NULL;
	}
	loop->next_timer_id = 1;
	return loop;
}

void fg_loop_free(struct fg_loop *loop)
{
	if (!loop)
		return;
	close(loop->epfd);
	free(loop->fds);
	free(loop->heap);
	free(loop);
}

static int ensure_fd_slot(struct fg_loop *loop, int fd)
{
	if (fd < loop->nfds_cap)
		return 0;
	int cap = loop->nfds_cap ? loop->nfds_cap : 64;
	while (cap <= fd)
		cap *= 2;
	struct fd_slot *n = realloc(loop->fds, (size_t)cap * sizeof(*n));
	if (!n)
		return -1;
	memset(n + loop->nfds_cap, 0, (size_t)(cap - loop->nfds_cap) * sizeof(*n));
	loop->fds = n;
	loop->nfds_cap = cap;
	return 0;
}

int fg_loop_add(struct fg_loop *loop, int fd, uint32_t events, fg_fd_cb cb, void *ctx)
{
	struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)(uint32_t)fd };

	if (fd < 0 || ensure_fd_slot(loop, fd))
		return -1;
	struct fd_slot *s = &loop->fds[fd];
	s->gen++;
	ev.data.u64 |= s->gen << 32;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev))
		return -1;
	s->cb = cb;
	s->ctx = ctx;
	s->events = events;
	s->park_timer = 0;
	s->live = true;
	return 0;
}

int fg_loop_mod(struct fg_loop *loop, int fd, uint32_t events)
{
	if (fd < 0 || fd >= loop->nfds_cap || !loop->fds[fd].live)
		return -1;
	loop->fds[fd].events = events;
	if (loop->fds[fd].park_timer)
		return 0; /* applied when the park ends */
	struct epoll_event ev = { .events = events,
				  .data.u64 = (uint64_t)(uint32_t)fd | (loop->fds[fd].gen << 32) };
	return epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev);
}

int fg_loop_del(struct fg_loop *loop, int fd)
{
	if (fd < 0 || fd >= loop->nfds_cap || !loop->fds[fd].live)
		return -1;
	if (loop->fds[fd].park_timer) {
		fg_loop_timer_cancel(loop, loop->fds[fd].park_timer);
		loop->fds[fd].park_timer = 0;
	}
	loop->fds[fd].live = false;
	loop->fds[fd].gen++;
	return epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
}

static void heap_swap(struct timer *a, struct timer *b)
{
	struct timer t = *a;
	*a = *b;
	*b = t;
}

static void heap_up(struct fg_loop *loop, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (loop->heap[p].when_ns <= loop->heap[i].when_ns)
			break;
		heap_swap(&loop->heap[p], &loop->heap[i]);
		i = p;
	}
}

static void heap_down(struct fg_loop *loop, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < loop->heap_len && loop->heap[l].when_ns < loop->heap[m].when_ns)
			m = l;
		if (r < loop->heap_len && loop->heap[r].when_ns < loop->heap[m].when_ns)
			m = r;
		if (m == i)
			return;
		heap_swap(&loop->heap[m], &loop->heap[i]);
		i = m;
	}
}

static void heap_remove_at(struct fg_loop *loop, size_t i)
{
	loop->heap[i] = loop->heap[--loop->heap_len];
	if (i < loop->heap_len) {
		heap_down(loop, i);
		heap_up(loop, i);
	}
}

uint64_t fg_loop_timer(struct fg_loop *loop, uint64_t after_ns, fg_timer_cb cb, void *ctx)
{
	if (loop->heap_len == loop->heap_cap) {
		size_t cap = loop->heap_cap ? loop->heap_cap * 2 : 64;
		struct timer *n = realloc(loop->heap, cap * sizeof(*n));
		if (!n)
			return 0;
		loop->heap = n;
		loop->heap_cap = cap;
	}
	struct timer *t = &loop->heap[loop->heap_len];
	t->when_ns = fg_now_ns() + after_ns;
	t->id = loop->next_timer_id++;
	t->cb = cb;
	t->ctx = ctx;
	uint64_t id = t->id; /* heap_up may move *t */
	heap_up(loop, loop->heap_len++);
	return id;
}

uint64_t fg_loop_soon(struct fg_loop *loop, fg_timer_cb cb, void *ctx)
{
	uint64_t id = fg_loop_timer(loop, 0, cb, ctx);

	if (id)
		loop->soon_due = true;
	return id;
}

void fg_loop_timer_cancel(struct fg_loop *loop, uint64_t id)
{
	for (size_t i = 0; i < loop->heap_len; i++) {
		if (loop->heap[i].id == id) {
			heap_remove_at(loop, i);
			return;
		}
	}
}

static void unpark(struct fg_loop *loop, void *ctx)
{
	int fd = (int)(intptr_t)ctx;
	struct fd_slot *s = &loop->fds[fd];

	s->park_timer = 0; /* fg_loop_del cancels this timer, so the slot is still ours */
	fg_loop_mod(loop, fd, s->events);
}

bool fg_loop_accept_failed(struct fg_loop *loop, int fd, int err)
{
	switch (err) {
	case EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case EWOULDBLOCK:
#endif
		return true;
	/* the connection failed before we took it; the next one may be fine */
	case EINTR: case ECONNABORTED: case EPROTO: case EPERM: case ENETDOWN:
	case ENOPROTOOPT: case EHOSTDOWN: case ENONET: case EHOSTUNREACH:
	case EOPNOTSUPP: case ENETUNREACH:
		return false;
	}
	if (fd < 0 || fd >= loop->nfds_cap || !loop->fds[fd].live || loop->fds[fd].park_timer)
		return true;
	struct epoll_event ev = { .events = 0,
				  .data.u64 = (uint64_t)(uint32_t)fd | (loop->fds[fd].gen << 32) };
	uint64_t id = fg_loop_timer(loop, FG_ACCEPT_BACKOFF_NS, unpark, (void *)(intptr_t)fd);
	if (id && !epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev))
		loop->fds[fd].park_timer = id;
	else if (id)
		fg_loop_timer_cancel(loop, id);
	return true;
}

void fg_loop_stop(struct fg_loop *loop)
{
	loop->stop = true;
}

static int next_timeout_ms(struct fg_loop *loop)
{
	if (!loop->heap_len)
		return 1000;
	uint64_t now = fg_now_ns(), when = loop->heap[0].when_ns;
	if (when <= now)
		return 0;
	uint64_t ms = (when - now + 999999) / 1000000;
	return ms > 1000 ? 1000 : (int)ms;
}

static void run_due_timers(struct fg_loop *loop)
{
	uint64_t now = fg_now_ns(), first_new = loop->next_timer_id;

	while (loop->heap_len && loop->heap[0].when_ns <= now && loop->heap[0].id < first_new) {
		struct timer t = loop->heap[0];
		heap_remove_at(loop, 0);
		t.cb(loop, t.ctx);
	}
}

int fg_loop_run(struct fg_loop *loop)
{
	struct epoll_event evs[128];

	loop->stop = false;
	while (!loop->stop) {
		int n = epoll_wait(loop->epfd, evs, 128, next_timeout_ms(loop));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (int i = 0; i < n && !loop->stop; i++) {
			int fd = (int)(uint32_t)evs[i].data.u64;
			uint64_t gen = evs[i].data.u64 >> 32;
			if (fd >= loop->nfds_cap)
				continue;
			struct fd_slot *s = &loop->fds[fd];
			if (!s->live || (s->gen & 0xffffffffu) != gen)
				continue;
			s->cb(loop, fd, evs[i].events, s->ctx);
			if (loop->soon_due) {
				loop->soon_due = false;
				run_due_timers(loop);
			}
		}
		run_due_timers(loop);
	}
	return 0;
}
