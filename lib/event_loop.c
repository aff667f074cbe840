/* event_loop.c — epoll + one-shot timers in lib/id_heap.c; see event_loop.h. */
#include "event_loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "id_heap.h"

struct fd_slot {
	fg_fd_cb cb;
	void *ctx;
	uint64_t gen;   /* bumped on del so a stale event in this batch is ignored */
	uint32_t events;
	uint64_t park_timer; /* a parked listener (fg_loop_accept_failed) */
	bool live;
};

/* A timer's slot: its index is its id in the heap, and the low half of the
 * id fg_loop_timer returns (plus one); the high half is the slot's
 * generation, bumped whenever the slot is freed, so an id kept after its
 * timer ran or was cancelled names nothing. */
enum timer_state { TIMER_FREE, TIMER_ARMED, TIMER_RUNNING };

struct timer {
	uint64_t when_ns;
	uint64_t seq;        /* when it was last armed: ties, and what a pass runs */
	fg_timer_cb cb;
	void *ctx;
	uint32_t gen;
	uint32_t next_free;  /* free list: 1 + the next free slot, 0 = end */
	enum timer_state state;
};

struct fg_loop {
	int epfd;
	bool stop;
	struct fd_slot *fds;
	int nfds_cap;
	struct timer *timers;  /* slots, timers_cap of them */
	uint32_t *heap, *pos;  /* the id_heap of armed slots, and their places */
	uint32_t n_armed, timers_cap;
	uint32_t free_head;    /* 1 + the first free slot, 0 = none */
	uint64_t next_seq;
	bool soon_due;         /* fg_loop_soon armed a timer: run timers after this callback */
	/* fg_loop_share: the lock every callback runs under, and the eventfd
	 * that wakes this loop's thread out of epoll_wait when another thread
	 * arms one of its timers earlier than the wait ends, or stops it */
	pthread_mutex_t *lock;
	int wake_fd;
	/* while its thread waits in epoll_wait (lock released): when that wait
	 * ends by itself; 0 = not waiting, or already woken */
	uint64_t waiting_until_ns;
	/* shared: how long its thread has held the lock and waited for it
	 * (fg_loop_lock_times), both written while holding it */
	uint64_t lock_held_ns, lock_wait_ns, lock_taken_ns;
	fg_unlocked_cb unlocked; /* fg_loop_on_unlocked */
	void *unlocked_ctx;
	/* fg_loop_asleep: from the lock given at a pass's end until its
	 * epoll_wait returns (read by other threads without any lock) */
	atomic_bool asleep;
};

/* The loop fg_loop_run runs on this thread (NULL outside one). */
static __thread struct fg_loop *current;

struct fg_loop *fg_loop_current(void)
{
	return current;
}

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
	loop->next_seq = 1;
	loop->wake_fd = -1;
	return loop;
}

