/* http_request.c — parse, validate, measure and rewrite request bodies with
 * jansson; see http_request.h. */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/http_request.h"

#define MAX_CHOICES 128 /* OpenAI's own limit on n */
#define FG_SALT_HEAD_MAX 384   /* the members spliced in front */

static bool path_is(const char *path, size_t len, const char *want)
{
	size_t wl = strlen(want);

	if (len < wl || memcmp(path, want, wl))
		return false;
	return len == wl || path[wl] == '?' || (path[wl] == '/' && len == wl + 1);
}

enum fg_api fg_api_of(int method, const char *path, size_t len)
{
	if (method == HTTP_GET || method == HTTP_HEAD || method == HTTP_OPTIONS)
		return FG_API_NONE;
	if (method == HTTP_POST) {
		if (path_is(path, len, "/v1/chat/completions"))
			return FG_API_CHAT;
		if (path_is(path, len, "/v1/completions"))
			return FG_API_COMPLETIONS;
		if (path_is(path, len, "/v1/embeddings"))
			return FG_API_EMBEDDINGS;
	}
	return FG_API_OTHER_BODY;
}

/* Characters the tokenizer will see: every string inside the value. Depth
 * is bounded by jansson's parser (2048). */
static uint64_t text_chars(const json_t *v)
{
	uint64_t n = 0;
	size_t i;
	const char *k;
	json_t *e;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return json_string_length(v);
	case JSON_ARRAY:
		json_array_foreach(v, i, e)
			n += text_chars(e);
		return n;
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, k, e)
			n += text_chars(e);
		return n;
	default:
		return 0;
	}
}

static bool all_integers(const json_t *a)
{
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e)
		if (!json_is_integer(e))
			return false;
	return true;
}

/* prompt / input: a string, strings, token ids, or lists of token ids. */
static int measure_prompt(const json_t *p, struct fg_request_shape *s)
{
	size_t i;
	json_t *e;

	if (json_is_string(p)) {
		s->prompt_chars += json_string_length(p);
		return 0;
	}
	if (!json_is_array(p) || !json_array_size(p))
		return -1;
	if (all_integers(p)) {
		s->prompt_token_ids += json_array_size(p);
		return 0;
	}
	json_array_foreach(p, i, e) {
		if (json_is_string(e))
			s->prompt_chars += json_string_length(e);
		else if (json_is_array(e) && all_integers(e))
			s->prompt_token_ids += json_array_size(e);
		else
			return -1;
	}
	return 0;
}

/* An optional non-negative integer field; null counts as absent. */
static int opt_count(const json_t *root, const char *key, uint64_t *out, bool *present)
{
	const json_t *v = json_object_get(root, key);

	*present = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	*present = true;
	return 0;
}

#define FAIL(p, ...)                                          \
	do {                                                  \
		snprintf(msg, msglen, __VA_ARGS__);           \
		*param = (p);                                 \
		json_decref(root);                            \
		return NULL;                                  \
	} while (0)

