/* sim_http.c — listener, connections, parsing and writes; see sim_http.h. */
#include "sim_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sim/openai_error.h" /* the OpenAI error shape for 400/413 */
#include "sim/sim_cli.h"

#define READ_CHUNK 65536
#define MAX_URL 8192
#define MAX_HEADER_VALUE 8192 /* longer values are dropped, never truncated */
#define ACCEPT_BATCH 64

struct buf {
	char *p;
	size_t len, cap;
};

struct sim_http_conn {
	struct sim_http_server *srv;
	int fd;
	http_parser parser;
	struct buf in;          /* received, not yet parsed: in.p[in_off..in.len) */
	size_t in_off;
	struct buf out;         /* to send: out.p[out_off..out.len) */
	size_t out_off;
	struct buf url, body;
	struct buf hfield, hvalue;
	bool hvalue_last;       /* the parser's last header callback was a value */
	bool hvalue_dropped;    /* the current value was too long to keep */
	struct buf auth;        /* the first Authorization header's value */
	bool has_auth;          /* auth holds it (it was kept) */
	bool has_cookie;        /* a Cookie header came */
	bool auth_seen;         /* an Authorization header came: later ones are ignored */
	bool expect_continue;
	bool too_large;
	bool in_request;        /* a complete request is being served */
	bool keep_alive;
	bool close_after_write;
	bool reset_after;       /* sim_http_reset_after: this answer, then a reset */
	bool want_out;          /* EPOLLOUT registered */
	bool closed;
	bool dead;              /* a write failed: close from the loop */
	bool parsing;           /* inside conn_parse: a response finished there
				   lets its loop go on rather than recurse */
	uint64_t close_timer;
	void *user;
	struct sim_http_conn *prev, *next;
};

struct sim_http_server {
	struct fg_loop *loop;
	int fd;
	uint16_t port;
	size_t max_body;
	struct sim_http_callbacks cb;
	void *ctx;
	http_parser_settings settings;
	struct sim_http_conn *conns;
	uint32_t n_conns;
};

static void conn_close(struct sim_http_conn *c);
static void conn_parse(struct sim_http_conn *c);
static void conn_flush(struct sim_http_conn *c);
static void conn_out(struct sim_http_conn *c, const char *data, size_t len);
static void schedule_close(struct sim_http_conn *c);

static int buf_put(struct buf *b, const char *data, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

const char *sim_http_status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 413: return "Payload Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

/* ---- parser callbacks ------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
	struct sim_http_conn *c = p->data;

	c->url.len = c->body.len = 0;
	c->hfield.len = c->hvalue.len = c->auth.len = 0;
	c->hvalue_last = c->hvalue_dropped = false;
	c->has_auth = c->auth_seen = c->has_cookie = false;
	c->expect_continue = false;
	c->too_large = false;
	return 0;
}

static void header_done(struct sim_http_conn *c)
{
	if (c->hfield.p && c->hvalue.p && !strcasecmp(c->hfield.p, "expect") &&
	    !strcasecmp(c->hvalue.p, "100-continue"))
		c->expect_continue = true;
	/* the first one counts, as starlette's Headers.get reads it; one too
	 * long to keep is absent (so it matches no key), and a later one does
	 * not stand in for it */
	if (c->hfield.p && !strcasecmp(c->hfield.p, "authorization") && !c->auth_seen) {
		c->auth_seen = true;
		c->has_auth = !c->hvalue_dropped &&
			      !buf_put(&c->auth, c->hvalue.p ? c->hvalue.p : "", c->hvalue.len);
	}
	if (c->hfield.p && !strcasecmp(c->hfield.p, "cookie"))
		c->has_cookie = true;
	c->hvalue_dropped = false;
	c->hfield.len = c->hvalue.len = 0;
	if (c->hfield.p)
		c->hfield.p[0] = '\0';
	if (c->hvalue.p)
		c->hvalue.p[0] = '\0';
}

