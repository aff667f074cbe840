/* proxy_client.c — the client side of the proxy: read and parse HTTP/1.1
 * requests (libhttp-parser, keep-alive and pipelining), route the target
 * (policy/request_path: deny by default), name the tenant, price and admit
 * (first asking the engine's /tokenize, agent/http/engine_tokenize.c, when the
 * estimate is near a limit), answer refusals in OpenAI's error shape, and
 * write responses back with backpressure and timeouts. Forwarding is
 * proxy_upstream.c's (fg_proxy_dispatch). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/http/http_errors.h"
#include "agent/proxy/identity.h"
#include "agent/kernel/kernel.h"
#include "agent/proxy/proxy_internal.h"

#define READ_CHUNK (64u << 10)
/* most heads: what a new request's first read takes with workers */
#define HEAD_READ (4u << 10)

static void client_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx);
static void client_timer_cb(struct fg_loop *loop, void *ctx);
static void process_input(struct fg_client *c);

/* ---- request parser callbacks ---------------------------------------- */

static struct fg_client *of(http_parser *p)
{
	return p->data;
}

/* A request's exchange, allocated at its first byte and freed at its end;
 * counted (atomically: a worker takes a whole request without the lock)
 * for the tick's heap give-back. */
static struct fg_exchange *exchange_new(struct fg_client *c)
{
	c->x = calloc(1, sizeof(*c->x));
	if (c->x)
		atomic_fetch_add_explicit(&c->px->exchanges_begun, 1, memory_order_relaxed);
	return c->x;
}

static int on_begin(http_parser *p)
{
	struct fg_client *c = of(p);
	uint64_t now = fg_now_ns();

	c->x->started = true;
	c->x->started_ns = now;
	c->deadline_ns = now + c->px->header_ns;
	c->timeout_status = 408;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct fg_exchange *x = of(p)->x;

	if (!x->url_len)
		x->url = (uint32_t)x->hdrs.raw.len;
	x->url_len += (uint32_t)len;
	return fg_buf_append(&x->hdrs.raw, at, len);
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct fg_exchange *x = of(p)->x;

	if (fg_hdrs_on_field(&x->hdrs, at, len)) {
		x->reject_status = x->hdrs.overflow ? 431 : 500;
		return -1;
	}
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct fg_exchange *x = of(p)->x;

	if (fg_hdrs_on_value(&x->hdrs, at, len)) {
		x->reject_status = 500;
		return -1;
	}
	return 0;
}

static bool expects_continue(const struct fg_hdrs *h, bool *other)
{
	size_t len;
	const char *v = fg_hdrs_get(h, "expect", &len);

	*other = v && !(len == 12 && !strncasecmp(v, "100-continue", 12));
	return v && !*other;
}

