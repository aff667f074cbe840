/* proxy_upstream.c — the engine side of the proxy: keep-alive connection
 * pools (the engine, and the long-context pool when one is configured),
 * forwarding an admitted request, relaying the response chunk by chunk (SSE
 * event by event, with the forced usage chunk hidden, first token and
 * output reported to the gateway as they stream); how the exchange ended
 * goes to proxy_settle.c. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/http/http_errors.h"
#include "agent/proxy/proxy_internal.h"

#define READ_CHUNK (64u << 10)

static void upstream_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx);
static void upstream_timer_cb(struct fg_loop *loop, void *ctx);

/* ---- pool ------------------------------------------------------------------ */

static void set_events(struct fg_upstream *u, uint32_t ev)
{
	if (ev == u->events)
		return; /* an epoll_ctl per request adds up */
	fg_loop_mod(u->loop, u->fd, ev);
	u->events = ev;
}

static bool off_queue(struct fg_upstream *u);

void fg_upstream_close(struct fg_upstream *u)
{
	struct fg_proxy *px = u->px;

	off_queue(u); /* closing: a request not sent is not sent */
	fg_loop_timer_cancel(u->loop, u->timer);
	fg_loop_del(u->loop, u->fd);
	close(u->fd);
	fg_link_del(&u->link);
	if (u->idle)
		u->pool->n_idle--;
	else
		px->n_busy--;
	fg_buf_free(&u->out);
	free(u);
}

void fg_pool_init(struct fg_pool *pool, const char *what)
{
	memset(pool, 0, sizeof(*pool));
	pool->what = what;
	fg_link_init(&pool->idle);
}

void fg_pool_drain(struct fg_pool *pool)
{
	while (!fg_link_empty(&pool->idle))
		fg_upstream_close(fg_container_of(pool->idle.next, struct fg_upstream, link));
}

int fg_pool_set(struct fg_proxy *px, struct fg_pool *pool, const struct fg_hostport *hp)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = 0;
	(void)px;

	if (hp->host[0] && fg_hostport_sockaddr(hp, &ss, &len))
		return -1;
	if (len != pool->addr_len || memcmp(&ss, &pool->addr, len)) {
		/* a new address: connections in use finish, pooled ones go */
		fg_pool_drain(pool);
		pool->addr = ss;
		pool->addr_len = len;
	}
	return 0;
}

/* An idle connection moves to LOOP: its fd and its timer leave the loop it
 * was on. -1 (nothing changed) when LOOP cannot take it. */
static int move_to_loop(struct fg_upstream *u, struct fg_loop *loop)
{
	uint64_t timer = fg_loop_timer_at(loop, UINT64_MAX, upstream_timer_cb, u);

	if (!timer)
		return -1;
	fg_loop_del(u->loop, u->fd);
	if (fg_loop_add(loop, u->fd, u->events, upstream_cb, u)) {
		fg_loop_timer_cancel(loop, timer);
		/* back where it was, or closed by the caller if even that fails */
		return fg_loop_add(u->loop, u->fd, u->events, upstream_cb, u) ? -2 : -1;
	}
	fg_loop_timer_cancel(u->loop, u->timer);
	u->timer = timer;
	u->loop = loop;
	u->px->metrics.engine_moves++;
	return 0;
}

/* The most recently used idle connection for a client on LOOP. With
 * workers an exchange's engine connection is on its client's loop, so one
 * thread owns both (what lets a worker send and relay without the shared
 * lock, docs/design.md "Workers"): one of the few most recent on LOOP is
 * taken as it is, else the most recent moves to LOOP (two epoll_ctl). */
#define POOL_SAME_LOOP_LOOKS 8
static struct fg_upstream *pool_get(struct fg_pool *pool, struct fg_loop *loop)
{
	struct fg_link *l = pool->idle.next;
	struct fg_upstream *u = NULL;

	for (int i = 0; l != &pool->idle && i < POOL_SAME_LOOP_LOOKS; i++, l = l->next) {
		struct fg_upstream *v = fg_container_of(l, struct fg_upstream, link);
		if (v->loop == loop) {
			u = v;
			break;
		}
	}
	if (!u && !fg_link_empty(&pool->idle)) {
		u = fg_container_of(pool->idle.next, struct fg_upstream, link);
		int moved = move_to_loop(u, loop);
		if (moved == -2)
			fg_upstream_close(u); /* registered nowhere: unusable */
		if (moved)
			return NULL; /* the caller connects anew */
	}
	if (!u)
		return NULL;
	struct fg_proxy *px = u->px;
	fg_link_del(&u->link);
	pool->n_idle--;
	u->idle = false;
	u->reused = true;
	fg_link_add(&px->busy, &u->link);
	px->n_busy++;
	return u;
}

static void pool_put(struct fg_upstream *u)
{
	struct fg_proxy *px = u->px;

	u->client = NULL;
	u->idle = true;
	u->paused = false;
	u->idle_since_ns = fg_now_ns();
	fg_link_del(&u->link);
	px->n_busy--;
	fg_link_add(&u->pool->idle, &u->link);
	u->pool->n_idle++;
	fg_upstream_timer_due(u);
	set_events(u, EPOLLIN | EPOLLRDHUP); /* to notice the engine closing it */
	if (u->pool->n_idle > FG_POOL_MAX_IDLE)
		fg_upstream_close(fg_container_of(u->pool->idle.prev, struct fg_upstream, link));
}

/* Transparent mode: upstream connections take a source port that steer
 * exempts, or sk_lookup would hand them straight back to us. */
