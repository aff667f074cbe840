/* openai_request.c — request parsing and vLLM-style validation; see openai_request.h. */
#include "openai_request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPLETIONS_DEFAULT_MAX_TOKENS 16 /* OpenAI's and vLLM's legacy default */

int sim_error_set(struct sim_error *err, int status, const char *param, const char *fmt, ...)
{
	va_list ap;

	err->status = status;
	switch (status) {
	case 404: err->type = "NotFoundError"; break;
	case 405: err->type = "MethodNotAllowedError"; break;
	case 413: err->type = "RequestEntityTooLargeError"; break;
	case 500: err->type = "InternalServerError"; break;
	case 503: err->type = "ServiceUnavailableError"; break;
	default: err->type = "BadRequestError"; break;
	}
	snprintf(err->param, sizeof(err->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

static json_t *error_object(const struct sim_error *err, const char *message)
{
	return json_pack("{s:{s:s,s:s,s:o,s:i}}", "error", "message", message, "type", err->type,
			 "param", err->param[0] ? json_string(err->param) : json_null(), "code",
			 err->status);
}

char *sim_error_json(const struct sim_error *err)
{
	json_t *e = error_object(err, err->message);

	if (!e) {
		/* jansson takes only UTF-8, and a message may quote the client's
		 * bytes (a JSON decode error does): send those as '?' */
		char ascii[sizeof(err->message)];
		size_t i = 0;
		for (; err->message[i] && i + 1 < sizeof(ascii); i++)
			ascii[i] = (unsigned char)err->message[i] < 0x80 ? err->message[i] : '?';
		ascii[i] = 0;
		e = error_object(err, ascii);
	}
	char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;

	json_decref(e);
	return s;
}

bool sim_cache_salt_valid(const char *s, size_t len)
{
	if (len < 1 || len > SIM_SALT_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '@' || s[i] == '/' || s[i] == '\\' || s[i] == '\0')
			return false;
	return true;
}

/* An optional integer field: absent or null leaves *present false. JSON
 * reals with an integral value are accepted (pydantic's lax mode). */
static int get_int(json_t *obj, const char *key, long long lo, long long hi, long long *out,
		   bool *present, struct sim_error *err)
{
	json_t *v = json_object_get(obj, key);

	*present = false;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
		   fabs(json_real_value(v)) < 9e18) {
		*out = (long long)json_real_value(v);
	} else {
		return sim_error_set(err, 400, key, "%s must be an integer", key);
	}
	if (*out < lo || *out > hi)
		return sim_error_set(err, 400, key, "%s must be at least %lld, got %lld.", key, lo,
				     *out);
	*present = true;
	return 0;
}

static int get_bool(json_t *obj, const char *key, bool *out, struct sim_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return sim_error_set(err, 400, key, "%s must be a boolean", key);
	*out = json_is_true(v);
	return 0;
}

/* ---- prompts --------------------------------------------------------------- */

/* Bytes of a message's content once its text parts are joined with "\n";
 * -1 with *err on a shape vLLM would refuse. */
static long long content_bytes(json_t *content, size_t idx, struct sim_error *err)
{
	if (!content || json_is_null(content))
		return 0;
	if (json_is_string(content))
		return (long long)json_string_length(content);
	if (!json_is_array(content))
		return sim_error_set(err, 400, "messages",
				     "messages[%zu].content must be a string or an array of parts",
				     idx);
	long long total = 0;
	size_t i;
	json_t *part;
	json_array_foreach(content, i, part) {
		const char *type = json_string_value(json_object_get(part, "type"));
		json_t *text = json_object_get(part, "text");
		if (!json_is_object(part) || !type)
			return sim_error_set(err, 400, "messages",
					     "messages[%zu].content[%zu] must be an object with a type",
					     idx, i);
		if (strcmp(type, "text") != 0)
			return sim_error_set(err, 400, "messages",
					     "content part type '%s' is not supported: fairgate-sim "
					     "serves a text-only model", type);
		if (!json_is_string(text))
			return sim_error_set(err, 400, "messages",
					     "messages[%zu].content[%zu].text must be a string", idx, i);
		total += (long long)json_string_length(text) + (i ? 1 : 0);
	}
	return total;
}

static int tokenize_content(struct sim_tokens *t, json_t *content)
{
	if (!content || json_is_null(content))
		return 0;
	if (json_is_string(content))
		return sim_tokens_text(t, json_string_value(content), json_string_length(content),
				       UINT32_MAX);
	/* Join the parts first: tokens straddle part boundaries like any text. */
	size_t i, len = 0, off = 0;
	json_t *part;
	json_array_foreach(content, i, part)
		len += json_string_length(json_object_get(part, "text")) + 1;
	char *joined = malloc(len + 1);
	if (!joined)
		return -1;
	json_array_foreach(content, i, part) {
		json_t *text = json_object_get(part, "text");
		if (i)
			joined[off++] = '\n';
		memcpy(joined + off, json_string_value(text), json_string_length(text));
		off += json_string_length(text);
	}
	int rc = sim_tokens_text(t, joined, off, UINT32_MAX);
	free(joined);
	return rc;
}

static int parse_messages(json_t *root, struct sim_request *r, uint64_t *n_tokens,
			  struct sim_error *err)
{
	json_t *msgs = json_object_get(root, "messages");
	uint64_t count = SIM_CHAT_REPLY_OVERHEAD;
	size_t i;
	json_t *m;

	if (!msgs)
		return sim_error_set(err, 400, "messages", "messages: field required");
	if (!json_is_array(msgs) || !json_array_size(msgs))
		return sim_error_set(err, 400, "messages", "messages must be a non-empty array");
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		if (!json_is_object(m) || !role || !*role)
			return sim_error_set(err, 400, "messages",
					     "messages[%zu] must be an object with a role", i);
		long long bytes = content_bytes(json_object_get(m, "content"), i, err);
		if (bytes < 0)
			return -1;
		count += SIM_CHAT_MESSAGE_OVERHEAD + sim_text_token_count((size_t)bytes);
	}
	*n_tokens = count;
	r->n_prompts = 1;
	return 0;
}

static int tokenize_messages(json_t *root, struct sim_tokens *t)
{
	json_t *msgs = json_object_get(root, "messages");
	size_t i;
	json_t *m;

	json_array_foreach(msgs, i, m) {
		if (sim_tokens_chat_message_begin(t, json_string_value(json_object_get(m, "role")),
						  UINT32_MAX) ||
		    tokenize_content(t, json_object_get(m, "content")) ||
		    sim_tokens_chat_message_end(t, UINT32_MAX))
			return -1;
	}
	return sim_tokens_chat_generation_prompt(t, UINT32_MAX);
}

static bool is_token_array(json_t *a)
{
	size_t i;
	json_t *v;

	if (!json_is_array(a) || !json_array_size(a))
		return false;
	json_array_foreach(a, i, v)
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > (json_int_t)UINT32_MAX)
			return false;
	return true;
}