static int on_headers(http_parser *p)
{
	struct fg_client *c = of(p);
	struct fg_exchange *x = c->x;
	bool chunked = p->flags & F_CHUNKED;
	bool has_length = !chunked && p->content_length != ULLONG_MAX && p->content_length > 0;
	bool other_expect;

	x->headers_done = true;
	c->keep_alive = http_should_keep_alive(p);
	c->deadline_ns = fg_now_ns() + c->px->body_ns;
	if (has_length && p->content_length > c->px->max_body) {
		x->reject_status = 413;
		return -1;
	}
	x->body_left = has_length ? p->content_length : 0;
	bool cont = expects_continue(&x->hdrs, &other_expect);
	if (other_expect) {
		x->reject_status = 417;
		return -1;
	}
	/* A body is not read, nor 100 Continue sent, before the request's key
	 * and path are judged: the parser stops here and process_input judges
	 * them outside the callback (check_heads), which reserves the declared
	 * length only for a client with a key. */
	if (has_length || chunked) {
		x->want_continue = cont && p->http_minor >= 1;
		x->heads_pending = true;
		http_parser_pause(p, 1);
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct fg_client *c = of(p);
	struct fg_exchange *x = c->x;
	struct fg_buf *b = &x->body;
	/* read_input received these straight into the body: only commit them */
	bool in_place = b->data && at == b->data + b->len && len <= b->cap - b->len;

	uint64_t total = fg_buf_used(b) + len;
	/* counted in the budget: what the body holds, or the room reserved
	 * for it when that is more (check_heads) */
	uint64_t more = total > x->body_held ? total - x->body_held : 0;

	if (total > c->px->max_body) {
		x->reject_status = 413;
		return -1;
	}
	if (!fg_buffered_take(c->px, more)) {
		x->reject_status = 503;
		return -1;
	}
	if (in_place)
		b->len += len;
	else if (fg_buf_append(b, at, len)) {
		c->px->buffered -= more;
		x->reject_status = 500;
		return -1;
	}
	x->body_left -= len < x->body_left ? len : x->body_left;
	if (x->scan) /* checked as it comes: the work of a read is that read's bytes */
		fg_request_scan_feed(x->scan, fg_buf_head(&x->body), fg_buf_used(&x->body));
	x->body_held += more;
	return 0;
}

static int on_complete(http_parser *p)
{
	of(p)->x->complete = true;
	http_parser_pause(p, 1); /* one exchange at a time: the rest stays buffered */
	return 0;
}

const http_parser_settings fg_client_req_settings = {
	.on_message_begin = on_begin,
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers,
	.on_body = on_body,
	.on_message_complete = on_complete,
};

/* ---- lifecycle -------------------------------------------------------- */

void fg_client_update_events(struct fg_client *c)
{
	uint32_t ev = EPOLLRDHUP;

	/* read while parsing, and a little ahead while an exchange runs (to
	 * notice a disconnect and keep pipelined requests) */
	if (c->state == CL_CLOSING || fg_buf_used(&c->in) < FG_PIPELINE_MAX ||
	    c->state == CL_READING)
		ev |= EPOLLIN;
	if (fg_buf_used(&c->out))
		ev |= EPOLLOUT;
	if (ev != c->events) {
		fg_loop_mod(c->loop, c->fd, ev);
		c->events = ev;
	}
}

/* Past a connection cap: a short 503 and close, before any request is
 * read. What the client already sent is read away first, so the close is a
 * FIN after the answer rather than an RST that could discard it. */
static void refuse_connection(struct fg_proxy *px, int fd, enum fg_conn_verdict v)
{
	char sink[4096], msg[200];
	struct fg_buf out = { 0 };

	if (v == FG_CONN_OVER_SOURCE)
		snprintf(msg, sizeof(msg),
			 "too many connections from your address (%u, agent.limits.max_connections_per_source); reuse a keep-alive connection or retry shortly",
			 px->max_per_source);
	else
		snprintf(msg, sizeof(msg),
			 "the gateway has as many client connections as it serves (%u, agent.limits.max_connections); retry shortly",
			 px->max_connections);
	fg_overload_log(px, v == FG_CONN_OVER_SOURCE ? "per-source connection cap" : "connection cap");
	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
	if (!fg_http_error(&out, 503, "server_error", "overloaded", NULL, msg, "Retry-After: 1\r\n", true))
		(void)!send(fd, fg_buf_head(&out), fg_buf_used(&out), MSG_DONTWAIT | MSG_NOSIGNAL);
	fg_buf_free(&out);
	shutdown(fd, SHUT_WR);
	close(fd);
}

void fg_client_accept(struct fg_proxy *px, struct fg_loop *loop, int fd, const struct sockaddr_storage *peer,
		      socklen_t peer_len)
{
	struct fg_conn_source *source;
	enum fg_conn_verdict v = fg_conn_admit(&px->conns, peer, px->n_clients, px->max_connections,
					       px->max_per_source,
					       fg_source_trusted(&px->st->policy->agent,
								 (const struct sockaddr *)peer),
					       &source);
	if (v == FG_CONN_OVER_TOTAL || v == FG_CONN_OVER_SOURCE) {
		refuse_connection(px, fd, v);
		return;
	}
	struct fg_client *c = v == FG_CONN_OK ? calloc(1, sizeof(*c)) : NULL;
	int one = 1;

	if (!c) {
		fg_conn_release(&px->conns, source);
		close(fd);
		return;
	}
	c->px = px;
	c->source = source;
	c->fd = fd;
	memcpy(&c->peer, peer, peer_len < sizeof(c->peer) ? peer_len : sizeof(c->peer));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	c->events = EPOLLIN | EPOLLRDHUP;
	c->deadline_ns = fg_now_ns() + px->header_ns;
	c->timeout_status = 0;
	/* the one timer it keeps until it closes: no timeout later needs memory */
	c->loop = loop;
	c->timer = fg_loop_timer_at(loop, c->deadline_ns, client_timer_cb, c);
	if (!c->timer || fg_loop_add(loop, fd, c->events, client_cb, c)) {
		fg_loop_timer_cancel(loop, c->timer);
		fg_conn_release(&px->conns, source);
		close(fd);
		free(c);
		return;
	}
	fg_link_add(&px->clients, &c->link);
	px->n_clients++;
	px->metrics.connections_total++;
}

void fg_client_account(struct fg_client *c)
{
	const struct fg_exchange *x = c->x;
	uint64_t held = fg_buf_used(&c->out) +
			(x ? fg_buf_used(&x->resp_copy) + x->fwd.head_len : 0);

	/* one atomic add (of the difference, modulo 2^64): a load and a
	 * store would lose what a worker reading a body alone took between */
	atomic_fetch_add(&c->px->buffered, held - c->held);
	c->held = held;
}

/* End the current exchange and free it with every buffer it held: memory
 * follows requests, not connections. */
static void exchange_reset(struct fg_client *c)
{
	struct fg_exchange *x = c->x;

	if (!x)
		return;
	/* the gateway links x->gwr into its lists: never forget it while live */
	if (x->reserved)
		fg_exchange_settle(c, FG_OUT_CLIENT_GONE);
	fg_tokenize_cancel(x->tok); /* the client left while its prompt was counted */
	if (x->tenant)
		fg_tenant_unref(&c->px->tenants, x->tenant);
	fg_fwd_body_free(&x->fwd);
	fg_request_scan_free(x->scan);
	fg_sse_free(&x->sse_state);
	c->px->buffered -= x->body_held;
	fg_buf_free(&x->hdrs.raw);
	fg_buf_free(&x->rhdrs.raw);
	fg_buf_free(&x->body);
	fg_buf_free(&x->resp_copy);
	free(x);
	c->x = NULL;
	fg_client_account(c);
}

/* The request body (what is sent of it: the rewrite's ranges point into
 * it) is no longer needed once the engine answers (no retry after its
 * first byte): it goes, with its share of the budget. */
void fg_client_drop_body(struct fg_client *c, bool forwarded_too)
{
	struct fg_exchange *x = c->x;

	if (forwarded_too) {
		c->px->buffered -= x->body_held;
		x->body_held = 0;
		fg_buf_free(&x->body);
		fg_fwd_body_free(&x->fwd);
	}
	fg_client_account(c);
}

void fg_client_close(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;

	if (x && x->up)
		fg_upstream_abort(x->up); /* the engine stops generating for nobody */
	exchange_reset(c);        /* settles what was admitted: billed what it got */
	fg_loop_timer_cancel(c->loop, c->timer);
	fg_loop_del(c->loop, c->fd);
	close(c->fd);
	fg_buf_free(&c->in);
	fg_buf_free(&c->out);
	fg_client_account(c);
	fg_link_del(&c->link);
	px->n_clients--;
	fg_conn_release(&px->conns, c->source);
	if (c->memo) {
		explicit_bzero(c->memo, sizeof(*c->memo)); /* no client's key outlives its connection */
		free(c->memo);
	}
	free(c);
}

/* The earliest time one of c's timeouts can end it (UINT64_MAX: none now):
 * the deadline of a request being read or of a lingering close, and a
 * relay buffer the client has not taken from for idle_s. */
static uint64_t client_due(const struct fg_client *c)
{
	uint64_t due = c->state == CL_READING || c->state == CL_CLOSING ? c->deadline_ns : UINT64_MAX;

	if (c->state == CL_UPSTREAM && fg_buf_used(&c->out) &&
	    c->last_progress_ns + c->px->idle_ns + 1 < due)
		due = c->last_progress_ns + c->px->idle_ns + 1; /* client_timeouts: "> idle_ns" */
	return due;
}

/* Pulls the timer in when a timeout came closer; one that moved away (a
 * write, a deadline pushed back) leaves it early, and client_timer_cb
 * re-checks then. No heap work on the way of a busy stream. */
void fg_client_timer_due(struct fg_client *c)
{
	fg_loop_timer_due_by(c->loop, c->timer, client_due(c));
}

/* A new deadline for the request being read or the close (the parser's
 * callbacks set theirs directly; process_input pulls the timer in after). */
static void set_deadline(struct fg_client *c, uint64_t at_ns, int timeout_status)
{
	c->deadline_ns = at_ns;
	c->timeout_status = timeout_status;
	fg_client_timer_due(c);
}

/* Stop taking requests; close once the last response is out. */
static void begin_closing(struct fg_client *c)
{
	c->state = CL_CLOSING;
	set_deadline(c, fg_now_ns() + (c->slow_close ? c->px->idle_ns : FG_LINGER_NS), 0);
	fg_buf_reset(&c->in);
	fg_client_update_events(c);
}

/* Returns -1 when the client is gone (and freed). */
static int flush_or_close(struct fg_client *c)
{
	while (fg_buf_used(&c->out)) {
		ssize_t n = send(c->fd, fg_buf_head(&c->out), fg_buf_used(&c->out),
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			fg_buf_consume(&c->out, (size_t)n);
			c->last_progress_ns = fg_now_ns();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		fg_client_close(c);
		return -1;
	}
	if (c->state == CL_CLOSING && !fg_buf_used(&c->out) && !c->closing_sent) {
		/* lingering close: the peer reads our answer before any RST */
		shutdown(c->fd, SHUT_WR);
		c->closing_sent = true;
	}
	if (!fg_buf_used(&c->out))
		fg_buf_free(&c->out); /* sized again by the next answer */
	else
		fg_client_timer_due(c); /* a relay buffer waiting: the slow-reader bound */
	fg_client_account(c);
	if (c->x && c->x->up && c->x->up->paused && fg_buf_used(&c->out) < FG_OUT_LOW)
		fg_upstream_resume(c->x->up);
	fg_client_update_events(c);
	return 0;
}

int fg_client_flush(struct fg_client *c)
{
	return flush_or_close(c);
}

bool fg_client_go_alone(struct fg_client *c)
{
	if (!fg_loop_shared(c->loop) || fg_loop_current() != c->loop)
		return false;
	c->alone = true;
	fg_loop_unlock(c->loop);
	return true;
}

void fg_client_back(struct fg_client *c)
{
	fg_loop_lock(c->loop);
	c->alone = false;
	/* a reload's pull-in skipped both while c was alone */
	fg_client_timer_due(c);
	if (c->x && c->x->up)
		fg_upstream_timer_due(c->x->up);
}

void fg_client_send_early(struct fg_client *c)
{
	if (!fg_buf_used(&c->out))
		return;
	ssize_t n = send(c->fd, fg_buf_head(&c->out), fg_buf_used(&c->out),
			 MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0) {
		fg_buf_consume(&c->out, (size_t)n);
		c->last_progress_ns = fg_now_ns();
	}
}

/* ---- answers the proxy writes itself --------------------------------- */

static void count_refusal(struct fg_client *c, enum fg_outcome o)
{
	if (c->x && c->x->tenant)
		fg_tenants_count(c->x->tenant, o);
	else
		c->px->metrics.malformed++;
}

void fg_client_error(struct fg_client *c, int status, const char *type, const char *code,
		     const char *param, const char *message, const char *extra_headers)
{
	/* after a malformed or unfinished request the byte stream is lost */
	bool keep = c->keep_alive && c->x && c->x->complete;

	fg_http_error(&c->out, status, type, code, param, message, extra_headers, !keep);
	if (c->x && c->x->reserved)
		fg_exchange_settle(c, FG_OUT_ENGINE_ERROR);
	exchange_reset(c);
	if (keep) {
		c->state = CL_READING;
		set_deadline(c, fg_now_ns() + c->px->idle_ns, 0);
	} else {
		begin_closing(c);
	}
}

/* A body the buffered-bytes budget cannot hold: the client may retry soon
 * (the bodies held now are forwarded or refused within body_s). */
static void over_budget(struct fg_client *c, bool body_read)
{
	char msg[200];

	c->px->metrics.over_budget++;
	fg_overload_log(c->px, "buffered-bytes budget");
	snprintf(msg, sizeof(msg),
		 "the gateway holds as many request bytes as its memory budget allows (%" PRIu64
		 " bytes, agent.limits.max_buffered_bytes); retry shortly",
		 c->px->max_buffered);
	if (!body_read)
		c->x->complete = false; /* the connection cannot be reused */
	fg_client_error(c, 503, "server_error", "overloaded", NULL, msg, "Retry-After: 1\r\n");
}

static void bad_http(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
	char msg[256];
	int status = x->reject_status ? x->reject_status : 400;

	if (status == 413)
		snprintf(msg, sizeof(msg), "request body is larger than this server accepts (%" PRIu64 " bytes)",
			 c->px->max_body);
	else if (status == 431 || e == HPE_HEADER_OVERFLOW)
		status = 431, snprintf(msg, sizeof(msg), "request headers are too large or too many");
	else if (status == 417)
		snprintf(msg, sizeof(msg), "only 'Expect: 100-continue' is supported");
	else if (status == 500)
		snprintf(msg, sizeof(msg), "out of memory while reading the request");
	else if (status == 503) {
		over_budget(c, false);
		return;
	}
	else
		snprintf(msg, sizeof(msg), "malformed HTTP request: %s", http_errno_description(e));
	count_refusal(c, FG_OUT_BAD_REQUEST);
	c->x->complete = false; /* the connection cannot be reused */
	fg_client_error(c, status, "invalid_request_error", status == 413 ? "request_too_large" : NULL,
			NULL, msg, NULL);
}

/* ---- identity ---------------------------------------------------------- */

static struct fg_tenant_rt *identify(struct fg_client *c, const char **why)
{
	struct fg_proxy *px = c->px;
	const struct fg_hdrs *h = &c->x->hdrs;
	size_t len, tlen;
	const char *v;

	v = fg_hdrs_get(h, FG_TENANT_HEADER, &len);
	if (v && fg_source_trusted(&px->st->policy->agent, &c->peer.sa)) {
		char name[FG_NAME_MAX];
		if (len >= sizeof(name)) {
			*why = "unknown tenant in " FG_TENANT_HEADER;
			return NULL;
		}
		memcpy(name, v, len);
		name[len] = 0;
		struct fg_tenant_rt *t = fg_tenants_by_name(&px->tenants, name);
		if (!t)
			*why = "unknown tenant in " FG_TENANT_HEADER;
		return t;
	}
	v = fg_hdrs_get(h, "authorization", &len);
	if (!v) {
		*why = "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.";
		return NULL;
	}
	const char *tok = fg_bearer_token(v, len, &tlen);
	struct fg_key_memo *m = c->memo;
	const uint8_t *hash;
	uint8_t fresh[32];
	if (!tok) {
		*why = "The Authorization header must be 'Bearer YOUR_KEY'.";
		return NULL;
	}
	bool same = m && tlen && tlen == m->len && !memcmp(tok, m->key, tlen);
	if (same) {
		hash = m->hash;
	} else {
		if (fg_sha256(tok, tlen, fresh)) {
			*why = "The Authorization header must be 'Bearer YOUR_KEY'.";
			return NULL;
		}
		hash = fresh;
	}
	/* the policy is consulted every time: a reload may have moved the key */
	struct fg_tenant_rt *t = fg_tenants_by_key(&px->tenants, hash);
	if (!t) {
		*why = "Incorrect API key provided.";
		return NULL;
	}
	/* a new valid key, short enough: remembered (an allocation only once
	 * the connection is authenticated; none if memory is short) */
	if (!same && tlen && tlen <= FG_KEY_MEMO_MAX && (m || (m = c->memo = malloc(sizeof(*m))))) {
		memcpy(m->key, tok, tlen);
		memcpy(m->hash, fresh, sizeof(fresh));
		m->len = (uint8_t)tlen;
	}
	return t;
}

/* The kernel learns which tenant this source belongs to, once per
 * connection and tenant (a map write per request would be wasted). */
static void learn_source(struct fg_client *c, struct fg_tenant_rt *t)
{
	if (c->learned == t)
		return;
	c->learned = t;
	fg_kernel_learn_source(c->px->st, &c->peer.sa, t->id);
}

/* ---- admission ---------------------------------------------------------- */

static void refuse_rate(struct fg_client *c, const struct fg_gw_decision *d)
{
	struct fg_tenant_rt *t = c->x->tenant;
	const struct fg_bucket *b = &c->px->gw->t[t->id].bucket;
	const struct fg_price *pr = &c->x->gwr.price;
	char msg[512], hdr[128];
	uint64_t s = fg_retry_after_s(d->wait_ns), ms = fg_retry_after_ms(d->wait_ns);

	snprintf(msg, sizeof(msg),
		 "Rate limit reached for tenant '%s': this request is priced at %.0f units "
		 "(~%.0f prompt tokens + %.0f reserved output tokens) and the quota bucket holds "
		 "%.0f of %.0f units, refilling at %.0f units/s. Retry after %" PRIu64 " ms.",
		 t->name, d->cost, pr->prompt_tokens, pr->output_tokens, fmax(0, b->level), b->depth,
		 b->rate, ms);
	snprintf(hdr, sizeof(hdr), "Retry-After: %" PRIu64 "\r\nretry-after-ms: %" PRIu64 "\r\n", s, ms);
	fg_client_error(c, 429, "rate_limit_error", "rate_limit_exceeded", NULL, msg, hdr);
}

static void refuse_never(struct fg_client *c, const struct fg_gw_decision *d)
{
	struct fg_tenant_rt *t = c->x->tenant;
	const struct fg_bucket *b = &c->px->gw->t[t->id].bucket;
	const struct fg_price *pr = &c->x->gwr.price;
	char msg[640];

	if (b->rate <= 0)
		snprintf(msg, sizeof(msg),
			 "Tenant '%s' has no quota (units_per_s is 0): no request can be admitted.",
			 t->name);
	else
		snprintf(msg, sizeof(msg),
			 "This request can never be admitted for tenant '%s': it is priced at %.0f units "
			 "(~%.0f prompt tokens + %.0f reserved output tokens, n x max_tokens) but the "
			 "tenant's bucket holds at most %.0f units (burst_s x units_per_s). Lower "
			 "max_tokens / max_completion_tokens, n, or the prompt.",
			 t->name, d->cost, pr->prompt_tokens, pr->output_tokens, b->depth);
	fg_client_error(c, 400, "invalid_request_error", "request_exceeds_quota",
			pr->output_tokens > pr->prompt_tokens ? "max_tokens" : "messages",
			msg, "x-should-retry: false\r\n");
}

/* The tenant already has agent.limits.max_inflight_per_tenant requests
 * admitted and not answered (queued or at the engine). No Retry-After: when
 * one of them ends depends on outputs not generated yet, and a guess would
 * not be the truthful one the 429s of the bucket give; OpenAI's clients
 * back off on their own. Its running requests are not touched. */
/* A request admission refuses, whose prompt the engine counted, pays for
 * the count: the engine did that work for nothing it will bill. Called
 * before the refusal is written (that may end the exchange). `refusal`:
 * admission's decision, whose Retry-After then counts the time the bucket
 * takes to refill the count's price (NULL: a refusal with no such wait). */
static void bill_refused_count(struct fg_client *c, struct fg_gw_decision *refusal)
{
	struct fg_exchange *x = c->x;

	if (x->counted_tokens && x->tenant->live)
		fg_tenants_charged(x->tenant, fg_gw_tokenizer_ran(c->px->gw, x->tenant->id,
								  x->counted_tokens, fg_now_ns(), refusal));
	x->counted_tokens = 0;
}

static bool refuse_inflight(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	uint32_t cap = c->px->st->policy->agent.limits.max_inflight_per_tenant;
	char msg[320];

	if (!cap || c->px->gw->t[x->tenant->id].inflight < cap)
		return false;
	fg_tenants_count(x->tenant, FG_OUT_INFLIGHT_LIMITED);
	bill_refused_count(c, NULL);
	snprintf(msg, sizeof(msg),
		 "Tenant '%s' has %u requests in flight, the most the gateway holds for one tenant "
		 "(agent.limits.max_inflight_per_tenant); retry when one of them has finished.",
		 x->tenant->name, cap);
	fg_client_error(c, 429, "rate_limit_error", "too_many_requests_in_flight", NULL, msg, NULL);
	return true;
}

/* Refusals for the request's size: they do not depend on the rate, so they
 * say so (x-should-retry: false) and name the limit. */
static void refuse_size(struct fg_client *c, const struct fg_gw_decision *d)
{
	struct fg_exchange *x = c->x;
	const char *param = x->api == FG_API_COMPLETIONS ? "prompt"
			    : x->api == FG_API_CHAT ? "messages"
			    : x->api == FG_API_RESPONSES ? "input" : NULL;
	const char *code = d->outcome == FG_GW_KV_NEVER ? "kv_cache_cap_exceeded"
							: "context_length_exceeded";

	fg_tenants_count(x->tenant, d->outcome == FG_GW_KV_NEVER ? FG_OUT_KV_NEVER
								: FG_OUT_CONTEXT_EXCEEDED);
	fg_client_error(c, 400, "invalid_request_error", code, param, d->reason,
			"x-should-retry: false\r\n");
}

/* ---- routing ----------------------------------------------------------- */

static bool host_is(const struct fg_hdrs *h, const char *auth, size_t len)
{
	size_t hl;
	const char *host = fg_hdrs_get(h, "host", &hl);

	return host && hl == len && !strncasecmp(host, auth, len);
}

/* The target as origin-form: an absolute-form target naming this server
 * (its Host) is cut to its path; one naming another is refused. */
static bool origin_form(struct fg_client *c, const char **why)
{
	struct fg_exchange *x = c->x;
	const char *url = x->hdrs.raw.data + x->url;
	size_t len = x->url_len, skip;

	if (len && url[0] == '/')
		return true;
	if (len >= 7 && !strncasecmp(url, "http://", 7))
		skip = 7;
	else if (len >= 8 && !strncasecmp(url, "https://", 8))
		skip = 8;
	else {
		*why = "the request target must be a path ('/v1/...')";
		return false;
	}
	const char *auth = url + skip, *slash = memchr(auth, '/', len - skip);
	size_t alen = slash ? (size_t)(slash - auth) : len - skip;
	if (!host_is(&x->hdrs, auth, alen)) {
		*why = "an absolute-form request target must name this server (its Host header)";
		return false;
	}
	if (!slash) {
		*why = "the request target has no path";
		return false;
	}
	x->url += (uint32_t)(slash - url);
	x->url_len -= (uint32_t)(slash - url);
	return true;
}

static uint32_t method_bit(unsigned method)
{
	switch (method) {
	case HTTP_GET: return FG_M_GET;
	case HTTP_POST: return FG_M_POST;
	case HTTP_HEAD: return FG_M_HEAD;
	case HTTP_PUT: return FG_M_PUT;
	case HTTP_PATCH: return FG_M_PATCH;
	case HTTP_DELETE: return FG_M_DELETE;
	case HTTP_OPTIONS: return FG_M_OPTIONS;
	default: return 0; /* no route takes it: 404 or 405 */
	}
}

/* Which route the request takes; false when it was answered (400, 404, 405). */
static bool route(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	const char *name = http_method_str(c->parser.method), *why = NULL;
	uint32_t method = method_bit(c->parser.method);
	char msg[320];
	enum fg_route_verdict v = FG_ROUTE_BAD_TARGET;

	if (origin_form(c, &why))
		v = fg_route_target(&px->st->policy->agent, method, x->hdrs.raw.data + x->url,
				    x->url_len, &x->route, &why);
	int plen = (int)(x->route.path_len < 200 ? x->route.path_len : 200);
	switch (v) {
	case FG_ROUTE_OK:
		x->api = x->route.api;
		return true;
	case FG_ROUTE_BAD_TARGET:
		px->metrics.refused_path[0]++;
		snprintf(msg, sizeof(msg), "Invalid request target: %s.", why);
		fg_client_error(c, 400, "invalid_request_error", "invalid_path", NULL, msg, NULL);
		return false;
	case FG_ROUTE_NOT_FOUND:
		px->metrics.refused_path[1]++;
		snprintf(msg, sizeof(msg), "%s %.*s: not found (this gateway forwards only the endpoints it prices, and those the policy lists under agent.passthrough).",
			 name, plen, x->hdrs.raw.data + x->url);
		fg_client_error(c, 404, "invalid_request_error", "not_found", NULL, msg, NULL);
		return false;
	case FG_ROUTE_METHOD: {
		char allowed[64], hdr[96];
		px->metrics.refused_path[2]++;
		fg_methods_text(x->route.allowed, allowed, sizeof(allowed));
		snprintf(msg, sizeof(msg), "%s is not allowed on %.*s (allowed: %s).", name, plen,
			 x->hdrs.raw.data + x->url, allowed);
		snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allowed);
		fg_client_error(c, 405, "invalid_request_error", "method_not_allowed", NULL, msg, hdr);
		return false;
	}
	}
	return false;
}

/* ---- admission ----------------------------------------------------------- */

/* Price and decide with the gateway. Returns true when the request is
 * admitted (queued, or bound for the long-context pool); otherwise the
 * answer has been written. */
static bool admit(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	uint64_t now = fg_now_ns();

	if (refuse_inflight(c))
		return false;
	struct fg_gw_decision d = fg_gw_admit(px->gw, &x->gwr, x->tenant->id, x->info.model,
					      &x->info.shape, now);

	x->gwr.item.owner = c;
	x->gwr.streams = x->info.stream && (x->api == FG_API_CHAT || x->api == FG_API_COMPLETIONS);
	switch (d.outcome) {
	case FG_GW_QUEUED:
	case FG_GW_LONG_CONTEXT:
		x->reserved = true;
		x->long_ctx = d.outcome == FG_GW_LONG_CONTEXT;
		if (x->long_ctx)
			x->tenant->long_context++;
		fg_tenants_publish(px->st, &px->tenants, x->tenant, now);
		return true;
	case FG_GW_RETRY_LATER:
		fg_tenants_count(x->tenant, FG_OUT_RATE_LIMITED);
		bill_refused_count(c, &d);
		fg_tenants_publish(px->st, &px->tenants, x->tenant, now);
		refuse_rate(c, &d);
		return false;
	case FG_GW_CONTEXT_EXCEEDED:
	case FG_GW_KV_NEVER:
	case FG_GW_NO_LONG_POOL:
		bill_refused_count(c, NULL);
		refuse_size(c, &d);
		return false;
	case FG_GW_BUCKET_NEVER:
	default:
		fg_tenants_count(x->tenant, FG_OUT_NEVER_FITS);
		bill_refused_count(c, NULL);
		refuse_never(c, &d);
		return false;
	}
}

static bool rewrite_body(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	const struct fg_tenant_rt *t = x->tenant;
	bool priority_engine = c->px->st->policy->agent.engine_scheduling == FG_ENGINE_PRIORITY;
	bool inference = x->api == FG_API_CHAT || x->api == FG_API_COMPLETIONS ||
			 x->api == FG_API_RESPONSES || x->api == FG_API_EMBEDDINGS;
	bool salted = t && t->salted;
	struct fg_rewrite rw = {
		/* the endpoints that use the prefix cache get the tenant's salt;
		 * any other body keeps a salt member only as the tenant's */
		.cache_salt = salted && (inference || x->info.cache_salt.present) ? t->salt : NULL,
		.force_usage = x->info.stream && fg_api_streams_usage(x->api),
		.set_priority = t && priority_engine && (inference || x->info.priority.present),
		.priority = t ? t->priority : 0,
		.max_tokens = x->reserved ? x->gwr.price.per_choice : 0,
	};

	if (!x->json_body)
		return true; /* not JSON (a passthrough's own format): forwarded as it is */
	if (salted && !t->salt[0])
		return false;
	return !fg_request_forward(&x->info, fg_buf_head(&x->body), fg_buf_used(&x->body), &rw,
				   &x->fwd);
}

/* A content part the policy cannot price: refused before the engine. */
static bool refuse_media(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	const struct fg_model *m = &c->px->st->policy->replica.model;
	const struct fg_request_shape *s = &x->info.shape;
	const char *param = x->api == FG_API_RESPONSES ? "input" : "messages";
	const char *why = NULL;

	if (s->images && !m->image_tokens)
		why = "This model takes no image input (replica.model.image_tokens is 0 in the gateway's policy).";
	else if (s->audios && !m->audio_tokens)
		why = "This model takes no audio input (replica.model.audio_tokens is 0 in the gateway's policy).";
	else if (x->info.videos)
		why = "Video content parts are not accepted: the gateway has no rule to price them.";
	else if (x->info.files)
		why = "File content parts are not accepted: the gateway has no rule to price them.";
	if (!why)
		return false;
	fg_tenants_count(x->tenant, FG_OUT_BAD_REQUEST);
	fg_client_error(c, 400, "invalid_request_error", "unsupported_content", param, why,
			"x-should-retry: false\r\n");
	return true;
}

/* Admit (the body is read and counted), rewrite, and queue or send.
 * false when the client was answered instead. */
static bool admit_and_go(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	uint64_t t0 = fg_now_ns();

	/* the rewrite's head is held too (the body itself is sent from where it is) */
	if (x->json_body &&
	    px->buffered + fg_request_forward_head_room(&x->info, FG_SALT_MAX) > px->max_buffered) {
		over_budget(c, true);
		return false;
	}
	if (!admit(c))
		return false;
	if (!rewrite_body(c)) {
		fg_client_error(c, 500, "server_error", NULL, NULL,
				"could not prepare the request for the engine", NULL);
		return false;
	}
	fg_client_account(c); /* the rewrite's head is held now */
	fg_metrics_observe_decision(&px->metrics, fg_now_ns() - t0);
	c->state = CL_ADMITTED;
	if (!x->long_ctx)
		fg_sched_kick(px); /* waits its turn in the fair queue */
	else
		fg_proxy_dispatch(c); /* the long-context pool: straight on */
	return true;
}

static void counted(void *ctx, enum fg_tokenize_result r, uint64_t count, uint64_t max_model_len,
		    int http_status)
{
	struct fg_client *c = ctx;
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	(void)http_status;

	x->tok = NULL;
	px->metrics.tokenize[r]++;
	fg_metrics_observe_tokenize(&px->metrics, fg_now_ns() - x->tok_started_ns);
	if (r == FG_TOKENIZE_OK) {
		/* 0 would read as "unknown": an empty prompt is one token of framing anyway */
		x->info.shape.exact_prompt_tokens = count ? count : 1;
		if (max_model_len)
			px->gw->engine_max_model_len = max_model_len;
		x->counted_tokens = x->info.shape.exact_prompt_tokens;
	}
	/* otherwise the estimate decides, limits on its conservative side */
	if (!x->tenant->live) {
		fg_tenants_count(x->tenant, FG_OUT_TENANT_GONE);
		fg_client_error(c, 403, "permission_error", "tenant_removed", NULL,
				"The tenant was removed from the policy while this request was read.",
				"x-should-retry: false\r\n");
	} else {
		admit_and_go(c);
	}
	fg_client_resume(c);
}

/* Ask the engine's tokenizer before admission when the estimate is near a
 * limit. true: the count is under way (the exchange waits in CL_COUNTING). */
static bool count_first(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	bool cut_off_later = x->info.stream && (x->api == FG_API_CHAT || x->api == FG_API_COMPLETIONS);
	size_t len;

	if (!fg_gw_exact_wanted(px->gw, x->tenant->id, x->info.model, &x->info.shape, cut_off_later,
				fg_now_ns()))
		return false;
	char *body = fg_tokenize_body(&x->info, fg_buf_head(&x->body), fg_buf_used(&x->body), &len);
	if (!body)
		return false;
	int fd = fg_pool_socket(px, &px->engine);
	if (fd < 0) {
		free(body);
		px->metrics.tokenize[FG_TOKENIZE_FAILED]++;
		return false;
	}
	x->tok_started_ns = fg_now_ns();
	x->tok = fg_tokenize_start(c->loop, fd, px->engine_auth, body, len, px->tokenize_ns, counted, c);
	free(body);
	if (!x->tok) {
		px->metrics.tokenize[FG_TOKENIZE_FAILED]++;
		return false;
	}
	c->state = CL_COUNTING;
	return true;
}

/* The body's check: finished from the reads when they were scanned as they
 * came (the same answer as one pass), else one pass now. */
static int parse_body(struct fg_client *c, enum fg_api api, char *msg, size_t msglen,
		      const char **param)
{
	struct fg_exchange *x = c->x;
	struct fg_req_scan *scan = x->scan;

	x->scan = NULL;
	if (scan && fg_request_scan_api(scan) == api)
		return fg_request_scan_finish(scan, fg_buf_head(&x->body), fg_buf_used(&x->body),
					      &x->info, msg, msglen, param);
	fg_request_scan_free(scan);
	return fg_request_parse(api, fg_buf_head(&x->body), fg_buf_used(&x->body), &x->info, msg,
				msglen, param);
}

/* A metered request: its body read, checked and priced. */
static void metered(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	char msg[384];
	const char *param = NULL;
	enum fg_api api = x->api;

	if (api == FG_API_PASSTHROUGH) {
		/* any JSON body has its salt and priority rewritten; others go as they are */
		x->json_body = fg_buf_used(&x->body) && !parse_body(c, api, msg, sizeof(msg), &param);
		x->info.api = api;
		x->info.shape.fixed_units = x->route.pass->units;
		admit_and_go(c);
		return;
	}
	if (parse_body(c, api, msg, sizeof(msg), &param)) {
		fg_tenants_count(x->tenant, FG_OUT_BAD_REQUEST);
		fg_client_error(c, 400, "invalid_request_error", NULL, param, msg, NULL);
		return;
	}
	x->json_body = true;
	if (refuse_media(c) || count_first(c))
		return;
	admit_and_go(c);
}

/* Not metered (no key on a public path, a read-only endpoint, a free
 * passthrough): forwarded as it is, less what the rewrite owns. */
static void unmetered(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	char msg[128];
	const char *param;

	if (x->tenant)
		fg_tenants_count(x->tenant, FG_OUT_UNMETERED);
	x->json_body = x->api == FG_API_PASSTHROUGH && fg_buf_used(&x->body) &&
		       !parse_body(c, FG_API_PASSTHROUGH, msg, sizeof(msg), &param);
	if (x->json_body && (x->info.cache_salt.present || x->info.priority.present) &&
	    !rewrite_body(c)) {
		fg_client_error(c, 500, "server_error", NULL, NULL,
				"could not prepare the request for the engine", NULL);
		return;
	}
	c->state = CL_ADMITTED;
	fg_proxy_dispatch(c);
}

/* The headers of a request with a body are in: refuse it now when its
 * path or key does (the client's body is then never read or held), else
 * invite the body. false: refused (the connection is closing). */
static bool check_heads(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	const char *why = NULL;

	x->heads_pending = false;
	if (!route(c))
		return false;
	bool keyed = identify(c, &why) != NULL;
	if (!keyed && !x->route.public_path) {
		px->metrics.unauthenticated++;
		fg_client_error(c, 401, "invalid_request_error", "invalid_api_key", NULL, why,
				"WWW-Authenticate: Bearer\r\n");
		return false;
	}
	/* a declared length that cannot be held is refused before it is sent */
	uint64_t declared = c->parser.flags & F_CHUNKED ? 0 : c->parser.content_length;
	if (declared != ULLONG_MAX && px->buffered + declared > px->max_buffered) {
		over_budget(c, false);
		return false;
	}
	/* a client with a key gets room for the length it declared, counted
	 * in the budget now, so the body is received into it in a few reads
	 * and never moved; one without (a public path) has its body grow with
	 * what arrives */
	if (keyed && declared && declared != ULLONG_MAX && fg_buffered_take(px, declared)) {
		if (!fg_buf_reserve(&x->body, declared))
			x->body_held = declared;
		else
			px->buffered -= declared;
	}
	if (x->want_continue)
		fg_buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	/* the bodies handle_request parses (metered, or any passthrough): read as
	 * they arrive; without memory, parsed in one pass at the end instead */
	if (x->api != FG_API_NONE && (keyed || x->api == FG_API_PASSTHROUGH))
		x->scan = fg_request_scan_new(x->api);
	return true;
}

static void handle_request(struct fg_client *c)
{
	struct fg_proxy *px = c->px;
	struct fg_exchange *x = c->x;
	const char *why = NULL;

	c->deadline_ns = UINT64_MAX; /* the engine side owns the clock now */
	c->timeout_status = 0;
	if (!route(c))
		return;
	struct fg_tenant_rt *t = identify(c, &why);
	if (!t && !x->route.public_path) {
		px->metrics.unauthenticated++;
		fg_client_error(c, 401, "invalid_request_error", "invalid_api_key", NULL, why,
				"WWW-Authenticate: Bearer\r\n");
		return;
	}
	if (t) {
		x->tenant = t;
		fg_tenant_ref(t);
		learn_source(c, t);
	}
	bool priced = x->api != FG_API_NONE &&
		      (x->api != FG_API_PASSTHROUGH || x->route.pass->units > 0);
	if (t && priced)
		metered(c);
	else
		unmetered(c);
}

/* ---- I/O ----------------------------------------------------------------- */

/* The common request (fg_req_head_fast's form, its whole body already
 * read) taken without http_parser, leaving c as the parser callbacks above
 * would have: false when http_parser is to read it. */
static bool fast_request(struct fg_client *c)
{
	struct fg_exchange *x = c->x;
	const char *p = fg_buf_head(&c->in);
	size_t n = fg_buf_used(&c->in);
	int method;
	uint32_t url, url_len;
	uint64_t clen;
	size_t head = fg_req_head_fast(p, n, &x->hdrs, &method, &url, &url_len, &clen);

	if (!head)
		return false;
	uint64_t body = clen == UINT64_MAX ? 0 : clen;
	/* the request is all c->in holds (nothing pipelined after it): its
	 * block becomes the body, which is then never copied */
	bool adopt = body && n == head + body;
	bool taken = body <= c->px->max_body && n - head >= body && fg_buffered_take(c->px, body);
	if (!taken || (body && !adopt && fg_buf_reserve(&x->body, body))) {
		/* a 413, a body still on its way, no memory: http_parser's cases */
		if (taken)
			c->px->buffered -= body;
		fg_hdrs_reset(&x->hdrs);
		return false;
	}
	x->started = x->headers_done = x->complete = true;
	x->started_ns = fg_now_ns();
	x->url = url;
	x->url_len = url_len;
	/* what the rest of the proxy reads from the parser: HTTP/1.1 without
	 * Connection keeps the connection */
	c->parser.method = (unsigned)method;
	c->parser.http_major = 1;
	c->parser.http_minor = 1;
	c->keep_alive = true;
	x->body_held = body;
	if (adopt) {
		x->body = c->in;
		x->body.off += head;
		c->in = (struct fg_buf){ 0 };
		return true;
	}
	fg_buf_append(&x->body, p + head, body); /* room reserved above */
	fg_buf_consume(&c->in, head + body);
	return true;
}

/* With workers, without the lock (client_cb): a whole request that came in
 * one read is taken (fast_request touches only c and the proxy's atomics)
 * and, on a connection that authenticated before and sends the key it
 * remembers, its body is checked for its built-in route's API (the scan
 * parse_body then finishes); no policy is read, so the key, the route,
 * the tenant and admission are still judged under the lock
 * (handle_request). A connection that never authenticated gets no check
 * before it has. true: taken, for process_input to handle. */
static bool take_whole_alone(struct fg_client *c)
{
	if (!c->memo || !fg_buf_used(&c->in) || (c->x && c->x->started))
		return false;
	if (!c->x && !exchange_new(c))
		return false; /* process_input says so, under the lock */
	struct fg_exchange *x = c->x;
	if (!fast_request(c))
		return false;
	size_t len, tlen = 0;
	const char *v = fg_hdrs_get(&x->hdrs, "authorization", &len);
	const char *tok = v ? fg_bearer_token(v, len, &tlen) : NULL;
	struct fg_route rt;
	const char *why;
	if (tok && tlen == c->memo->len && !memcmp(tok, c->memo->key, tlen) &&
	    !fg_hdrs_get(&x->hdrs, FG_TENANT_HEADER, &len) && fg_buf_used(&x->body) &&
	    fg_route_target(NULL, method_bit(c->parser.method), x->hdrs.raw.data + x->url,
			    x->url_len, &rt, &why) == FG_ROUTE_OK &&
	    rt.api != FG_API_NONE && (x->scan = fg_request_scan_new(rt.api)))
		fg_request_scan_feed(x->scan, fg_buf_head(&x->body), fg_buf_used(&x->body));
	return true;
}

/* Body bytes read_input received into the body's tail, not yet parsed:
 * they come before anything in c->in. */
static size_t fresh_body(const struct fg_client *c)
{
	return c->x ? c->x->body_fresh : 0;
}

/* The parser over the next input: the fresh body bytes where they lie (it
 * hands them to on_body, which commits them in place), else c->in. */
static size_t parse_next(struct fg_client *c, size_t *used)
{
	struct fg_exchange *x = c->x;

	if (x->body_fresh) {
		*used = x->body_fresh;
		x->body_fresh = 0;
		return http_parser_execute(&c->parser, &fg_client_req_settings, x->body.data + x->body.len,
					   *used);
	}
	*used = fg_buf_used(&c->in);
	size_t n = http_parser_execute(&c->parser, &fg_client_req_settings, fg_buf_head(&c->in), *used);
	fg_buf_consume(&c->in, n);
	return n;
}

static void process_input(struct fg_client *c)
{
	/* client_cb parsed the body's fresh bytes without the lock: what the
	 * parser stopped at is acted on first */
	bool parsed = c->parsed_alone;

	c->parsed_alone = false;
	while (c->state == CL_READING && (parsed || fg_buf_used(&c->in) || fresh_body(c))) {
		if (!c->x && !exchange_new(c)) {
			begin_closing(c); /* no memory for a request: it cannot be answered */
			break;
		}
		size_t used = 0, n = 0;
		if (parsed) {
			parsed = false;
		} else if (!c->x->started && fast_request(c)) {
			handle_request(c);
			continue;
		} else {
			n = parse_next(c, &used);
		}
		if (c->x->heads_pending) {
			http_parser_pause(&c->parser, 0);
			if (!check_heads(c))
				break;
			continue;
		}
		if (c->x->complete) {
			http_parser_pause(&c->parser, 0);
			handle_request(c);
			continue;
		}
		if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
			bad_http(c);
			break;
		}
		if (n < used)
			break; /* cannot happen without an error; do not spin */
	}
	if (!fg_buf_used(&c->in))
		fg_buf_free(&c->in); /* sized again by what arrives next */
	fg_client_timer_due(c); /* the header and body deadlines the parser set */
}

