/* workers.c — agent.workers: the proxy's accept loops, one per thread; see
 * workers.h. Only accepting and the threads' lives are here: what a
 * connection does is proxy_client.c on whichever loop accepted it. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proxy/identity.h"
#include "agent/proxy/proxy_internal.h"
#include "agent/proxy/workers.h"

#define ACCEPT_BATCH 64

struct fg_worker {
	struct fg_workers *all;
	uint32_t index;
	struct fg_loop *loop;     /* worker 0: the agent's own */
	int listen_fd;            /* worker 0: px->listen_fd, closed by proxy.c */
	pthread_t thread;
	bool running;             /* its thread was created (and not joined) */
	bool stop;                /* asked to stop, maybe before its loop ran */
	uint64_t accepted;
	struct fg_send_queue sends; /* its loop's fg_loop_on_unlocked context */
};

struct fg_workers {
	struct fg_proxy *px;
	uint32_t n;
	bool shared;              /* n > 1: the loops share `lock` */
	pthread_mutex_t lock;
	struct fg_worker w[];
};

static void accept_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_worker *w = ctx;
	struct fg_proxy *px = w->all->px;
	(void)events;

	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int cfd = accept4(fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			int e = errno;
			if (e == EMFILE || e == ENFILE)
				fg_overload_log(px, e == EMFILE ? "process's fd limit (accept: EMFILE)"
								: "system's fd limit (accept: ENFILE)");
			if (fg_loop_accept_failed(loop, fd, e)) /* parks the listener on EMFILE */
				return;
			continue;
		}
		w->accepted++;
		fg_client_accept(px, loop, cfd, &peer, len);
	}
}

/* cgroup v2's cpu.max of this process's cgroup as CPUs (rounded up), or 0
 * when it sets no quota or cannot be read. */
static uint32_t cgroup_cpus(void)
{
	char line[4096], path[4200];
	FILE *f = fopen("/proc/self/cgroup", "r");
	uint32_t cpus = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max", line + 3);
		FILE *m = fopen(path, "r");
		char quota[32];
		unsigned long long period;
		if (m && fscanf(m, "%31s %llu", quota, &period) == 2 && strcmp(quota, "max") &&
		    period > 0) {
			double q = strtod(quota, NULL) / (double)period;
			cpus = q > 0 ? (uint32_t)ceil(q) : 0;
		}
		if (m)
			fclose(m);
		break;
	}
	fclose(f);
	return cpus;
}

uint32_t fg_workers_wanted(const struct fg_agent *a)
{
	cpu_set_t set;
	uint32_t n;

	if (a->workers)
		return a->workers;
	n = sched_getaffinity(0, sizeof(set), &set) ? 1 : (uint32_t)CPU_COUNT(&set);
	uint32_t quota = cgroup_cpus();
	if (quota && quota < n)
		n = quota;
	if (n > FG_AUTO_WORKERS_CAP)
		n = FG_AUTO_WORKERS_CAP;
	return n ? n : 1;
}

static void *worker_main(void *arg)
{
	struct fg_worker *w = arg;
	struct fg_workers *all = w->all;
	char name[16];

	snprintf(name, sizeof(name), "fg-worker-%u", w->index);
	pthread_setname_np(pthread_self(), name);
	fg_loop_lock(w->loop);
	if (!w->stop && fg_loop_run(w->loop)) {
		/* a worker whose loop failed would leave its share of the
		 * listener group unserved: the agent stops instead */
		fprintf(stderr, "fairgated: worker %u: epoll: %s; shutting down\n", w->index,
			strerror(errno));
		fg_loop_stop(all->px->st->loop);
	}
	fg_loop_unlock(w->loop);
	fg_sha256_thread_end();
	return NULL;
}

