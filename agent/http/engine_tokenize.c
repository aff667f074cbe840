/* engine_tokenize.c — POST /tokenize to the engine; see the header. */
#include <errno.h>
#include <http_parser.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/buf.h"
#include "agent/http/engine_tokenize.h"
#include "agent/http/http_request.h"

struct fg_tokenize {
	struct fg_loop *loop;
	int fd;
	bool connected;
	struct fg_buf out, answer;
	uint64_t timer;
	http_parser parser;
	bool complete, too_big;
	fg_tokenize_cb cb;
	void *ctx;
};

static void release(struct fg_tokenize *t)
{
	if (t->timer)
		fg_loop_timer_cancel(t->loop, t->timer);
	fg_loop_del(t->loop, t->fd);
	close(t->fd);
	fg_buf_free(&t->out);
	fg_buf_free(&t->answer);
	free(t);
}

static void done(struct fg_tokenize *t, enum fg_tokenize_result r)
{
	uint64_t count = 0, max_len = 0;
	int status = t->complete ? (int)t->parser.status_code : 0;

	if (r == FG_TOKENIZE_OK &&
	    (status != 200 || fg_tokenize_answer(fg_buf_head(&t->answer), fg_buf_used(&t->answer),
						 &count, &max_len)))
		r = FG_TOKENIZE_FAILED;
	fg_tokenize_cb cb = t->cb;
	void *ctx = t->ctx;
	release(t);
	cb(ctx, r, count, max_len, status);
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct fg_tokenize *t = p->data;

	if (fg_buf_used(&t->answer) + len > FG_TOKENIZE_ANSWER_MAX) {
		t->too_big = true;
		return -1;
	}
	return fg_buf_append(&t->answer, at, len);
}

static int on_complete(http_parser *p)
{
	((struct fg_tokenize *)p->data)->complete = true;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_body = on_body,
	.on_message_complete = on_complete,
};

static void on_timeout(struct fg_loop *loop, void *ctx)
{
	struct fg_tokenize *t = ctx;
	(void)loop;

	t->timer = 0;
	done(t, FG_TOKENIZE_TIMEOUT);
}

static void on_io(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_tokenize *t = ctx;
	(void)loop;

	if (!t->connected) {
		int err = 0;
		socklen_t l = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
			done(t, FG_TOKENIZE_FAILED);
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		t->connected = true;
	}
	while (fg_buf_used(&t->out)) {
		ssize_t n = send(fd, fg_buf_head(&t->out), fg_buf_used(&t->out),
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			done(t, FG_TOKENIZE_FAILED);
			return;
		}
		fg_buf_consume(&t->out, (size_t)n);
		if (!fg_buf_used(&t->out))
			fg_loop_mod(t->loop, fd, EPOLLIN | EPOLLRDHUP);
	}
	if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	for (;;) {
		char buf[16384];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			done(t, FG_TOKENIZE_FAILED);
			return;
		}
		/* n == 0 ends a body delimited by the connection's close */
		size_t used = http_parser_execute(&t->parser, &settings, n ? buf : NULL, (size_t)n);
		if (t->complete) {
			done(t, FG_TOKENIZE_OK);
			return;
		}
		if (n == 0 || used != (size_t)n || HTTP_PARSER_ERRNO(&t->parser) != HPE_OK) {
			done(t, FG_TOKENIZE_FAILED);
			return;
		}
	}
}

struct fg_tokenize *fg_tokenize_start(struct fg_loop *loop, int fd, const char *auth_line,
				      const char *body, size_t len, uint64_t timeout_ns,
				      fg_tokenize_cb cb, void *ctx)
{
	struct fg_tokenize *t = calloc(1, sizeof(*t));

	if (!t) {
		close(fd);
		return NULL;
	}
	t->loop = loop;
	t->fd = fd;
	t->cb = cb;
	t->ctx = ctx;
	http_parser_init(&t->parser, HTTP_RESPONSE);
	t->parser.data = t;
	/* the engine's own key at most: it never sees a tenant's for this */
	if (fg_buf_printf(&t->out,
			  "POST /tokenize HTTP/1.1\r\nHost: engine\r\nUser-Agent: fairgated\r\n"
			  "Content-Type: application/json\r\nAccept: application/json\r\n"
			  "Connection: close\r\n%sContent-Length: %zu\r\n\r\n",
			  auth_line ? auth_line : "", len) ||
	    fg_buf_append(&t->out, body, len) ||
	    fg_loop_add(loop, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, on_io, t)) {
		close(fd);
		fg_buf_free(&t->out);
		free(t);
		return NULL;
	}
	t->timer = fg_loop_timer(loop, timeout_ns, on_timeout, t);
	return t;
}

void fg_tokenize_cancel(struct fg_tokenize *t)
{
	if (t)
		release(t);
}