/* A Content-Length body is on its way: its head judged, bytes of it still
 * to come (not counting any already received but unparsed). */
static bool body_arriving(const struct fg_client *c)
{
	const struct fg_exchange *x = c->x;

	return c->state == CL_READING && x && x->headers_done && !x->heads_pending && !x->complete &&
	       x->body_left > x->body_fresh;
}

/* A request's head is still to come (or to complete): with workers it is
 * received without the lock, and parsed under it (its end judges the key,
 * the tenant, the limits). */
static bool reading_head(const struct fg_client *c)
{
	return c->state == CL_READING && !(c->x && c->x->headers_done);
}

/* Where the next recv of a Content-Length body may land straight in the
 * body (no copy through c->in): the room there, up to what the body still
 * lacks; 0 when it goes through c->in (no such body, bytes of it still in
 * c->in, or no memory). A keyed client's body has its declared room
 * already (check_heads); any other grows at most by what it holds (or one
 * chunk), after the parser has taken what the room holds, so its memory
 * follows what arrived. */
static size_t body_room(struct fg_client *c)
{
	struct fg_exchange *x = c->x;

	if (!body_arriving(c) || fg_buf_used(&c->in))
		return 0;
	uint64_t left = x->body_left - x->body_fresh;
	struct fg_buf *b = &x->body;
	size_t room = b->cap - b->len - x->body_fresh;

	if (!room && !x->body_fresh) {
		size_t grow = fg_buf_used(b) > READ_CHUNK ? fg_buf_used(b) : READ_CHUNK;
		if (fg_buf_reserve(b, grow < left ? grow : (size_t)left))
			return 0;
		room = b->cap - b->len;
	}
	/* one wakeup's reads hand the parser at most FG_READ_AHEAD_MAX, as
	 * through c->in: a large body does not stall the other connections */
	size_t wakeup = FG_READ_AHEAD_MAX > x->body_fresh ? FG_READ_AHEAD_MAX - x->body_fresh : 0;
	if (room > wakeup)
		room = wakeup;
	return room < left ? room : (size_t)left;
}