void fg_loop_free(struct fg_loop *loop)
{
	if (!loop)
		return;
	close(loop->epfd);
	if (loop->wake_fd >= 0)
		close(loop->wake_fd);
	free(loop->fds);
	free(loop->timers);
	free(loop->heap);
	free(loop->pos);
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

static bool timer_before(uint32_t a, uint32_t b, const void *ctx)
{
	const struct timer *t = ((const struct fg_loop *)ctx)->timers;

	return t[a].when_ns < t[b].when_ns || (t[a].when_ns == t[b].when_ns && t[a].seq < t[b].seq);
}

static struct fg_idheap timer_heap(struct fg_loop *loop)
{
	return (struct fg_idheap){ loop->heap, loop->pos, &loop->n_armed, timer_before, loop };
}

static uint64_t timer_id(const struct fg_loop *loop, uint32_t slot)
{
	return (uint64_t)loop->timers[slot].gen << 32 | (slot + 1);
}

/* The slot `id` names, or NULL when its timer ran or was cancelled. */
static struct timer *timer_of(struct fg_loop *loop, uint64_t id, uint32_t *slot)
{
	uint64_t low = id & 0xffffffffu;

	if (!low || low > loop->timers_cap)
		return NULL;
	struct timer *t = &loop->timers[low - 1];
	if (t->state == TIMER_FREE || t->gen != (uint32_t)(id >> 32))
		return NULL;
	*slot = (uint32_t)(low - 1);
	return t;
}

/* Doubles the slots; every array grows before the capacity says so, so a
 * failure leaves the loop as it was. */
static int timers_grow(struct fg_loop *loop)
{
	uint32_t old = loop->timers_cap, cap = old ? old * 2 : 64;

	if (cap <= old)
		return -1;
	struct timer *t = realloc(loop->timers, (size_t)cap * sizeof(*t));
	if (!t)
		return -1;
	loop->timers = t;
	uint32_t *h = realloc(loop->heap, (size_t)cap * sizeof(*h));
	if (!h)
		return -1;
	loop->heap = h;
	uint32_t *p = realloc(loop->pos, (size_t)cap * sizeof(*p));
	if (!p)
		return -1;
	loop->pos = p;
	memset(t + old, 0, (size_t)(cap - old) * sizeof(*t));
	memset(p + old, 0, (size_t)(cap - old) * sizeof(*p));
	for (uint32_t i = cap; i > old; i--) {
		t[i - 1].next_free = loop->free_head;
		loop->free_head = i;
	}
	loop->timers_cap = cap;
	return 0;
}

static void timer_free(struct fg_loop *loop, uint32_t slot)
{
	struct timer *t = &loop->timers[slot];

	t->state = TIMER_FREE;
	t->gen++;
	t->cb = NULL;
	t->ctx = NULL;
	t->next_free = loop->free_head;
	loop->free_head = slot + 1;
}

/* Something due at `when_ns` (a timer armed or moved, or a stop: 0) from
 * a thread other than the loop's own, which waits in epoll_wait with a
 * timeout that does not know of it: woken when the wait would end later.
 * Once per wait; a loop that is not waiting reads its heap before it does. */
static void wake_if_foreign(struct fg_loop *loop, uint64_t when_ns)
{
	uint64_t one = 1;

	if (loop->wake_fd < 0 || !loop->waiting_until_ns || when_ns >= loop->waiting_until_ns)
		return;
	loop->waiting_until_ns = 0;
	/* EAGAIN: the counter is full, so a wake is pending anyway */
	if (write(loop->wake_fd, &one, sizeof(one)) < 0)
		return;
}

/* Arms a slot that is not in the heap (free-listed already, or running). */
static void timer_arm(struct fg_loop *loop, uint32_t slot, uint64_t when_ns)
{
	struct fg_idheap h = timer_heap(loop);
	struct timer *t = &loop->timers[slot];

	t->when_ns = when_ns;
	t->seq = loop->next_seq++;
	t->state = TIMER_ARMED;
	fg_idheap_insert(&h, slot);
	wake_if_foreign(loop, when_ns);
}

uint64_t fg_loop_timer_at(struct fg_loop *loop, uint64_t when_ns, fg_timer_cb cb, void *ctx)
{
	if (!loop->free_head && timers_grow(loop))
		return 0;
	uint32_t slot = loop->free_head - 1;
	struct timer *t = &loop->timers[slot];

	loop->free_head = t->next_free;
	t->cb = cb;
	t->ctx = ctx;
	timer_arm(loop, slot, when_ns);
	return timer_id(loop, slot);
}

uint64_t fg_loop_timer(struct fg_loop *loop, uint64_t after_ns, fg_timer_cb cb, void *ctx)
{
	uint64_t now = fg_now_ns();

	return fg_loop_timer_at(loop, after_ns > UINT64_MAX - now ? UINT64_MAX : now + after_ns, cb, ctx);
}

uint64_t fg_loop_soon(struct fg_loop *loop, fg_timer_cb cb, void *ctx)
{
	uint64_t id = fg_loop_timer(loop, 0, cb, ctx);

	if (id)
		loop->soon_due = true;
	return id;
}

bool fg_loop_timer_move(struct fg_loop *loop, uint64_t id, uint64_t when_ns)
{
	uint32_t slot;
	struct timer *t = timer_of(loop, id, &slot);

	if (!t)
		return false;
	if (t->state == TIMER_RUNNING) {
		timer_arm(loop, slot, when_ns);
		return true;
	}
	struct fg_idheap h = timer_heap(loop);
	t->when_ns = when_ns;
	t->seq = loop->next_seq++; /* moved into the past, it still waits for the next pass */
	fg_idheap_fix(&h, slot);
	wake_if_foreign(loop, when_ns);
	return true;
}

bool fg_loop_timer_due_by(struct fg_loop *loop, uint64_t id, uint64_t when_ns)
{
	uint32_t slot;
	struct timer *t = timer_of(loop, id, &slot);

	if (!t)
		return false;
	if (t->state == TIMER_ARMED && t->when_ns <= when_ns)
		return true;
	return fg_loop_timer_move(loop, id, when_ns);
}

void fg_loop_timer_cancel(struct fg_loop *loop, uint64_t id)
{
	uint32_t slot;
	struct timer *t = timer_of(loop, id, &slot);

	if (!t)
		return;
	if (t->state == TIMER_ARMED) {
		struct fg_idheap h = timer_heap(loop);
		fg_idheap_remove(&h, slot);
	}
	timer_free(loop, slot);
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
	wake_if_foreign(loop, 0);
}

static void woken(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	uint64_t n;
	(void)loop;
	(void)events;
	(void)ctx;

	if (read(fd, &n, sizeof(n)) < 0)
		return; /* EAGAIN: another pass read it first */
}

int fg_loop_share(struct fg_loop *loop, pthread_mutex_t *lock)
{
	if (!lock || loop->wake_fd >= 0) {
		loop->lock = lock; /* alone again (or another lock): the eventfd stays */
		return 0;
	}
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fg_loop_add(loop, fd, EPOLLIN, woken, NULL)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	loop->wake_fd = fd;
	loop->lock = lock;
	return 0;
}

/* The shared lock, timed: what a worker serialises is what its N-worker
 * speed-up is bounded by, measurable where the cores to show it are not. */
static void lock_take(struct fg_loop *loop)
{
	uint64_t asked = fg_now_ns();

	pthread_mutex_lock(loop->lock);
	loop->lock_taken_ns = fg_now_ns();
	loop->lock_wait_ns += loop->lock_taken_ns - asked;
}

static void lock_give(struct fg_loop *loop)
{
	if (loop->lock_taken_ns) /* 0: taken by a caller of its own, untimed */
		loop->lock_held_ns += fg_now_ns() - loop->lock_taken_ns;
	pthread_mutex_unlock(loop->lock);
}

void fg_loop_lock(struct fg_loop *loop)
{
	lock_take(loop);
}

bool fg_loop_unlock(struct fg_loop *loop)
{
	if (!loop->lock)
		return false;
	lock_give(loop);
	return true;
}

void fg_loop_lock_times(const struct fg_loop *loop, uint64_t *held_ns, uint64_t *wait_ns)
{
	*held_ns = loop->lock_held_ns;
	*wait_ns = loop->lock_wait_ns;
}

void fg_loop_on_unlocked(struct fg_loop *loop, fg_unlocked_cb cb, void *ctx)
{
	loop->unlocked = cb;
	loop->unlocked_ctx = ctx;
}

void *fg_loop_unlocked_ctx(const struct fg_loop *loop)
{
	return loop->unlocked_ctx;
}

bool fg_loop_asleep(const struct fg_loop *loop)
{
	return atomic_load(&loop->asleep);
}

void fg_loop_wake(struct fg_loop *loop)
{
	uint64_t one = 1;

	/* wake_fd is set once, before the loop's threads start; EAGAIN: a
	 * wake is pending anyway */
	if (loop->wake_fd >= 0 && write(loop->wake_fd, &one, sizeof(one)) < 0)
		return;
}

bool fg_loop_shared(const struct fg_loop *loop)
{
	return loop->lock != NULL;
}

static int next_timeout_ms(struct fg_loop *loop)
{
	if (!loop->n_armed)
		return 1000;
	uint64_t now = fg_now_ns(), when = loop->timers[loop->heap[0]].when_ns;
	if (when <= now)
		return 0;
	uint64_t ms = (when - now + 999999) / 1000000;
	return ms > 1000 ? 1000 : (int)ms;
}

/* Runs the timers due now that were armed before the pass began. A running
 * timer keeps its slot (fg_loop_timer_move re-arms it there) until its
 * callback returns; then it is freed unless re-armed or cancelled. */
static void run_due_timers(struct fg_loop *loop)
{
	uint64_t now = fg_now_ns(), first_new = loop->next_seq;
	struct fg_idheap h = timer_heap(loop);

	while (loop->n_armed) {
		uint32_t slot = loop->heap[0];
		struct timer *t = &loop->timers[slot];
		if (t->when_ns > now || t->seq >= first_new)
			break;
		fg_idheap_pop(&h);
		t->state = TIMER_RUNNING;
		uint32_t gen = t->gen;
		t->cb(loop, t->ctx);
		h = timer_heap(loop); /* the callback may have grown the arrays */
		t = &loop->timers[slot];
		if (t->gen == gen && t->state == TIMER_RUNNING)
			timer_free(loop, slot);
	}
}

int fg_loop_run(struct fg_loop *loop)
{
	struct epoll_event evs[128];

	struct fg_loop *outer = current;

	current = loop;
	loop->stop = false;
	while (!loop->stop) {
		int timeout = next_timeout_ms(loop);
		if (loop->lock) {
			/* no earlier than the first timer (the timeout is
			 * rounded up to the ms); only a thread that is not
			 * this one can see it set */
			loop->waiting_until_ns = fg_now_ns() + (uint64_t)timeout * 1000000ull;
			if (!loop->waiting_until_ns)
				loop->waiting_until_ns = 1;
			/* before the callback looks for work: what another
			 * thread leaves for it after that look finds it set */
			atomic_store(&loop->asleep, true);
			lock_give(loop);
			if (loop->unlocked && loop->unlocked(loop, loop->unlocked_ctx)) {
				/* held again: what it did may have armed timers
				 * earlier than the wait just computed */
				atomic_store(&loop->asleep, false);
				loop->waiting_until_ns = 0;
				run_due_timers(loop);
				continue;
			}
		}
		int n = epoll_wait(loop->epfd, evs, 128, timeout);
		int e = errno;
		if (loop->lock) {
			atomic_store(&loop->asleep, false);
			lock_take(loop);
			loop->waiting_until_ns = 0;
		}
		if (n < 0) {
			if (e == EINTR)
				continue;
			current = outer;
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
	current = outer;
	return 0;
}
