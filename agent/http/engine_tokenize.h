/* engine_tokenize.h — one call to the engine's POST /tokenize: the exact
 * prompt count a request's admission waits for when its estimate lands near
 * a limit (agent/proxy/proxy_client.c decides when).
 *
 * A one-shot HTTP/1.1 exchange on the agent's loop over a socket the caller
 * has started connecting (so transparent mode's exempt source ports apply),
 * bounded by a time limit. The callback runs exactly once, from the loop,
 * never inside fg_tokenize_start; after it the call is gone. Cancelling
 * (the client left) closes the connection and calls nothing. */
#ifndef FAIRGATE_ENGINE_TOKENIZE_H
#define FAIRGATE_ENGINE_TOKENIZE_H

#include <stddef.h>
#include <stdint.h>
#include "lib/event_loop.h"

enum fg_tokenize_result {
	FG_TOKENIZE_OK = 0,
	FG_TOKENIZE_FAILED,       /* connect, I/O, not 200, an answer without a count */
	FG_TOKENIZE_TIMEOUT,
};

#define FG_TOKENIZE_ANSWER_MAX (32u << 20) /* the token ids come back too */

typedef void (*fg_tokenize_cb)(void *ctx, enum fg_tokenize_result r, uint64_t count,
			       uint64_t max_model_len, int http_status);

struct fg_tokenize;
/* fd: a non-blocking socket with connect(2) under way (or done). Takes
 * ownership of fd in every case. NULL when out of memory (fd closed). */
/* AUTH_LINE: "Authorization: Bearer KEY\r\n" when the engine takes a
 * key (never a tenant's), "" otherwise. */
struct fg_tokenize *fg_tokenize_start(struct fg_loop *loop, int fd, const char *auth_line,
				      const char *body, size_t len, uint64_t timeout_ns,
				      fg_tokenize_cb cb, void *ctx);
void fg_tokenize_cancel(struct fg_tokenize *t);

#endif