int fg_workers_start(struct fg_proxy *px, uint32_t n, char *err, size_t errlen)
{
	struct fg_loop *main_loop = px->st->loop;
	struct fg_workers *all = calloc(1, sizeof(*all) + n * sizeof(all->w[0]));

	if (!all) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	all->px = px;
	all->n = n;
	for (uint32_t i = 0; i < n; i++) {
		all->w[i].all = all;
		all->w[i].index = i;
		all->w[i].listen_fd = -1;
	}
	all->w[0].loop = main_loop;
	all->w[0].listen_fd = px->listen_fd;
	px->workers = all;
	if (fg_loop_add(main_loop, px->listen_fd, EPOLLIN, accept_cb, &all->w[0])) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		return -1;
	}
	if (n == 1)
		return 0;

	pthread_mutex_init(&all->lock, NULL);
	for (uint32_t i = 0; i < n; i++) {
		pthread_mutex_init(&all->w[i].sends.mu, NULL);
		fg_link_init(&all->w[i].sends.todo);
	}
	if (fg_loop_share(main_loop, &all->lock)) {
		snprintf(err, errlen, "agent.workers: eventfd: %s", strerror(errno));
		pthread_mutex_destroy(&all->lock);
		return -1;
	}
	all->w[0].sends.loop = main_loop;
	fg_loop_on_unlocked(main_loop, fg_proxy_send_deferred, &all->w[0].sends);
	fg_loop_lock(main_loop);
	all->shared = true;
	for (uint32_t i = 1; i < n; i++) {
		struct fg_worker *w = &all->w[i];
		w->loop = fg_loop_new();
		if (!w->loop || fg_loop_share(w->loop, &all->lock)) {
			snprintf(err, errlen, "agent.workers: worker %u: epoll: %s", i, strerror(errno));
			return -1;
		}
		w->sends.loop = w->loop;
		fg_loop_on_unlocked(w->loop, fg_proxy_send_deferred, &w->sends);
		w->listen_fd = fg_listen_tcp_sibling(px->listen_fd, err, errlen, "agent.workers");
		if (w->listen_fd < 0)
			return -1;
		if (fg_loop_add(w->loop, w->listen_fd, EPOLLIN, accept_cb, w)) {
			snprintf(err, errlen, "agent.workers: worker %u: epoll: %s", i, strerror(errno));
			return -1;
		}
		int e = pthread_create(&w->thread, NULL, worker_main, w);
		if (e) {
			snprintf(err, errlen, "agent.workers: worker %u: thread: %s", i, strerror(e));
			return -1;
		}
		w->running = true;
	}
	fprintf(stderr, "fairgated: %u workers, one SO_REUSEPORT listener each, sharing one lock\n", n);
	return 0;
}

void fg_workers_stop(struct fg_proxy *px)
{
	struct fg_workers *all = px->workers;

	if (!all || !all->shared)
		return;
	for (uint32_t i = 1; i < all->n; i++) {
		all->w[i].stop = true;
		if (all->w[i].loop)
			fg_loop_stop(all->w[i].loop);
	}
	/* the threads need the lock to see the stop and leave their loops */
	fg_loop_unlock(px->st->loop);
	for (uint32_t i = 1; i < all->n; i++)
		if (all->w[i].running) {
			pthread_join(all->w[i].thread, NULL);
			all->w[i].running = false;
		}
	fg_loop_lock(px->st->loop);
	for (uint32_t i = 1; i < all->n; i++) {
		struct fg_worker *w = &all->w[i];
		if (w->listen_fd >= 0) {
			fg_loop_del(w->loop, w->listen_fd);
			close(w->listen_fd);
			w->listen_fd = -1;
		}
	}
}

void fg_workers_free(struct fg_proxy *px)
{
	struct fg_workers *all = px->workers;

	if (!all)
		return;
	fg_workers_stop(px); /* a start that failed half-way */
	if (all->shared) {
		for (uint32_t i = 1; i < all->n; i++)
			fg_loop_free(all->w[i].loop);
		fg_loop_share(px->st->loop, NULL);
		fg_loop_on_unlocked(px->st->loop, NULL, NULL);
		pthread_mutex_unlock(&all->lock);
		pthread_mutex_destroy(&all->lock);
	} else if (all->n > 1) {
		/* failed before sharing: the loops made so far */
		for (uint32_t i = 1; i < all->n; i++)
			fg_loop_free(all->w[i].loop);
	}
	if (all->n > 1)
		for (uint32_t i = 0; i < all->n; i++)
			pthread_mutex_destroy(&all->w[i].sends.mu);
	free(all);
	px->workers = NULL;
}

uint32_t fg_workers_count(const struct fg_workers *w)
{
	return w ? w->n : 1;
}

uint64_t fg_workers_accepted(const struct fg_workers *w, uint32_t i)
{
	return w && i < w->n ? w->w[i].accepted : 0;
}

bool fg_workers_lock_times(const struct fg_workers *w, uint32_t i, uint64_t *held_ns,
			   uint64_t *wait_ns)
{
	if (!w || !w->shared || i >= w->n || !w->w[i].loop)
		return false;
	fg_loop_lock_times(w->w[i].loop, held_ns, wait_ns);
	return true;
}

bool fg_workers_send_counts(const struct fg_workers *w, uint32_t i, uint64_t *own,
			    uint64_t *for_others, uint64_t *handed_back)
{
	if (!w || !w->shared || i >= w->n || !w->w[i].loop)
		return false;
	const struct fg_send_queue *q = &w->w[i].sends;
	*own = atomic_load_explicit(&q->sent_own, memory_order_relaxed);
	*for_others = atomic_load_explicit(&q->sent_for_others, memory_order_relaxed);
	*handed_back = atomic_load_explicit(&q->handed_back, memory_order_relaxed);
	return true;
}