/* Only Expect matters to us; http-parser itself handles Content-Length,
 * Transfer-Encoding and Connection. Names and values may arrive in pieces. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct sim_http_conn *c = p->data;

	if (c->hvalue_last)
		header_done(c);
	c->hvalue_last = false;
	if (c->hfield.len + len > 256)
		return 0; /* a name this long is none we care about */
	return buf_put(&c->hfield, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct sim_http_conn *c = p->data;

	c->hvalue_last = true;
	if (c->hvalue_dropped || c->hvalue.len + len > MAX_HEADER_VALUE) {
		c->hvalue_dropped = true;
		return 0;
	}
	return buf_put(&c->hvalue, at, len);
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct sim_http_conn *c = p->data;

	if (c->url.len + len > MAX_URL)
		return -1;
	return buf_put(&c->url, at, len);
}

static int on_headers_complete(http_parser *p)
{
	struct sim_http_conn *c = p->data;

	header_done(c);
	if (p->content_length != ULLONG_MAX && p->content_length > c->srv->max_body)
		c->too_large = true;
	/* curl asks before sending large bodies; answer rather than make it wait */
	if (c->expect_continue && !c->too_large)
		conn_out(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct sim_http_conn *c = p->data;

	if (c->too_large || c->body.len + len > c->srv->max_body) {
		c->too_large = true;
		return 0;
	}
	return buf_put(&c->body, at, len);
}

static int on_message_complete(http_parser *p)
{
	struct sim_http_conn *c = p->data;

	c->in_request = true;
	c->keep_alive = http_should_keep_alive(p);
	http_parser_pause(p, 1); /* one request at a time */
	return 0;
}

static void dispatch(struct sim_http_conn *c)
{
	struct sim_http_server *s = c->srv;
	char *q = strchr(c->url.p ? c->url.p : "", '?');

	if (q)
		*q = '\0';
	if (c->too_large) {
		struct sim_error err;
		sim_error_set(&err, 413, NULL, "request body larger than %zu bytes", s->max_body);
		char *j = sim_error_json(&err);
		c->keep_alive = false;
		sim_http_respond(c, 413, "application/json", "", j ? j : "", j ? strlen(j) : 0);
		free(j);
		return;
	}
	struct sim_http_request r = {
		.method = http_method_str(c->parser.method),
		.path = c->url.p ? c->url.p : "/",
		.body = c->body.p ? c->body.p : "",
		.body_len = c->body.len,
		.authorization = c->has_auth ? (c->auth.p ? c->auth.p : "") : NULL,
		.cookie = c->has_cookie,
	};
	s->cb.on_request(s->ctx, c, &r);
}

static void respond_bad_http(struct sim_http_conn *c, const char *why)
{
	struct sim_error err;

	sim_error_set(&err, 400, NULL, "malformed HTTP request: %s", why);
	char *j = sim_error_json(&err);
	c->keep_alive = false;
	c->in_request = true;
	sim_http_respond(c, 400, "application/json", "", j ? j : "", j ? strlen(j) : 0);
	free(j);
}

/* Feed buffered input to the parser, one request at a time: a request
 * answered at once lets the loop parse the next (pipelining), iteratively,
 * however many a client sends. */
static void conn_parse(struct sim_http_conn *c)
{
	if (c->parsing)
		return;
	c->parsing = true;
	while (!c->closed && !c->dead && !c->close_after_write && !c->in_request &&
	       c->in_off < c->in.len) {
		size_t avail = c->in.len - c->in_off;
		size_t n = http_parser_execute(&c->parser, &c->srv->settings, c->in.p + c->in_off,
					       avail);
		enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
		c->in_off += n;
		if (e == HPE_PAUSED) {
			http_parser_pause(&c->parser, 0);
			dispatch(c); /* may answer at once; the loop then parses on */
			continue;
		}
		if (e != HPE_OK) {
			respond_bad_http(c, http_errno_description(e));
			break;
		}
		if (n == avail)
			break;
	}
	c->parsing = false;
	if (c->in_off == c->in.len)
		c->in_off = c->in.len = 0;
}

/* ---- writes ------------------------------------------------------------------- */

static void conn_out(struct sim_http_conn *c, const char *data, size_t len)
{
	if (c->closed || c->dead)
		return;
	if (buf_put(&c->out, data, len))
		c->close_after_write = true;
}

static void conn_printf(struct sim_http_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void conn_printf(struct sim_http_conn *c, const char *fmt, ...)
{
	char tmp[2048];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		conn_out(c, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void response_done(struct sim_http_conn *c)
{
	c->in_request = false;
	c->user = NULL;
	if (!c->keep_alive || c->reset_after)
		c->close_after_write = true;
	conn_flush(c);
	if (c->close_after_write || c->dead)
		schedule_close(c);
	else
		conn_parse(c);
}

void sim_http_respond(struct sim_http_conn *c, int status, const char *content_type,
		      const char *headers, const char *body, size_t len)
{
	conn_printf(c, "HTTP/1.1 %d %s\r\nServer: fairgate-sim\r\n", status,
		    sim_http_status_text(status));
	if (content_type)
		conn_printf(c, "Content-Type: %s\r\n", content_type);
	conn_printf(c, "Content-Length: %zu\r\n%s%s\r\n", len, headers ? headers : "",
		    c->keep_alive ? "" : "Connection: close\r\n");
	conn_out(c, body, len);
	response_done(c);
}

void sim_http_stream_begin(struct sim_http_conn *c, int status, const char *content_type,
			   const char *headers)
{
	conn_printf(c, "HTTP/1.1 %d %s\r\nServer: fairgate-sim\r\nContent-Type: %s\r\n"
		       "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n%s%s\r\n",
		    status, sim_http_status_text(status), content_type, headers ? headers : "",
		    c->keep_alive ? "" : "Connection: close\r\n");
	conn_flush(c);
}

void sim_http_stream_chunk(struct sim_http_conn *c, const char *data, size_t len)
{
	if (!len)
		return;
	conn_printf(c, "%zx\r\n", len);
	conn_out(c, data, len);
	conn_out(c, "\r\n", 2);
	conn_flush(c);
}

void sim_http_stream_end(struct sim_http_conn *c)
{
	conn_out(c, "0\r\n\r\n", 5);
	response_done(c);
}

static void update_interest(struct sim_http_conn *c, bool want_out)
{
	if (want_out == c->want_out)
		return;
	c->want_out = want_out;
	fg_loop_mod(c->srv->loop, c->fd, EPOLLIN | EPOLLRDHUP | (want_out ? EPOLLOUT : 0));
}

static void conn_flush(struct sim_http_conn *c)
{
	while (!c->closed && c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL);
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			update_interest(c, true);
			return;
		}
		c->dead = true; /* the peer is gone; close from the loop, never from
				   inside a caller that still holds this connection */
		c->out_off = c->out.len = 0;
		schedule_close(c);
		return;
	}
	c->out_off = c->out.len = 0;
	update_interest(c, false);
}

static void close_timer_fired(struct fg_loop *loop, void *ctx)
{
	struct sim_http_conn *c = ctx;

	(void)loop;
	c->close_timer = 0;
	conn_close(c);
}

static void schedule_close(struct sim_http_conn *c)
{
	if (!c->close_timer && !c->closed)
		c->close_timer = fg_loop_timer(c->srv->loop, 0, close_timer_fired, c);
}

/* ---- connection lifecycle ----------------------------------------------------- */

static void conn_close(struct sim_http_conn *c)
{
	struct sim_http_server *s = c->srv;

	if (c->closed)
		return;
	c->closed = true;
	if (c->close_timer)
		fg_loop_timer_cancel(s->loop, c->close_timer);
	if (s->cb.on_close)
		s->cb.on_close(s->ctx, c);
	fg_loop_del(s->loop, c->fd);
	if (c->reset_after) {
		/* a zero linger: the close sends RST, not FIN */
		struct linger now = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
	}
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	free(c->in.p);
	free(c->out.p);
	free(c->url.p);
	free(c->body.p);
	free(c->hfield.p);
	free(c->hvalue.p);
	free(c->auth.p);
	free(c);
}

static void conn_readable(struct sim_http_conn *c)
{
	char tmp[READ_CHUNK];

	if (c->in_off) { /* keep only unparsed bytes, so a pipelining client cannot grow us */
		memmove(c->in.p, c->in.p + c->in_off, c->in.len - c->in_off);
		c->in.len -= c->in_off;
		c->in_off = 0;
	}
	for (;;) {
		ssize_t n = recv(c->fd, tmp, sizeof(tmp), 0);
		if (n > 0) {
			/* bounded: a client may pipeline, not flood */
			if (c->in.len - c->in_off + (size_t)n > c->srv->max_body + 2 * MAX_URL + 65536 ||
			    buf_put(&c->in, tmp, (size_t)n)) {
				c->dead = true;
				return;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* EOF or error: the client is gone (vLLM aborts the request too) */
		c->dead = true;
		return;
	}
	conn_parse(c);
}

static void conn_event(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct sim_http_conn *c = ctx;

	(void)loop;
	(void)fd;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		conn_readable(c);
	if (!c->dead && (events & EPOLLOUT))
		conn_flush(c);
	if (c->dead || (events & (EPOLLHUP | EPOLLERR)) ||
	    (c->close_after_write && !c->in_request && c->out_off == c->out.len))
		conn_close(c);
}

static void accept_ready(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct sim_http_server *s = ctx;

	(void)events;
	/* bounded, so a connection storm cannot keep the loop from the signalfd */
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			/* out of descriptors: parked for a while rather than spun on */
			if (fg_loop_accept_failed(loop, fd, errno))
				return;
			continue;
		}
		struct sim_http_conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(cfd);
			continue;
		}
		int one = 1;
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->srv = s;
		c->fd = cfd;
		http_parser_init(&c->parser, HTTP_REQUEST);
		c->parser.data = c;
		if (fg_loop_add(loop, cfd, EPOLLIN | EPOLLRDHUP, conn_event, c)) {
			close(cfd);
			free(c);
			continue;
		}
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->n_conns++;
	}
}

struct sim_http_server *sim_http_listen(struct fg_loop *loop, const char *host, uint16_t port,
					size_t max_body, const struct sim_http_callbacks *cb,
					void *ctx, char *errbuf, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	if (fg_sockaddr_numeric(host, port, &ss, &sl)) {
		snprintf(errbuf, errlen, "listen address '%s' is not a numeric IPv4/IPv6 address",
			 host);
		return NULL;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0) {
		snprintf(errbuf, errlen, "socket: %s", strerror(errno));
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 4096)) {
		snprintf(errbuf, errlen, "bind/listen %s:%u: %s", host, port, strerror(errno));
		close(fd);
		return NULL;
	}
	struct sim_http_server *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						: ((struct sockaddr_in6 *)&ss)->sin6_port);
	s->loop = loop;
	s->fd = fd;
	s->max_body = max_body;
	s->cb = *cb;
	s->ctx = ctx;
	s->settings.on_message_begin = on_message_begin;
	s->settings.on_url = on_url;
	s->settings.on_header_field = on_header_field;
	s->settings.on_header_value = on_header_value;
	s->settings.on_headers_complete = on_headers_complete;
	s->settings.on_body = on_body;
	s->settings.on_message_complete = on_message_complete;
	if (fg_loop_add(loop, fd, EPOLLIN, accept_ready, s)) {
		snprintf(errbuf, errlen, "epoll: %s", strerror(errno));
		close(fd);
		free(s);
		return NULL;
	}
	return s;
}

uint16_t sim_http_port(const struct sim_http_server *s) { return s->port; }
uint32_t sim_http_num_connections(const struct sim_http_server *s) { return s->n_conns; }
void sim_http_reset_after(struct sim_http_conn *c)
{
	c->reset_after = true;
}

void sim_http_set_user(struct sim_http_conn *c, void *user) { c->user = user; }
void *sim_http_user(const struct sim_http_conn *c) { return c->user; }

void sim_http_free(struct sim_http_server *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_close(s->conns);
	fg_loop_del(s->loop, s->fd);
	close(s->fd);
	free(s);
}