static uint64_t prompt_token_count(json_t *p)
{
	return json_is_string(p) ? sim_text_token_count(json_string_length(p)) : json_array_size(p);
}

/* prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]. Sets
 * r->n_prompts; the largest prompt's length goes to *n_tokens. */
static int parse_prompt(json_t *root, struct sim_request *r, uint64_t *n_tokens,
			json_t **items, struct sim_error *err)
{
	json_t *p = json_object_get(root, "prompt");
	size_t i;
	json_t *v;

	if (!p || json_is_null(p))
		return sim_error_set(err, 400, "prompt", "prompt: field required");
	*items = NULL;
	if (json_is_string(p) || is_token_array(p)) {
		r->n_prompts = 1;
	} else if (json_is_array(p) && json_array_size(p)) {
		json_array_foreach(p, i, v)
			if (!(json_is_string(v) && json_string_length(v)) && !is_token_array(v))
				return sim_error_set(err, 400, "prompt",
						     "prompt[%zu] must be a non-empty string or "
						     "array of token ids", i);
		r->n_prompts = (uint32_t)(json_array_size(p) < SIM_MAX_CHOICES + 1
						  ? json_array_size(p) : SIM_MAX_CHOICES + 1);
		*items = p;
	} else {
		return sim_error_set(err, 400, "prompt",
				     "prompt must be a string, an array of strings, or an array "
				     "of token ids");
	}
	if (json_is_string(p) && !json_string_length(p))
		return sim_error_set(err, 400, "prompt", "prompt must not be empty");
	*n_tokens = 0;
	for (uint32_t k = 0; k < r->n_prompts; k++) {
		uint64_t c = prompt_token_count(*items ? json_array_get(p, k) : p);
		if (c > *n_tokens)
			*n_tokens = c;
	}
	return 0;
}

