/* http_sse.h — relay of a streamed (text/event-stream) completion.
 *
 * Events pass through as they complete, byte for byte, except the usage
 * chunk the agent forced on (choices: [], usage: {...}) when the client did
 * not ask for it. Usage is read from whichever event carries it (the final
 * chunk, or every chunk with continuous_usage_stats), and content events
 * are counted so a stream cut short can be billed for what was delivered. */
#ifndef FAIRGATE_HTTP_SSE_H
#define FAIRGATE_HTTP_SSE_H

#include <stdbool.h>
#include <stdint.h>
#include "agent/buf.h"
#include "policy/pricing.h"

struct fg_sse {
	struct fg_buf pending;      /* an event not yet complete */
	size_t scanned;             /* bytes of pending already searched for an end */
	bool hide_usage_chunk;
	bool have_usage;
	struct fg_usage usage;
	uint64_t content_events;    /* events with choices: ~ tokens delivered */
	bool saw_done;
};

void fg_sse_init(struct fg_sse *s, bool hide_usage_chunk);
void fg_sse_free(struct fg_sse *s);
/* Feed decoded body bytes; appends what the client gets to out. 0 or -1 (OOM). */
int fg_sse_feed(struct fg_sse *s, const char *p, size_t n, struct fg_buf *out);
/* End of stream: a trailing partial event goes out as it is. */
int fg_sse_finish(struct fg_sse *s, struct fg_buf *out);

/* Usage from a JSON object that has a "usage" member (also non-stream
 * responses); false when absent or null, or when a count is negative or
 * beyond any context (the engine is broken: bill from the estimate). */
struct json_t;
bool fg_usage_from_json(const struct json_t *obj, struct fg_usage *u);
/* The same rules for the usage object itself, the JSON value at p (what
 * follows it is ignored), read without building a tree: 1 = usage read,
 * 0 = an object whose counts are unusable (fg_usage_from_json's false),
 * -1 = not an object, malformed, or a construct where this reader and
 * jansson could disagree: parse with jansson. */
int fg_usage_parse(const char *p, size_t n, struct fg_usage *u);

#endif