json_t *fg_request_parse(enum fg_api api, const char *body, size_t len, struct fg_req_info *info,
			 char *msg, size_t msglen, const char **param)
{
	json_error_t jerr;
	json_t *root = NULL;
	bool present;
	uint64_t v;

	memset(info, 0, sizeof(*info));
	*param = NULL;
	if (!len)
		FAIL(NULL, "the request body is empty; expected a JSON object");
	/* Raw NUL is never JSON, but jansson 2.14 skips one right after a
	 * number: refuse it here, or the engine would get bytes we priced
	 * differently. */
	const char *nul = memchr(body, 0, len);
	if (nul)
		FAIL(NULL, "the request body is not valid JSON: NUL byte at offset %zu",
		     (size_t)(nul - body));
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		FAIL(NULL, "the request body is not valid JSON: %s (line %d, column %d)", jerr.text,
		     jerr.line, jerr.column);
	if (!json_is_object(root))
		FAIL(NULL, "the request body must be a JSON object");

	const json_t *model = json_object_get(root, "model");
	if (model && !json_is_string(model) && !json_is_null(model))
		FAIL("model", "'model' must be a string");
	if (json_is_string(model))
		snprintf(info->model, sizeof(info->model), "%s", json_string_value(model));

	struct fg_request_shape *s = &info->shape;
	if (api == FG_API_CHAT) {
		const json_t *msgs = json_object_get(root, "messages");
		if (!json_is_array(msgs) || !json_array_size(msgs))
			FAIL("messages", "'messages' must be a non-empty array");
		size_t i;
		json_t *m;
		json_array_foreach(msgs, i, m)
			if (!json_is_object(m))
				FAIL("messages", "'messages[%zu]' must be an object", i);
		s->prompt_chars = text_chars(msgs);
		const json_t *tools = json_object_get(root, "tools");
		if (tools)
			s->prompt_chars += text_chars(tools);
	} else if (api == FG_API_COMPLETIONS || api == FG_API_EMBEDDINGS) {
		const char *key = api == FG_API_COMPLETIONS ? "prompt" : "input";
		const json_t *p = json_object_get(root, key);
		if (!p || measure_prompt(p, s))
			FAIL(key, "'%s' must be a string, an array of strings, or token ids", key);
		s->prompt_only = api == FG_API_EMBEDDINGS;
	} else {
		s->prompt_chars = len;
		s->prompt_only = true;
	}

	if (opt_count(root, "max_completion_tokens", &v, &present))
		FAIL("max_completion_tokens", "'max_completion_tokens' must be a non-negative integer");
	if (present) {
		s->max_tokens = v;
	} else {
		if (opt_count(root, "max_tokens", &v, &present))
			FAIL("max_tokens", "'max_tokens' must be a non-negative integer");
		if (present)
			s->max_tokens = v;
	}
	if (opt_count(root, "n", &v, &present) || (present && (v < 1 || v > MAX_CHOICES)))
		FAIL("n", "'n' must be an integer between 1 and %d", MAX_CHOICES);
	s->n = present ? (uint32_t)v : 1;

	const json_t *stream = json_object_get(root, "stream");
	if (stream && !json_is_boolean(stream) && !json_is_null(stream))
		FAIL("stream", "'stream' must be a boolean");
	info->stream = json_is_true(stream);
	const json_t *so = json_object_get(root, "stream_options");
	if (so && !json_is_object(so) && !json_is_null(so))
		FAIL("stream_options", "'stream_options' must be an object");
	if (json_is_object(so)) {
		const json_t *iu = json_object_get(so, "include_usage");
		if (iu && !json_is_boolean(iu) && !json_is_null(iu))
			FAIL("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
		info->client_wants_usage = json_is_true(iu);
	}
	return root;
}

int fg_request_rewrite(json_t *root, const struct fg_rewrite *rw)
{
	json_object_del(root, "cache_salt");
	if (rw->cache_salt && json_object_set_new(root, "cache_salt", json_string(rw->cache_salt)))
		return -1;
	json_object_del(root, "priority");
	if (rw->set_priority && json_object_set_new(root, "priority", json_integer(rw->priority)))
		return -1;
	if (rw->force_usage) {
		json_t *so = json_object_get(root, "stream_options");
		if (!json_is_object(so)) {
			so = json_object();
			if (!so || json_object_set_new(root, "stream_options", so))
				return -1;
		}
		if (json_object_set_new(so, "include_usage", json_true()))
			return -1;
	}
	return 0;
}

char *fg_request_forward_body(json_t *root, const char *body, size_t len,
			      const struct fg_rewrite *rw, size_t *out_len)
{
	size_t brace = 0;

	while (brace < len && (body[brace] == ' ' || body[brace] == '\t' || body[brace] == '\r' ||
			       body[brace] == '\n'))
		brace++;
	bool splice = brace < len && body[brace] == '{' && json_object_size(root) > 0 &&
		      !json_object_get(root, "cache_salt") && !json_object_get(root, "priority") &&
		      !(rw->force_usage && json_object_get(root, "stream_options"));
	if (!splice) {
		if (fg_request_rewrite(root, rw))
			return NULL;
		char *out = json_dumps(root, JSON_COMPACT);
		if (out)
			*out_len = strlen(out);
		return out;
	}
	char head[FG_SALT_HEAD_MAX];
	int n = 0;
	if (rw->cache_salt) {
		/* salts are [A-Za-z0-9._-] (agent/salt.c): no JSON escaping needed */
		n += snprintf(head + n, sizeof(head) - (size_t)n, "\"cache_salt\":\"%s\",", rw->cache_salt);
	}
	if (rw->set_priority)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "\"priority\":%d,", rw->priority);
	if (rw->force_usage)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "\"stream_options\":{\"include_usage\":true},");
	if (n < 0 || (size_t)n >= sizeof(head))
		return NULL;
	size_t rest = len - brace - 1;
	char *out = malloc(1 + (size_t)n + rest + 1);
	if (!out)
		return NULL;
	out[0] = '{';
	memcpy(out + 1, head, (size_t)n);
	memcpy(out + 1 + n, body + brace + 1, rest);
	out[1 + n + rest] = 0;
	*out_len = 1 + (size_t)n + rest;
	return out;
}