/* Returns -1 when out of memory (the caller closes c, under the lock). A
 * Content-Length body is received into its own buffer (body_room);
 * anything else lands in one chunk shared by a thread's clients and only
 * what arrived is copied into the client's own, so a connection holds no
 * read buffer it is not using. */
static int read_input(struct fg_client *c)
{
	static __thread char chunk[READ_CHUNK];

	for (;;) {
		if (c->state != CL_READING && c->state != CL_CLOSING &&
		    fg_buf_used(&c->in) >= FG_PIPELINE_MAX)
			return 0; /* enough read ahead; EPOLLRDHUP still reports a hangup */
		if (c->state == CL_READING && fg_buf_used(&c->in) >= FG_READ_AHEAD_MAX)
			return 0; /* the parser takes this first; epoll calls again */
		struct fg_exchange *x = c->x;
		size_t room = body_room(c);
		if (!room && fresh_body(c) && x->body_left > x->body_fresh)
			return 0; /* room full, or a wakeup's worth read: parsed first */
		char *into = room ? x->body.data + x->body.len + x->body_fresh : chunk;
		size_t want = room ? room : sizeof(chunk);
		/* with workers, a new request's first read takes about a head:
		 * the body after it is then read and checked without the lock
		 * (client_cb), not parsed from c->in under it */
		if (!room && reading_head(c) && fg_loop_shared(c->loop) && want > HEAD_READ)
			want = HEAD_READ;
		ssize_t n = recv(c->fd, into, want, MSG_DONTWAIT);
		if (n > 0) {
			if (room)
				x->body_fresh += (size_t)n;
			else if (c->state == CL_CLOSING) /* lingering: discard */
				continue;
			else if (fg_buf_append(&c->in, chunk, (size_t)n))
				return -1;
			if ((size_t)n < want)
				return 0; /* drained; epoll says when there is more */
			/* with workers, a head is parsed first, so the body after it
			 * is read and checked without the lock; alone, reading on
			 * measured faster (bench/proxy.sh: 1.30x nginx at 1 MiB
			 * against 0.96x, the socket read less per wakeup) */
			if (!room && reading_head(c) && fg_loop_shared(c->loop))
				return 0;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		c->read_eof = true;
		return 0;
	}
}

static void client_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_client *c = ctx;
	(void)loop; /* c->loop */
	(void)fd;

	if (events & EPOLLOUT && flush_or_close(c))
		return;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		int r;
		/* With workers, a head is received, and a body still arriving
		 * received and checked, without the shared lock: no other thread
		 * touches a client while it is alone (the reload's timer pull-in
		 * skips it), and the parse of body bytes touches only it, its
		 * exchange and the proxy's atomics (the budget, the limits). The
		 * head is parsed, and what the body's parse stopped at acted on,
		 * under the lock (process_input). */
		bool head = reading_head(c);
		if ((head || body_arriving(c)) && fg_client_go_alone(c)) {
			r = read_input(c);
			if (!r && fresh_body(c)) {
				size_t used;
				parse_next(c, &used);
				c->parsed_alone = true;
			} else if (!r && head && take_whole_alone(c)) {
				c->parsed_alone = true;
			}
			fg_client_back(c);
		} else {
			r = read_input(c);
		}
		if (r) {
			fg_client_close(c);
			return;
		}
		/* a client that leaves mid-exchange is billed what it got
		 * (fg_client_close settles); an idle one just goes */
		if (c->read_eof && (c->state != CL_READING ||
				    (!fg_buf_used(&c->in) && !fresh_body(c) && !c->parsed_alone))) {
			fg_client_close(c);
			return;
		}
		process_input(c);
		if (c->read_eof && c->state == CL_READING) {
			fg_client_close(c); /* EOF inside a request: nothing to answer */
			return;
		}
	}
	flush_or_close(c);
}

