/* http_sse.h — relay of a streamed (text/event-stream) answer.
 *
 * Chat and completions chunks: events pass through as they complete, byte
 * for byte, except what the agent forced on and the client did not ask
 * for: the usage chunk (choices: [], usage: {...}) and, with
 * continuous_usage_stats, the "usage" member of every other chunk (cut
 * out, so the chunk reads as the engine writes it without the option).
 * The first chunk's usage is the engine's own prompt count: on_prompt
 * hears it before that chunk goes out and may stop the relay there.
 *
 * Responses events (event: response.*) pass through untouched; usage comes
 * from response.completed (or .incomplete / .failed), and *.delta events
 * count as output.
 *
 * Usage is read from whichever event carries it, and output is counted
 * (the latest usage, else content events) so a stream cut short can be
 * billed for what was delivered. */
#ifndef FAIRGATE_HTTP_SSE_H
#define FAIRGATE_HTTP_SSE_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/buf.h"
#include "policy/pricing.h"

enum fg_sse_kind {
	FG_SSE_CHUNKS = 0,          /* chat.completion.chunk / text_completion */
	FG_SSE_RESPONSES,           /* the responses API's typed events */
};

struct fg_sse {
	struct fg_buf pending;      /* an event not yet complete */
	size_t scanned;             /* bytes of pending already searched for an end */
	enum fg_sse_kind kind;
	bool hide_usage_chunk;      /* the client did not ask for include_usage */
	bool strip_chunk_usage;     /* nor for continuous_usage_stats */
	bool have_usage;
	struct fg_usage usage;      /* the latest seen */
	bool prompt_reported;       /* a chunk with choices carried usage */
	bool final_usage;           /* the usage chunk (or response.completed) was read */
	uint64_t content_events;    /* events with choices / deltas: ~ tokens delivered */
	bool saw_done;
	/* the engine's prompt count at the first chunk that has one: false
	 * stops the relay (that chunk and everything after are dropped) */
	bool (*on_prompt)(void *ctx, double prompt_tokens);
	void *ctx;
	bool stopped;
};

void fg_sse_init(struct fg_sse *s, enum fg_sse_kind kind, bool hide_usage_chunk,
		 bool strip_chunk_usage);
/* Output tokens delivered so far: the final usage's; before it, the more of
 * the latest chunk's usage (one choice's running count) and the content
 * events (every choice's tokens). */
double fg_sse_output(const struct fg_sse *s);
void fg_sse_free(struct fg_sse *s);
/* Feed decoded body bytes; appends what the client gets to out. 0 or -1 (OOM). */
int fg_sse_feed(struct fg_sse *s, const char *p, size_t n, struct fg_buf *out);
/* End of stream: a trailing partial event goes out as it is. */
int fg_sse_finish(struct fg_sse *s, struct fg_buf *out);

/* Usage from a JSON object that has a "usage" member (also non-stream
 * responses); false when absent or null, or when a count is negative or
 * beyond any context (the engine is broken: bill from the estimate). The
 * responses API's names (input_tokens, output_tokens,
 * input_tokens_details.cached_tokens) read as prompt, completion, cached. */
struct json_t;
bool fg_usage_from_json(const struct json_t *obj, struct fg_usage *u);
/* The same rules for the usage object itself, the JSON value at p (what
 * follows it is ignored), read without building a tree: 1 = usage read,
 * 0 = an object whose counts are unusable (fg_usage_from_json's false),
 * -1 = not an object, malformed, or a construct where this reader and
 * jansson could disagree: parse with jansson. */
int fg_usage_parse(const char *p, size_t n, struct fg_usage *u);
/* The same for an object in the usual shape only (see http_sse.c), and
 * where it ends: 1 with *end set, 0 unusable counts, -1 another shape. */
int fg_usage_parse_plain(const char *p, size_t n, struct fg_usage *u, size_t *end);

#endif
