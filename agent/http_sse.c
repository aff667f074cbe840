/* http_sse.c — event-by-event SSE relay with usage extraction; see
 * http_sse.h. */
#include <jansson.h>
#include <string.h>
#include "agent/http_sse.h"

void fg_sse_init(struct fg_sse *s, bool hide_usage_chunk)
{
	memset(s, 0, sizeof(*s));
	s->hide_usage_chunk = hide_usage_chunk;
}

void fg_sse_free(struct fg_sse *s)
{
	fg_buf_free(&s->pending);
}

/* A token count no context comes near: beyond it (or negative) the engine's
 * usage is broken, and the agent bills from its own estimate instead of
 * turning it into a price (or an out-of-range integer conversion). */
#define USAGE_TOKENS_MAX 1e9

/* false when present but not a count; absent or not a number reads as 0 */
static bool num(const json_t *o, const char *key, double *out)
{
	const json_t *v = json_object_get(o, key);

	*out = json_is_number(v) ? json_number_value(v) : 0;
	return *out >= 0 && *out <= USAGE_TOKENS_MAX;
}

bool fg_usage_from_json(const json_t *obj, struct fg_usage *u)
{
	const json_t *usage = json_object_get(obj, "usage");

	if (!json_is_object(usage))
		return false;
	return num(usage, "prompt_tokens", &u->prompt_tokens) &&
	       num(usage, "completion_tokens", &u->completion_tokens) &&
	       num(json_object_get(usage, "prompt_tokens_details"), "cached_tokens",
		   &u->cached_tokens);
}

/* Find the end of the first event in [p, p+n): index just past the blank
 * line, or 0. Lines end in \n, \r\n or \r (the SSE spec allows all three). */
static size_t event_end(const char *p, size_t n, size_t from)
{
	for (size_t i = from >= 2 ? from - 2 : 0; i + 1 < n; i++) {
		if (p[i] == '\n' && p[i + 1] == '\n')
			return i + 2;
		if (p[i] == '\r' && p[i + 1] == '\r')
			return i + 2;
		if (p[i] == '\n' && p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* The data payload of a one-data-line event (what engines send), as a
 * pointer into the event; NULL for anything else, which passes untouched. */
static const char *data_payload(const char *ev, size_t n, size_t *plen)
{
	if (n < 6 || memcmp(ev, "data:", 5))
		return NULL;
	const char *p = ev + 5, *end = ev + n;
	if (p < end && *p == ' ')
		p++;
	const char *eol = p;
	while (eol < end && *eol != '\n' && *eol != '\r')
		eol++;
	*plen = (size_t)(eol - p);
	return p;
}

/* Returns true when the event is to be passed on. */
static bool judge_event(struct fg_sse *s, const char *ev, size_t n)
{
	size_t plen;
	const char *payload = data_payload(ev, n, &plen);

	if (!payload)
		return true;
	if (plen == 6 && !memcmp(payload, "[DONE]", 6)) {
		s->saw_done = true;
		return true;
	}
	/* only events naming usage are worth a JSON parse */
	if (!memmem(payload, plen, "\"usage\"", 7)) {
		s->content_events++;
		return true;
	}
	json_t *o = json_loadb(payload, plen, 0, NULL);
	if (!o) {
		s->content_events++;
		return true;
	}
	struct fg_usage u;
	bool has_usage = fg_usage_from_json(o, &u);
	const json_t *choices = json_object_get(o, "choices");
	/* the chunk the agent forced on is hidden even when its numbers are not usable */
	bool usage_only = json_is_object(json_object_get(o, "usage")) && json_is_array(choices) &&
			  json_array_size(choices) == 0;
	if (has_usage) {
		s->usage = u;
		s->have_usage = true;
	}
	json_decref(o);
	if (usage_only)
		return !s->hide_usage_chunk;
	s->content_events++;
	return true;
}

int fg_sse_feed(struct fg_sse *s, const char *p, size_t n, struct fg_buf *out)
{
	/* fast path: nothing pending, events complete inside this piece */
	size_t start = 0;
	if (!fg_buf_used(&s->pending)) {
		size_t end;
		while (start < n && (end = event_end(p + start, n - start, 0))) {
			if (judge_event(s, p + start, end) && fg_buf_append(out, p + start, end))
				return -1;
			start += end;
		}
		if (start == n)
			return 0;
		s->scanned = 0;
		return fg_buf_append(&s->pending, p + start, n - start);
	}
	if (fg_buf_append(&s->pending, p, n))
		return -1;
	for (;;) {
		const char *h = fg_buf_head(&s->pending);
		size_t used = fg_buf_used(&s->pending);
		size_t end = event_end(h, used, s->scanned);
		if (!end) {
			s->scanned = used;
			return 0;
		}
		if (judge_event(s, h, end) && fg_buf_append(out, h, end))
			return -1;
		fg_buf_consume(&s->pending, end);
		s->scanned = 0;
	}
}

int fg_sse_finish(struct fg_sse *s, struct fg_buf *out)
{
	size_t used = fg_buf_used(&s->pending);

	if (used && judge_event(s, fg_buf_head(&s->pending), used) &&
	    fg_buf_append(out, fg_buf_head(&s->pending), used))
		return -1;
	fg_buf_reset(&s->pending);
	return 0;
}
