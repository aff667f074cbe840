/* sim_http.h — the simulator's HTTP/1.1 server side: listening socket,
 * keep-alive connections, request parsing (libhttp-parser), buffered
 * non-blocking writes, chunked streaming.
 *
 * One request per connection is served at a time; pipelined requests wait
 * in the input buffer (the parser is paused) until the current response is
 * finished. Malformed HTTP gets a 400 and the connection is closed.
 */
#ifndef FAIRGATE_SIM_HTTP_H
#define FAIRGATE_SIM_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/event_loop.h"

struct sim_http_server;
struct sim_http_conn;

struct sim_http_request {
	const char *method;   /* "GET", "POST", ... */
	const char *path;     /* without the query string */
	const char *body;
	size_t body_len;
	const char *authorization; /* the Authorization header, NULL if absent */
	bool cookie;          /* a Cookie header came (the gateway must strip it) */
};

struct sim_http_callbacks {
	/* A complete request; the handler must eventually finish a response
	 * (sim_http_respond or stream_begin..stream_end) unless the connection
	 * closes first. */
	void (*on_request)(void *ctx, struct sim_http_conn *c, const struct sim_http_request *r);
	/* The connection is going away; drop any reference to it. */
	void (*on_close)(void *ctx, struct sim_http_conn *c);
};

struct sim_http_server *sim_http_listen(struct fg_loop *loop, const char *host, uint16_t port,
					size_t max_body, const struct sim_http_callbacks *cb,
					void *ctx, char *errbuf, size_t errlen);
/* The port actually bound (useful with port 0). */
uint16_t sim_http_port(const struct sim_http_server *s);
uint32_t sim_http_num_connections(const struct sim_http_server *s);
/* Close every connection and the listener. */
void sim_http_free(struct sim_http_server *s);

/* Per-request state the handler can hang on a connection. */
void sim_http_set_user(struct sim_http_conn *c, void *user);
void *sim_http_user(const struct sim_http_conn *c);

/* The answer to the request being served keeps its keep-alive headers,
 * then the connection is closed with a reset (a zero linger): an engine
 * that drops a pooled connection without notice (fg-fake-engine). */
void sim_http_reset_after(struct sim_http_conn *c);

/* A complete response. `headers` is "" or lines each ending in "\r\n". */
void sim_http_respond(struct sim_http_conn *c, int status, const char *content_type,
		      const char *headers, const char *body, size_t len);

/* A chunked response: begin, any number of chunks, end. */
void sim_http_stream_begin(struct sim_http_conn *c, int status, const char *content_type,
			   const char *headers);
void sim_http_stream_chunk(struct sim_http_conn *c, const char *data, size_t len);
void sim_http_stream_end(struct sim_http_conn *c);

const char *sim_http_status_text(int status);

#endif