static int bind_exempt_port(struct fg_proxy *px, struct fg_pool *pool, int fd)
{
	if (!px->exempt_lo)
		return 0;
	unsigned span = (unsigned)px->exempt_hi - px->exempt_lo + 1;
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	for (unsigned i = 0; i < span; i++) {
		uint16_t port = (uint16_t)(px->exempt_lo + (px->exempt_next++ % span));
		struct sockaddr_storage ss = { .ss_family = pool->addr.ss_family };
		socklen_t len;
		if (ss.ss_family == AF_INET6) {
			((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
			len = sizeof(struct sockaddr_in6);
		} else {
			((struct sockaddr_in *)&ss)->sin_port = htons(port);
			len = sizeof(struct sockaddr_in);
		}
		if (!bind(fd, (struct sockaddr *)&ss, len))
			return 0;
		if (errno != EADDRINUSE)
			return -1;
	}
	errno = EADDRNOTAVAIL;
	return -1;
}

static int pool_socket(struct fg_proxy *px, struct fg_pool *pool, bool *in_progress)
{
	if (!pool->addr_len) {
		errno = EDESTADDRREQ;
		return -1;
	}
	int fd = socket(pool->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int rc = bind_exempt_port(px, pool, fd) ? -1
		 : connect(fd, (struct sockaddr *)&pool->addr, pool->addr_len);
	if (rc && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	*in_progress = rc != 0;
	px->metrics.engine_connects++;
	return fd;
}

int fg_pool_socket(struct fg_proxy *px, struct fg_pool *pool)
{
	bool in_progress;

	return pool_socket(px, pool, &in_progress);
}

/* On LOOP, the loop of the client it is made for (pool_get moves it to
 * the loop of a later client of another worker). */
static struct fg_upstream *connect_new(struct fg_proxy *px, struct fg_loop *loop,
				       struct fg_pool *pool)
{
	bool in_progress;
	int fd = pool_socket(px, pool, &in_progress);

	if (fd < 0)
		return NULL;
	struct fg_upstream *u = calloc(1, sizeof(*u));
	/* its one timer until it closes, armed when an exchange starts on it */
	uint64_t timer = u ? fg_loop_timer_at(loop, UINT64_MAX, upstream_timer_cb, u) : 0;
	if (!timer || fg_loop_add(loop, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, upstream_cb, u)) {
		fg_loop_timer_cancel(loop, timer);
		free(u);
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	u->timer = timer;
	u->loop = loop;
	u->px = px;
	u->pool = pool;
	u->fd = fd;
	u->events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
	u->connecting = in_progress;
	fg_link_add(&px->busy, &u->link);
	px->n_busy++;
	return u;
}

/* ---- forwarding -------------------------------------------------------------- */

/* The body as it goes to the engine: the rewrite's, or the client's. */
static size_t forwarded_len(const struct fg_exchange *x)
{
	return x->fwd.head ? x->fwd.len : fg_buf_used(&x->body);
}

static int build_request(struct fg_client *c, struct fg_upstream *u)
{
	struct fg_exchange *x = c->x;
	const struct fg_hdrs *h = &x->hdrs;
	struct fg_buf *o = &u->out;
	size_t body_len = forwarded_len(x);
	bool has_host = false;
	int rc = 0;

	fg_buf_reset(o);
	rc |= fg_buf_append_str(o, http_method_str(c->parser.method));
	rc |= fg_buf_append(o, " ", 1);
	rc |= fg_buf_append(o, h->raw.data + x->url, x->url_len);
	rc |= fg_buf_append_str(o, " HTTP/1.1\r\n");
	for (uint32_t i = 0; i < h->n; i++) {
		/* the tenant's credentials stop here: a process that takes the
		 * engine's port must learn no key nor session (identify() reads
		 * the tenant header and Authorization) */
		if (fg_hop_by_hop(h, i) || fg_hdr_is(h, i, FG_TENANT_HEADER) ||
		    fg_hdr_credential(h, i))
			continue;
		has_host |= fg_hdr_is(h, i, "host");
		rc |= fg_buf_append(o, h->raw.data + h->h[i].name, h->h[i].name_len);
		rc |= fg_buf_append(o, ": ", 2);
		rc |= fg_buf_append(o, h->raw.data + h->h[i].value, h->h[i].value_len);
		rc |= fg_buf_append(o, "\r\n", 2);
	}
	if (!has_host)
		rc |= fg_buf_append_str(o, "Host: engine\r\n");
	rc |= fg_buf_append_str(o, c->px->engine_auth);
	if (x->tenant) {
		rc |= fg_buf_append_str(o, FG_TENANT_HEADER ": ");
		rc |= fg_buf_append_str(o, x->tenant->name);
		rc |= fg_buf_append(o, "\r\n", 2);
	}
	if (body_len || c->parser.method == HTTP_POST || c->parser.method == HTTP_PUT ||
	    c->parser.method == HTTP_PATCH) {
		rc |= fg_buf_append_str(o, "Content-Length: ");
		rc |= fg_buf_append_uint(o, body_len, 10);
		rc |= fg_buf_append(o, "\r\n", 2);
	}
	rc |= fg_buf_append(o, "\r\n", 2);
	return rc ? -1 : 0;
}

/* What is left of the body from `sent` on, as iovecs: the rewrite's head
 * and the client's bytes from where they are, or the body as it came. */
static int body_iov(const struct fg_exchange *x, size_t sent, struct iovec *iov)
{
	char *b = (char *)fg_buf_head(&x->body);
	struct iovec all[1 + FG_FWD_PARTS];
	int n = 0, m = 0;

	if (x->fwd.head) {
		all[n++] = (struct iovec){ x->fwd.head, x->fwd.head_len };
		for (uint32_t k = 0; k < x->fwd.n; k++)
			all[n++] = (struct iovec){ b + x->fwd.part[k].from,
						   x->fwd.part[k].to - x->fwd.part[k].from };
	} else {
		all[n++] = (struct iovec){ b, fg_buf_used(&x->body) };
	}
	for (int i = 0; i < n; i++) {
		if (sent >= all[i].iov_len) {
			sent -= all[i].iov_len;
			continue;
		}
		iov[m++] = (struct iovec){ (char *)all[i].iov_base + sent, all[i].iov_len - sent };
		sent = 0;
	}
	return m;
}

/* Send what is left of head + body; 1 = done, 0 = later, -1 = failed.
 * Touches only u and its exchange's body: it runs without the workers'
 * lock (upstream_cb), so no loop call here (upstream_send sets events). */
static int send_some(struct fg_upstream *u)
{
	struct fg_exchange *x = u->client->x;

	for (;;) {
		size_t head_left = fg_buf_used(&u->out);
		struct iovec iov[2 + FG_FWD_PARTS];
		int n = 0;
		if (head_left)
			iov[n++] = (struct iovec){ fg_buf_head(&u->out), head_left };
		n += body_iov(x, u->body_sent, iov + n);
		if (!n)
			return 1;
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(u->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		}
		size_t from_head = (size_t)w < head_left ? (size_t)w : head_left;
		fg_buf_consume(&u->out, from_head);
		if (!fg_buf_used(&u->out))
			fg_buf_free(&u->out); /* a pooled connection keeps no head */
		u->body_sent += (size_t)w - from_head;
	}
}

static int sent_events(struct fg_upstream *u, int rc)
{
	if (rc >= 0)
		set_events(u, EPOLLIN | EPOLLRDHUP | (rc ? 0 : EPOLLOUT));
	return rc;
}

static int upstream_send(struct fg_upstream *u)
{
	return sent_events(u, send_some(u));
}

/* With workers, what is left of a request at EPOLLOUT (upstream_cb) is
 * sent by its owner without the shared lock when at least this much:
 * below it, letting go of the lock and taking it back costs more than the
 * copy into the socket. A request no send queue takes (defer_send) waits
 * for EPOLLOUT the same way when this large. */
#define SEND_ALONE_MIN (32u << 10)

static bool send_alone(const struct fg_upstream *u)
{
	size_t body = forwarded_len(u->client->x);
	size_t left = fg_buf_used(&u->out) + (body > u->body_sent ? body - u->body_sent : 0);

	return left >= SEND_ALONE_MIN && fg_loop_shared(u->loop) && u->loop == u->client->loop;
}

/* On u's own loop: the send, without the lock when send_alone. Alone, no
 * other thread touches the client or u (the one thread that owns both is
 * this one; the reload's pull-in skips a client that is alone), and the
 * send reads only u and the exchange's body. */
static int send_on_own_loop(struct fg_upstream *u)
{
	struct fg_client *c = u->client;

	if (!send_alone(u) || !fg_client_go_alone(c))
		return upstream_send(u);
	int rc = send_some(u), e = errno;
	fg_client_back(c);
	errno = e;
	return sent_events(u, rc);
}

static void fail(struct fg_upstream *u, int status, const char *code, const char *why,
		 bool dead_conn);

/* ---- send queues ------------------------------------------------------------ */

/* With workers, a request dispatched to an engine connection already
 * connected goes on the send queue of the connection's loop (its
 * client's), and is sent after a pass, without the lock: on loopback a
 * send is most of the engine side's CPU, as the kernel delivers it to the
 * engine's socket within the call.
 * - Dispatched by the owner itself (admitted in the client's own callback,
 *   or after a settle on the same worker), or by another worker while the
 *   owner runs or waits for the lock: the owner sends it at the end of
 *   that pass (fg_proxy_send_deferred), in the same wakeup.
 * - Dispatched by another worker (its pump, after a settle there) while
 *   the owner is past its pass and may sleep (fg_loop_asleep): the
 *   dispatcher sends it after its own pass (send_for_others), as waking
 *   the owner for it costs a context switch (measured: 10-15% more CPU a
 *   request) and sending it under the lock held the lock for the send
 *   (~1.8 us a small request). Whichever of the two takes it off the
 *   queue first (under the queue's mutex) sends it.
 * While a request is queued or being sent, the owner's thread touches
 * neither its connection nor its client's exchange without off_queue
 * first: a request still queued is taken back (and sent there, under the
 * lock, by an owner going on with the connection: rare, as nothing comes
 * from the engine before the request), one another worker is sending is
 * waited out (SEND_LENT: that worker holds no lock while it sends, and
 * lends one request at a time, so the wait is one send), and if that send
 * did not all go, the request is back on the queue and taken back in
 * turn. A worker that sends for another stops at the first send that does
 * not all go: it goes back on the owner's queue, and the owner is woken
 * to finish it, or fail it, under the lock. No other thread touches a
 * connection or a client in CL_UPSTREAM but the reload's timer pull-in,
 * which reads neither u->out nor what the send writes; whatever of u the
 * dispatcher sets is set before it is queued. */

static struct fg_send_queue *send_queue_of(const struct fg_upstream *u)
{
	return fg_loop_shared(u->loop) ? fg_loop_unlocked_ctx(u->loop) : NULL;
}

/* u->send_state: SEND_QUEUED and SEND_LENT are entered under q->mu only;
 * SEND_LENT -> SEND_NONE (a lender's send that all went) is the one
 * change without it. So, holding the shared lock (nobody else queues u
 * then), an owner that reads SEND_NONE knows nobody will touch u's send
 * until it queues it again. */
enum { SEND_NONE = 0, SEND_QUEUED, SEND_LENT };

static void enqueue(struct fg_send_queue *q, struct fg_upstream *u) /* q->mu held */
{
	fg_link_add_tail(&q->todo, &u->send_link);
	q->n++;
	atomic_store(&u->send_state, SEND_QUEUED);
}

/* u off q (q->mu held), its send now `to`'s: SEND_NONE for the owner,
 * SEND_LENT for a worker that is not */
static void dequeue(struct fg_send_queue *q, struct fg_upstream *u, int to)
{
	fg_link_del(&u->send_link);
	q->n--;
	atomic_store(&u->send_state, to);
}

/* The owner's thread, holding the lock, before it touches u or its
 * client's exchange: u's request off its queue if it is there (true: the
 * caller sends it, or drops it with u), after waiting out another
 * worker's send of it, which may end with it back on the queue. */
static bool off_queue(struct fg_upstream *u)
{
	bool was = false;
	int st;

	while ((st = atomic_load(&u->send_state)) != SEND_NONE) {
		if (st == SEND_LENT) {
			sched_yield(); /* the sender holds no lock: one send */
			continue;
		}
		struct fg_send_queue *q = send_queue_of(u);
		pthread_mutex_lock(&q->mu);
		if (atomic_load(&u->send_state) == SEND_QUEUED) {
			dequeue(q, u, SEND_NONE);
			was = true;
		}
		pthread_mutex_unlock(&q->mu);
	}
	return was;
}

/* The owner took u's request back off its queue to go on with u: sent
 * now, under the lock. true: it failed, and u is gone. */
static bool send_taken_back(struct fg_upstream *u)
{
	int rc = upstream_send(u);

	if (rc < 0) {
		fail(u, 502, "engine_error", strerror(errno), true);
		return true;
	}
	u->body_sent_all = rc == 1;
	return false;
}

static bool can_defer(const struct fg_upstream *u)
{
	return !u->connecting && u->loop == u->client->loop && send_queue_of(u);
}

/* Queued for its owner, or for this thread to send after its pass when
 * the owner may sleep; false: not queued (sent here, under the lock). */
static bool defer_send(struct fg_upstream *u)
{
	struct fg_send_queue *q = send_queue_of(u);
	struct fg_loop *here = fg_loop_current();
	struct fg_send_queue *mine = here && fg_loop_shared(here) ? fg_loop_unlocked_ctx(here) : NULL;

	if (here != u->loop && !mine)
		return false;
	pthread_mutex_lock(&q->mu);
	enqueue(q, u);
	pthread_mutex_unlock(&q->mu);
	if (here == u->loop || !fg_loop_asleep(u->loop))
		return true;
	for (uint32_t i = 0; i < mine->n_help; i++)
		if (mine->help[i] == q)
			return true;
	mine->help[mine->n_help++] = q; /* one per other loop: at most FG_MAX_WORKERS */
	return true;
}

/* Other loops' requests this thread dispatched while their threads may
 * sleep, sent after its pass without any lock (before it takes the lock
 * again: an owner holding it may be waiting in off_queue for one). One at
 * a time, each lent only while it goes, so an owner waits for one send at
 * most; no more than its queue held when this began (the owner may add
 * its own meanwhile, which it sends itself), and none after one that did
 * not all go: that one is handed back, and the owner woken to finish it
 * and the rest under the lock. */
static void send_for_others(struct fg_send_queue *mine)
{
	for (uint32_t i = 0; i < mine->n_help; i++) {
		struct fg_send_queue *q = mine->help[i];

		pthread_mutex_lock(&q->mu);
		uint32_t left = q->n;
		pthread_mutex_unlock(&q->mu);
		while (left--) {
			pthread_mutex_lock(&q->mu);
			struct fg_upstream *u = fg_link_empty(&q->todo) ? NULL
					      : fg_container_of(q->todo.next, struct fg_upstream, send_link);
			if (u)
				dequeue(q, u, SEND_LENT);
			pthread_mutex_unlock(&q->mu);
			if (!u)
				break; /* its owner took the rest */
			int rc = send_some(u);
			atomic_fetch_add_explicit(&mine->sent_for_others, 1, memory_order_relaxed);
			if (rc == 1) {
				u->body_sent_all = true;
				atomic_store(&u->send_state, SEND_NONE); /* its owner's again: not touched after */
				continue;
			}
			/* in part, or failed: the owner finishes it (its send from
			 * body_sent on fails again, and fail() runs under the lock) */
			atomic_fetch_add_explicit(&mine->handed_back, 1, memory_order_relaxed);
			pthread_mutex_lock(&q->mu);
			enqueue(q, u);
			pthread_mutex_unlock(&q->mu);
			fg_loop_wake(q->loop);
			break;
		}
	}
	mine->n_help = 0;
}

bool fg_proxy_send_deferred(struct fg_loop *loop, void *ctx)
{
	struct fg_send_queue *q = ctx;
	struct fg_link todo, left;

	send_for_others(q);
	fg_link_init(&todo);
	fg_link_init(&left);
	pthread_mutex_lock(&q->mu);
	while (!fg_link_empty(&q->todo)) {
		struct fg_upstream *u = fg_container_of(q->todo.next, struct fg_upstream, send_link);
		dequeue(q, u, SEND_NONE);
		fg_link_add_tail(&todo, &u->send_link);
	}
	pthread_mutex_unlock(&q->mu);
	while (!fg_link_empty(&todo)) {
		struct fg_upstream *u = fg_container_of(todo.next, struct fg_upstream, send_link);
		fg_link_del(&u->send_link);
		int rc = send_some(u);
		atomic_fetch_add_explicit(&q->sent_own, 1, memory_order_relaxed);
		if (rc == 1) {
			u->body_sent_all = true;
			continue;
		}
		u->send_errno = rc < 0 ? errno : 0;
		fg_link_add_tail(&left, &u->send_link);
	}
	if (fg_link_empty(&left))
		return false;
	/* sent in part (the rest at EPOLLOUT) or failed: under the lock */
	fg_loop_lock(loop);
	while (!fg_link_empty(&left)) {
		struct fg_upstream *u = fg_container_of(left.next, struct fg_upstream, send_link);
		fg_link_del(&u->send_link);
		if (u->send_errno)
			fail(u, 502, "engine_error", strerror(u->send_errno), true);
		else
			sent_events(u, 0);
	}
	return true;
}

static int start_exchange(struct fg_client *c, struct fg_upstream *u)
{
	u->client = c;
	u->body_sent = 0;
	u->got_bytes = false;
	u->paused = false;
	u->fast = false;
	c->x->up = u;
	c->state = CL_UPSTREAM;
	c->last_progress_ns = fg_now_ns();
	http_parser_init(&u->parser, HTTP_RESPONSE);
	u->parser.data = u;
	u->deadline_ns = fg_now_ns() + (u->connecting ? FG_CONNECT_TIMEOUT_NS : c->px->upstream_ns);
	fg_upstream_timer_due(u);
	if (build_request(c, u))
		return -1;
	u->body_sent_all = false;
	if (can_defer(u)) {
		set_events(u, EPOLLIN | EPOLLRDHUP); /* EPOLLOUT only if it does not all go */
		if (defer_send(u))
			return 0;
	}
	if (u->connecting || send_alone(u)) {
		/* connected, or a request its owner sends without the lock:
		 * upstream_cb on u's loop, at EPOLLOUT */
		set_events(u, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
		return 0;
	}
	int rc = upstream_send(u);
	if (rc < 0)
		return -1;
	u->body_sent_all = rc == 1;
	return 0;
}

static void refuse_unavailable(struct fg_client *c, const char *why)
{
	char msg[256];

	c->px->metrics.engine_failures++;
	snprintf(msg, sizeof(msg), "the inference engine is unavailable: %s", why);
	fg_client_error(c, 503, "server_error", "engine_unavailable", NULL, msg,
			"Retry-After: 1\r\n");
}

static int dispatch(struct fg_client *c, bool fresh)
{
	struct fg_proxy *px = c->px;
	struct fg_pool *pool = c->x->long_ctx ? &px->long_pool : &px->engine;
	struct fg_upstream *u = fresh ? NULL : pool_get(pool, c->loop);

	if (!u)
		u = connect_new(px, c->loop, pool);
	if (!u) {
		refuse_unavailable(c, strerror(errno));
		return -1;
	}
	if (start_exchange(c, u)) {
		bool retry = u->reused && !c->x->retried;
		c->x->up = NULL;
		u->client = NULL;
		fg_upstream_close(u);
		if (retry) {
			c->x->retried = true;
			px->metrics.engine_retries++;
			return dispatch(c, true);
		}
		refuse_unavailable(c, "could not send the request");
		return -1;
	}
	return 0;
}

int fg_proxy_dispatch(struct fg_client *c)
{
	if (dispatch(c, false))
		return -1;
	if (c->x->reserved)
		fg_sched_sent(c);
	return 0;
}

/* ---- response relay ------------------------------------------------------------ */

static struct fg_upstream *up_of(http_parser *p)
{
	return p->data;
}

static int emit(struct fg_client *c, const char *p, size_t n)
{
	struct fg_exchange *x = c->x;
	int rc = 0;

	if (!n)
		return 0; /* a zero-size chunk would end the response */
	if (x->resp_chunked) {
		rc |= fg_buf_append_uint(&c->out, n, 16);
		rc |= fg_buf_append(&c->out, "\r\n", 2);
	}
	rc |= fg_buf_append(&c->out, p, n);
	if (x->resp_chunked)
		rc |= fg_buf_append(&c->out, "\r\n", 2);
	x->delivered_bytes += n;
	return rc ? -1 : 0;
}

static int on_r_field(http_parser *p, const char *at, size_t len)
{
	return fg_hdrs_on_field(&up_of(p)->client->x->rhdrs, at, len);
}

static int on_r_value(http_parser *p, const char *at, size_t len)
{
	return fg_hdrs_on_value(&up_of(p)->client->x->rhdrs, at, len);
}

/* The engine's count of a stream's prompt, at its first chunk: a prompt
 * that breaks the tier's max_context or the tenant's KV cap (the estimate
 * let it through) ends the stream there. */
static bool stream_prompt_known(void *ctx, double prompt_tokens)
{
	struct fg_client *c = ctx;
	struct fg_exchange *x = c->x;

	if (!x->reserved)
		return true;
	struct fg_gw_decision d = fg_gw_prompt_known(c->px->gw, &x->gwr, prompt_tokens, fg_now_ns());
	if (d.outcome == FG_GW_QUEUED)
		return true;
	bool kv = d.outcome == FG_GW_KV_NEVER;
	x->cut_off = true;
	x->cut_outcome = kv ? FG_OUT_KV_NEVER : FG_OUT_CONTEXT_EXCEEDED;
	snprintf(x->cut_code, sizeof(x->cut_code), "%s",
		 kv ? "kv_cache_cap_exceeded" : "context_length_exceeded");
	snprintf(x->cut_reason, sizeof(x->cut_reason), "%s", d.reason);
	return false;
}

/* A stream the gateway ends: the client gets an error event in OpenAI's
 * shape and the end of the stream (its last chunk when chunked). */
static int end_stream_with_error(struct fg_client *c, const char *type, const char *code,
				 const char *param, const char *message)
{
	struct fg_exchange *x = c->x;
	char *err = fg_error_json(type, code, param, message);
	struct fg_buf ev = { 0 };
	int rc = !err || fg_buf_printf(&ev, "data: %s\n\ndata: [DONE]\n\n", err) ? -1 : 0;

	free(err);
	if (!rc)
		rc = emit(c, fg_buf_head(&ev), fg_buf_used(&ev));
	fg_buf_free(&ev);
	if (x->resp_chunked)
		rc |= fg_buf_append(&c->out, "0\r\n\r\n", 5);
	x->resp_done = true;
	return rc;
}

/* The stream was stopped at its first chunk; the engine's connection is
 * closed (it stops generating). */
static int end_cut_stream(struct fg_client *c)
{
	struct fg_exchange *x = c->x;

	return end_stream_with_error(c, "invalid_request_error", x->cut_code,
				     x->api == FG_API_CHAT ? "messages" : "prompt", x->cut_reason);
}

static bool is_event_stream(const struct fg_hdrs *h)
{
	size_t len;
	const char *v = fg_hdrs_get(h, "content-type", &len);

	return v && len >= 17 && !strncasecmp(v, "text/event-stream", 17);
}

/* The engine's response head is complete (from http_parser, or from
 * fg_resp_head_fast): the client's head goes out. content_length:
 * ULLONG_MAX when there is none. */
static int response_head(struct fg_client *c, int status, bool chunked, uint64_t content_length)
{
	struct fg_exchange *x = c->x;
	const struct fg_hdrs *h = &x->rhdrs;
	struct fg_buf *o = &c->out;
	bool head = c->parser.method == HTTP_HEAD;
	int rc = 0;

	x->status = status;
	if (x->status < 200)
		return 0; /* informational: the real head follows */
	bool client11 = c->parser.http_major > 1 ||
			(c->parser.http_major == 1 && c->parser.http_minor >= 1);
	bool has_len = !chunked && content_length != ULLONG_MAX;
	x->resp_no_body = head || x->status == 204 || x->status == 304;
	bool chunks = x->api == FG_API_CHAT || x->api == FG_API_COMPLETIONS;
	x->sse = !x->resp_no_body && x->info.stream && x->status == 200 && is_event_stream(h) &&
		 (chunks || x->api == FG_API_RESPONSES);
	if (x->sse && chunks) {
		fg_sse_init(&x->sse_state, FG_SSE_CHUNKS, !x->info.client_wants_usage,
			    !x->info.client_wants_continuous);
		if (x->reserved) {
			x->sse_state.on_prompt = stream_prompt_known;
			x->sse_state.ctx = c;
		}
	} else if (x->sse) {
		fg_sse_init(&x->sse_state, FG_SSE_RESPONSES, false, false);
	} else if (x->reserved && c->alone) {
		x->first_token_due = true; /* told to the gateway once the lock is back (upstream_recv) */
	} else if (x->reserved) {
		fg_sched_first_token(c); /* a whole answer (or an error): the engine is done with it */
	}

	rc |= fg_buf_append_str(o, "HTTP/1.1 ");
	rc |= fg_buf_append_uint(o, (uint64_t)x->status, 10);
	rc |= fg_buf_append(o, " ", 1);
	rc |= fg_buf_append_str(o, http_status_str((enum http_status)x->status));
	rc |= fg_buf_append(o, "\r\n", 2);
	for (uint32_t i = 0; i < h->n; i++) {
		bool len_hdr = fg_hdr_is(h, i, "content-length");
		if (fg_hop_by_hop(h, i) && !(len_hdr && x->resp_no_body))
			continue;
		rc |= fg_buf_append(o, h->raw.data + h->h[i].name, h->h[i].name_len);
		rc |= fg_buf_append(o, ": ", 2);
		rc |= fg_buf_append(o, h->raw.data + h->h[i].value, h->h[i].value_len);
		rc |= fg_buf_append(o, "\r\n", 2);
	}
	if (x->resp_no_body) {
		/* nothing to frame */
	} else if (!x->sse && has_len) {
		rc |= fg_buf_append_str(o, "Content-Length: ");
		rc |= fg_buf_append_uint(o, content_length, 10);
		rc |= fg_buf_append(o, "\r\n", 2);
	} else if (client11) {
		x->resp_chunked = true;
		rc |= fg_buf_append_str(o, "Transfer-Encoding: chunked\r\n");
	} else {
		x->resp_until_close = true;
	}
	if (!c->keep_alive || x->resp_until_close)
		rc |= fg_buf_append_str(o, "Connection: close\r\n");
	else if (!client11)
		rc |= fg_buf_append_str(o, "Connection: keep-alive\r\n");
	rc |= fg_buf_append(o, "\r\n", 2);
	x->head_sent = true;
	if (rc)
		return -1;
	return head ? 1 : 0; /* 1: a HEAD response has no body whatever it says */
}

static int on_r_headers(http_parser *p)
{
	return response_head(up_of(p)->client, p->status_code, p->flags & F_CHUNKED,
			     p->content_length);
}

static int on_r_body(http_parser *p, const char *at, size_t len)
{
	struct fg_client *c = up_of(p)->client;
	struct fg_exchange *x = c->x;

	if (x->status < 200)
		return 0;
	if (x->sse) {
		struct fg_buf *scratch = &c->px->scratch;
		fg_buf_reset(scratch);
		if (fg_sse_feed(&x->sse_state, at, len, scratch))
			return -1;
		/* output so far (continuous usage, content events ~ tokens);
		 * usage at the end corrects the fair queue's charge */
		if (x->reserved && x->sse_state.content_events)
			fg_sched_output(c, fg_sse_output(&x->sse_state));
		if (emit(c, fg_buf_head(scratch), fg_buf_used(scratch)))
			return -1;
		if (x->sse_state.stopped && x->cut_off && !x->resp_done) {
			if (end_cut_stream(c))
				return -1;
			http_parser_pause(p, 1);
		}
		return 0;
	}
	if (x->reserved && !x->resp_copy_overflow) {
		if (fg_buf_used(&x->resp_copy) + len > FG_RESP_COPY_MAX) {
			x->resp_copy_overflow = true;
			fg_buf_free(&x->resp_copy);
		} else if (fg_buf_append(&x->resp_copy, at, len)) {
			return -1;
		}
	}
	return emit(c, at, len);
}

static int on_r_complete(http_parser *p)
{
	struct fg_client *c = up_of(p)->client;
	struct fg_exchange *x = c->x;
	int rc = 0;

	if (x->status < 200) {
		fg_hdrs_reset(&x->rhdrs);
		return 0;
	}
	if (x->sse) {
		struct fg_buf *scratch = &c->px->scratch;
		fg_buf_reset(scratch);
		rc |= fg_sse_finish(&x->sse_state, scratch);
		rc |= emit(c, fg_buf_head(scratch), fg_buf_used(scratch));
	}
	if (x->resp_chunked)
		rc |= fg_buf_append(&c->out, "0\r\n\r\n", 5);
	x->resp_done = true;
	http_parser_pause(p, 1);
	return rc ? -1 : 0;
}

static const http_parser_settings resp_settings = {
	.on_header_field = on_r_field,
	.on_header_value = on_r_value,
	.on_headers_complete = on_r_headers,
	.on_body = on_r_body,
	.on_message_complete = on_r_complete,
};

static enum fg_outcome outcome_of(int status)
{
	if (status >= 200 && status < 400)
		return FG_OUT_OK;
	return status < 500 ? FG_OUT_ENGINE_REJECTED : FG_OUT_ENGINE_ERROR;
}

/* The response is complete: the connection goes back to the pool when the
 * engine keeps it alive, the bucket is settled, the client moves on. */
static void finish(struct fg_upstream *u, bool reusable)
{
	struct fg_client *c = u->client;

	/* a head read by fg_resp_head_fast is HTTP/1.1 without Connection; a
	 * stream cut short still has the engine writing on it */
	reusable = reusable && !c->x->cut_off && (u->fast || http_should_keep_alive(&u->parser));
	c->x->up = NULL;
	if (reusable)
		pool_put(u);
	else
		fg_upstream_close(u);
	/* the answer leaves first: settling (a usage parse) never delays it,
	 * and nothing else runs before the books are closed; with workers
	 * the send and the usage parse run without the shared lock */
	if (fg_buf_used(&c->out) || (c->x->reserved && !c->x->usage_read)) {
		bool alone = fg_client_go_alone(c);
		fg_client_send_early(c);
		if (c->x->reserved && !c->x->usage_read)
			fg_exchange_read_usage(c->x);
		if (alone)
			fg_client_back(c);
	}
	if (c->x->reserved)
		fg_exchange_settle(c, c->x->cut_off ? c->x->cut_outcome : outcome_of(c->x->status));
	fg_client_exchange_done(c);
}

/* The engine side of an exchange failed. A pooled connection that turns out
 * dead before any answer (the engine closed it while idle) is retried once
 * on a fresh one; anything else is the client's 502/503/504, refunded. */
static void fail(struct fg_upstream *u, int status, const char *code, const char *why,
		 bool dead_conn)
{
	struct fg_client *c = u->client;
	struct fg_proxy *px = u->px;
	struct fg_exchange *x = c->x;
	bool retry = dead_conn && u->reused && !u->got_bytes && !x->retried && !x->head_sent;

	x->up = NULL;
	u->client = NULL;
	fg_upstream_close(u);
	if (retry) {
		/* a pooled connection the engine had closed: once more, fresh */
		x->retried = true;
		px->metrics.engine_retries++;
		if (!dispatch(c, true))
			return;
		fg_client_resume(c);
		return;
	}
	px->metrics.engine_failures++;
	if (!x->head_sent) {
		char msg[256];
		snprintf(msg, sizeof(msg), "the inference engine failed: %s", why);
		fg_exchange_settle(c, FG_OUT_ENGINE_ERROR);
		fg_client_error(c, status, "server_error", code, NULL, msg, NULL);
		fg_client_resume(c);
		return;
	}
	/* mid-response: end the connection without the final chunk so the
	 * client sees a truncated response rather than a short success */
	fg_exchange_settle(c, FG_OUT_ENGINE_ERROR);
	x->resp_until_close = true;
	fg_client_exchange_done(c);
}

void fg_upstream_abort(struct fg_upstream *u)
{
	off_queue(u); /* before the exchange it would send from goes */
	if (u->client)
		u->client->x->up = NULL;
	u->client = NULL;
	fg_upstream_close(u);
}

void fg_upstream_resume(struct fg_upstream *u)
{
	if (!u->paused)
		return;
	u->paused = false;
	u->deadline_ns = fg_now_ns() + u->px->upstream_ns;
	fg_upstream_timer_due(u);
	set_events(u, EPOLLIN | EPOLLRDHUP | (u->body_sent_all ? 0 : EPOLLOUT));
}

/* The common response read without http_parser: its head by
 * fg_resp_head_fast, its Content-Length body counted here, the same
 * callbacks called as http_parser would. 1: *done bytes consumed; 0: not
 * that form, http_parser reads it; -1: a callback failed. */
static int fast_read(struct fg_upstream *u, const char *p, size_t n, size_t *done)
{
	struct fg_client *c = u->client;
	size_t head = 0;

	if (!u->fast) {
		int status;
		uint64_t len;
		if (c->parser.method == HTTP_HEAD ||
		    !(head = fg_resp_head_fast(p, n, &c->x->rhdrs, &status, &len)))
			return 0;
		u->fast = true;
		u->fast_left = len;
		if (response_head(c, status, false, len))
			return -1;
	}
	size_t body = n - head < u->fast_left ? n - head : (size_t)u->fast_left;
	if (body && on_r_body(&u->parser, p + head, body))
		return -1;
	u->fast_left -= body;
	if (c->x->resp_done) { /* a stream ended early */
		*done = head + body;
		return 1;
	}
	if (!u->fast_left && on_r_complete(&u->parser))
		return -1;
	*done = head + body;
	return 1;
}

/* With workers, the engine's bytes are received without the shared lock
 * (fg_client_go_alone: u is on its client's loop, this one), and so is
 * the relay of a non-stream answer in fast_read's form: its head read and
 * rewritten, its body copied for the client and for the usage parse
 * (nothing of it is shared; that the engine is done with the request is
 * told to the gateway once the lock is back, x->first_token_due), and,
 * when it is whole, its send to the client and its usage parse (finish
 * then only settles). A stream's relay reports output to the gateway as
 * it goes: it runs under the lock. *fast: fast_read's answer when it ran
 * here (-2: it did not). */
static ssize_t upstream_recv(struct fg_upstream *u, char *buf, size_t len, int *fast, size_t *done)
{
	struct fg_client *c = u->client;
	struct fg_exchange *x = c->x;
	bool alone = fg_client_go_alone(c);
	ssize_t n = recv(u->fd, buf, len, MSG_DONTWAIT);
	int e = errno;

	*fast = -2;
	if (alone && n > 0 && !x->info.stream && (u->fast || !u->got_bytes)) {
		*fast = fast_read(u, buf, (size_t)n, done);
		if (*fast == 1 && x->resp_done && *done == (size_t)n) {
			fg_client_send_early(c);
			if (x->reserved)
				fg_exchange_read_usage(x);
		}
	}
	if (alone)
		fg_client_back(c);
	if (x->first_token_due) {
		x->first_token_due = false;
		fg_sched_first_token(c);
	}
	errno = e;
	return n;
}

static void upstream_read(struct fg_upstream *u)
{
	static __thread char buf[READ_CHUNK];
	struct fg_client *c = u->client;

	for (;;) {
		int fast;
		size_t done = 0;
		ssize_t n = upstream_recv(u, buf, sizeof(buf), &fast, &done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			fail(u, 502, "engine_error", strerror(errno), true);
			return;
		}
		bool first = !u->got_bytes; /* the head can only be read whole from the first bytes */
		if (n > 0) {
			u->got_bytes = true;
			/* later than before: the timer stays (upstream_timer_cb re-checks) */
			u->deadline_ns = fg_now_ns() + u->px->upstream_ns;
		}
		if (fast == -2)
			fast = (u->fast || first) && n > 0 ? fast_read(u, buf, (size_t)n, &done) : 0;
		if (fast < 0) {
			fail(u, 502, "engine_error", "malformed response from the engine", false);
			return;
		}
		if (!fast)
			done = http_parser_execute(&u->parser, &resp_settings, buf, (size_t)n);
		if (c->x->resp_done) {
			finish(u, n > 0 && done == (size_t)n);
			return;
		}
		if (HTTP_PARSER_ERRNO(&u->parser) != HPE_OK) {
			fail(u, 502, "engine_error", "malformed response from the engine", false);
			return;
		}
		if (n == 0) {
			fail(u, 502, "engine_error", "the engine closed the connection mid-response", true);
			return;
		}
		if (fg_client_flush(c))
			return; /* the client went away, taking this connection with it */
		/* the client reads slower than the engine writes, or the budget
		 * is spent and this client holds a relay buffer's worth already */
		if (fg_buf_used(&c->out) > FG_OUT_HIGH ||
		    (fg_buf_used(&c->out) > FG_OUT_LOW && u->px->buffered > u->px->max_buffered)) {
			u->paused = true;
			u->paused_since_ns = fg_now_ns();
			fg_upstream_timer_due(u);
			set_events(u, 0);
			return;
		}
		if ((size_t)n < sizeof(buf))
			return; /* drained; epoll says when there is more */
	}
}

static void upstream_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_upstream *u = ctx;
	(void)loop;
	(void)fd;

	if (u->idle || !u->client) {
		fg_upstream_close(u); /* the engine closed (or spoke on) an idle connection */
		return;
	}
	if (off_queue(u) && send_taken_back(u))
		return;
	if (u->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
			struct fg_client *c = u->client;
			char why[128];
			snprintf(why, sizeof(why), "connect: %s", strerror(err ? err : errno));
			c->x->up = NULL;
			u->client = NULL;
			fg_upstream_close(u);
			refuse_unavailable(c, why);
			fg_client_resume(c);
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		u->connecting = false;
		u->deadline_ns = fg_now_ns() + u->px->upstream_ns;
		fg_upstream_timer_due(u);
	}
	if (events & EPOLLOUT && !u->body_sent_all) {
		int rc = send_on_own_loop(u);
		if (rc < 0) {
			fail(u, 502, "engine_error", strerror(errno), true);
			return;
		}
		u->body_sent_all = rc == 1;
	}
	if (!u->paused && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		upstream_read(u);
}

/* The engine is held for a client that is not served by it: its relay
 * buffer stayed full past agent.timeouts.idle_s (it reads, but slower than
 * a stream is made), or the request outlived agent.timeouts.request_s.
 * The engine's connection closes (the engine stops generating), the
 * request is settled at what the engine produced, and the client's
 * connection closes after what is buffered for it (or idle_s later, as
 * for any client that stops reading): a stream's last event
 * is an error in OpenAI's shape, any other answer is cut short (no final
 * chunk, or fewer bytes than its Content-Length). Before any of the answer
 * was sent, the client gets a 504 instead and is refunded. */
static void end_held(struct fg_upstream *u, enum fg_outcome o, const char *code, const char *message)
{
	struct fg_client *c = u->client;
	struct fg_exchange *x = c->x;

	if (!x->head_sent) {
		fail(u, 504, code, message, false);
		return;
	}
	x->up = NULL;
	u->client = NULL;
	fg_upstream_close(u);
	if (x->sse && !x->resp_done)
		(void)end_stream_with_error(c, o == FG_OUT_REQUEST_TIMEOUT ? "timeout_error" : "server_error",
					    code, NULL, message);
	fg_overload_log(c->px, o == FG_OUT_REQUEST_TIMEOUT ? "request time limit (agent.timeouts.request_s)"
							   : "relay-buffer stall limit (agent.timeouts.idle_s)");
	if (x->reserved)
		fg_exchange_settle(c, o);
	x->resp_until_close = true; /* the client is behind: the connection goes */
	c->slow_close = true;       /* once it has taken what is buffered for it */
	fg_client_exchange_done(c);
}

/* The earliest time one of u's timeouts can end it (UINT64_MAX: none):
 * a pooled connection's idle time; an exchange's request_s, and either its
 * relay buffer's stall (paused for a slow client) or the engine's silence
 * (connect, upstream_s). */
static uint64_t upstream_due(const struct fg_upstream *u)
{
	if (u->idle)
		return u->idle_since_ns + FG_POOL_IDLE_NS + 1; /* upstream_timeouts: "> FG_POOL_IDLE_NS" */
	if (!u->client)
		return UINT64_MAX;
	uint64_t request = u->client->x->started_ns + u->px->request_ns;
	uint64_t other = u->paused ? u->paused_since_ns + u->px->idle_ns : u->deadline_ns;

	return request < other ? request : other;
}

/* Pulls the timer in when a timeout came closer; a deadline pushed back
 * by a read leaves it early, and upstream_timer_cb re-checks then. */
void fg_upstream_timer_due(struct fg_upstream *u)
{
	fg_loop_timer_due_by(u->loop, u->timer, upstream_due(u));
}

/* u's timeouts at `now`. -1: u is closed (its client answered or ended). */
static int upstream_timeouts(struct fg_upstream *u, uint64_t now)
{
	struct fg_proxy *px = u->px;

	if (u->idle) {
		if (now - u->idle_since_ns <= FG_POOL_IDLE_NS)
			return 0;
		fg_upstream_close(u);
		return -1;
	}
	if (!u->client)
		return 0;
	struct fg_client *c = u->client;
	char msg[256];
	if (now - c->x->started_ns >= px->request_ns) {
		snprintf(msg, sizeof(msg),
			 "the request was ended after %.0f s, the gateway's limit on one request's time (agent.timeouts.request_s)",
			 (double)px->request_ns / 1e9);
		end_held(u, FG_OUT_REQUEST_TIMEOUT, "request_timeout", msg);
		return -1;
	}
	if (u->paused) {
		if (now - u->paused_since_ns < px->idle_ns)
			return 0;
		snprintf(msg, sizeof(msg),
			 "the stream was ended: the client did not read it as fast as it was generated (%u KiB waited for it for %.0f s, agent.timeouts.idle_s); billed for what was generated",
			 FG_OUT_HIGH >> 10, (double)px->idle_ns / 1e9);
		end_held(u, FG_OUT_CLIENT_STALLED, "client_too_slow", msg);
		return -1;
	}
	if (now < u->deadline_ns)
		return 0;
	if (u->connecting) {
		c->x->up = NULL;
		u->client = NULL;
		fg_upstream_close(u);
		refuse_unavailable(c, "connect timed out");
		fg_client_resume(c);
		return -1;
	}
	fail(u, 504, "engine_timeout", "no answer within agent.timeouts.upstream_s", false);
	return -1;
}

/* Due at (or, when a timeout moved away, before) u's nearest timeout:
 * handle what is due, then re-arm the same timer at the nearest one left. */
static void upstream_timer_cb(struct fg_loop *loop, void *ctx)
{
	struct fg_upstream *u = ctx;

	if (u->client && off_queue(u) && send_taken_back(u))
		return;
	if (upstream_timeouts(u, fg_now_ns()))
		return;
	fg_loop_timer_move(loop, u->timer, upstream_due(u));
}