static int tokenize_prompt(json_t *p, struct sim_tokens *t)
{
	if (json_is_string(p))
		return sim_tokens_text(t, json_string_value(p), json_string_length(p), UINT32_MAX);
	size_t i;
	json_t *v;
	json_array_foreach(p, i, v)
		if (sim_tokens_push(t, (uint32_t)json_integer_value(v), UINT32_MAX))
			return -1;
	return 0;
}

/* ---- the request ------------------------------------------------------------- */

static int check_lengths(const struct sim_request_limits *lim, enum sim_api api,
			 uint64_t prompt, uint64_t max_tokens, struct sim_error *err)
{
	const char *where = api == SIM_API_CHAT ? "messages" : "prompt";

	if (prompt >= lim->max_model_len)
		return sim_error_set(err, 400, where,
				     "This model's maximum context length is %u tokens. However, "
				     "you requested %llu tokens in the %s. Please reduce the length "
				     "of the %s.", lim->max_model_len, (unsigned long long)prompt,
				     where, where);
	if (prompt + max_tokens > lim->max_model_len)
		return sim_error_set(err, 400, "max_tokens",
				     "This model's maximum context length is %u tokens. However, "
				     "you requested %llu tokens (%llu in the %s, %llu in the "
				     "completion). Please reduce the length of the %s or completion.",
				     lim->max_model_len, (unsigned long long)(prompt + max_tokens),
				     (unsigned long long)prompt, where,
				     (unsigned long long)max_tokens, where);
	return 0;
}

static int parse_fields(json_t *root, enum sim_api api, const struct sim_request_limits *lim,
			struct sim_request *r, long long *max_tokens, bool *max_set,
			struct sim_error *err)
{
	json_t *model = json_object_get(root, "model");
	long long v;
	bool present, has_max_completion;

	if (model && !json_is_null(model)) {
		if (!json_is_string(model))
			return sim_error_set(err, 400, "model", "model must be a string");
		if (lim->model && strcmp(json_string_value(model), lim->model) != 0)
			return sim_error_set(err, 404, "model", "The model `%s` does not exist.",
					     json_string_value(model));
	}
	if (get_int(root, "max_tokens", 1, INT32_MAX, max_tokens, max_set, err))
		return -1;
	if (api == SIM_API_CHAT) {
		if (get_int(root, "max_completion_tokens", 1, INT32_MAX, &v, &has_max_completion,
			    err))
			return -1;
		if (has_max_completion) {
			*max_tokens = v;
			*max_set = true;
		}
	}
	r->n = 1;
	if (get_int(root, "n", 1, SIM_MAX_CHOICES, &v, &present, err))
		return -1;
	if (present)
		r->n = (uint32_t)v;
	if (get_bool(root, "stream", &r->stream, err))
		return -1;

	json_t *so = json_object_get(root, "stream_options");
	if (so && !json_is_null(so)) {
		if (!json_is_object(so))
			return sim_error_set(err, 400, "stream_options",
					     "stream_options must be an object");
		if (!r->stream)
			return sim_error_set(err, 400, "stream_options",
					     "Stream options can only be defined when `stream=True`.");
		if (get_bool(so, "include_usage", &r->include_usage, err))
			return -1;
	}