/* c's timeouts at `now`. -1: c is gone (closed and freed). */
static int client_timeouts(struct fg_client *c, uint64_t now)
{
	if (c->state == CL_UPSTREAM && fg_buf_used(&c->out) &&
	    now - c->last_progress_ns > c->px->idle_ns) {
		fg_client_close(c); /* stopped reading a response: billed what it got */
		return -1;
	}
	if (now < c->deadline_ns)
		return 0;
	if (c->state == CL_READING && c->timeout_status) {
		count_refusal(c, FG_OUT_BAD_REQUEST);
		if (c->x)
			c->x->complete = false;
		fg_client_error(c, 408, "invalid_request_error", "request_timeout", NULL,
				c->x && c->x->headers_done ? "the request body did not arrive in time"
						  : "the request headers did not arrive in time",
				NULL);
		return flush_or_close(c);
	}
	if (c->state == CL_READING || c->state == CL_CLOSING) {
		fg_client_close(c);
		return -1;
	}
	return 0;
}

/* Due at (or, when a timeout moved away, before) c's nearest timeout:
 * handle what is due, then re-arm the same timer at the nearest one left. */
static void client_timer_cb(struct fg_loop *loop, void *ctx)
{
	struct fg_client *c = ctx;

	if (client_timeouts(c, fg_now_ns()))
		return;
	fg_loop_timer_move(loop, c->timer, client_due(c));
}

/* After an answer written from outside the read path (engine failure):
 * serve what the client pipelined meanwhile, and flush. */
void fg_client_resume(struct fg_client *c)
{
	process_input(c);
	flush_or_close(c);
}

/* The exchange is over (response relayed, or an error answered by the
 * upstream side): next request, or close. */
void fg_client_exchange_done(struct fg_client *c)
{
	bool keep = c->keep_alive && !c->x->resp_until_close && !c->read_eof;

	exchange_reset(c);
	if (!keep) {
		begin_closing(c);
		flush_or_close(c);
		return;
	}
	c->state = CL_READING;
	set_deadline(c, fg_now_ns() + c->px->idle_ns, 0);
	process_input(c);
	flush_or_close(c);
}