	json_t *salt = json_object_get(root, "cache_salt");
	if (salt && !json_is_null(salt)) {
		if (!json_is_string(salt) ||
		    !sim_cache_salt_valid(json_string_value(salt), json_string_length(salt)))
			return sim_error_set(err, 400, "cache_salt",
					     "cache_salt must be a string of 1 to %d characters "
					     "without '@', '/', '\\' or NUL", SIM_SALT_MAX);
		memcpy(r->cache_salt, json_string_value(salt), json_string_length(salt) + 1);
		r->has_salt = true;
	}

	if (get_int(root, "priority", INT32_MIN, INT32_MAX, &v, &present, err))
		return -1;
	if (present) {
		r->priority = (int32_t)v;
		if (v && !lim->priority_scheduling)
			return sim_error_set(err, 400, "priority",
					     "Got priority %lld but Priority scheduling is not "
					     "enabled.", v);
	}
	return 0;
}

int sim_request_parse(enum sim_api api, const char *body, size_t len,
		      const struct sim_request_limits *lim, struct sim_request *r,
		      struct sim_error *err)
{
	json_error_t jerr;
	/* JSON_ALLOW_NUL lets "\u0000" into strings as Python's json does; a
	 * raw NUL byte is JSON nowhere, but jansson takes one after a number */
	const char *nul = memchr(body, '\0', len);
	json_t *root = nul ? NULL : json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
	json_t *items = NULL;
	long long max_tokens = 0;
	bool max_set = false;
	uint64_t prompt_max = 0;

	memset(r, 0, sizeof(*r));
	r->api = api;
	if (nul)
		return sim_error_set(err, 400, NULL,
				     "JSON decode error: invalid control character at byte %zu",
				     (size_t)(nul - body));
	if (!root)
		return sim_error_set(err, 400, NULL, "JSON decode error: %s (line %d, column %d)",
				     jerr.text, jerr.line, jerr.column);
	if (!json_is_object(root)) {
		json_decref(root);
		return sim_error_set(err, 400, NULL, "the request body must be a JSON object");
	}
	if (parse_fields(root, api, lim, r, &max_tokens, &max_set, err) ||
	    (api == SIM_API_CHAT ? parse_messages(root, r, &prompt_max, err)
				 : parse_prompt(root, r, &prompt_max, &items, err)))
		goto fail;
	if ((uint64_t)r->n_prompts * r->n > SIM_MAX_CHOICES) {
		sim_error_set(err, 400, "n", "prompts x n must be at most %d in fairgate-sim",
			      SIM_MAX_CHOICES);
		goto fail;
	}
	if (!max_set) {
		uint64_t room = prompt_max < lim->max_model_len ? lim->max_model_len - prompt_max : 0;
		max_tokens = api == SIM_API_COMPLETIONS ? COMPLETIONS_DEFAULT_MAX_TOKENS
							: lim->default_max_tokens;
		if (api == SIM_API_CHAT && (uint64_t)max_tokens > room)
			max_tokens = (long long)room;
		if (max_tokens < 1)
			max_tokens = 1;
	}
	if (check_lengths(lim, api, prompt_max, (uint64_t)max_tokens, err))
		goto fail;
	r->max_tokens = (uint32_t)max_tokens;

	r->prompts = calloc(r->n_prompts, sizeof(*r->prompts));
	if (!r->prompts) {
		sim_error_set(err, 500, NULL, "out of memory");
		goto fail;
	}
	for (uint32_t k = 0; k < r->n_prompts; k++) {
		int rc = api == SIM_API_CHAT ? tokenize_messages(root, &r->prompts[k])
					     : tokenize_prompt(items ? json_array_get(items, k)
								     : json_object_get(root, "prompt"),
							       &r->prompts[k]);
		if (rc) {
			sim_error_set(err, 500, NULL, "out of memory");
			goto fail;
		}
	}
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	sim_request_free(r);
	return -1;
}

void sim_request_free(struct sim_request *r)
{
	if (r->prompts)
		for (uint32_t k = 0; k < r->n_prompts; k++)
			sim_tokens_free(&r->prompts[k]);
	free(r->prompts);
	r->prompts = NULL;
	r->n_prompts = 0;
}
