/* http_request.h — the JSON body of an OpenAI-style request: what admission
 * needs to price it, and the rewrite forwarded to the engine.
 *
 * Rewrite: the tenant's cache_salt replaces any client salt (or none for
 * shared-cache tenants), stream_options.include_usage is forced on for
 * streams so the agent can settle from the engine's usage, and `priority`
 * is set from the tier only where the engine schedules by priority (a
 * client's own priority is never forwarded). */
#ifndef FAIRGATE_HTTP_REQUEST_H
#define FAIRGATE_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/pricing.h"

enum fg_api {
	FG_API_NONE = 0,      /* not an inference call: forwarded unmetered (GET/HEAD) */
	FG_API_CHAT,          /* POST /v1/chat/completions */
	FG_API_COMPLETIONS,   /* POST /v1/completions */
	FG_API_EMBEDDINGS,    /* POST /v1/embeddings: prompt only */
	FG_API_OTHER_BODY,    /* any other request with a body: priced by its size */
};

/* The API a request line names; `path` may carry a query string. */
enum fg_api fg_api_of(int http_method, const char *path, size_t len);

/* Where a top-level member the rewrite may drop sits in the body. */
struct fg_req_member {
	bool present;
	bool is_object;            /* stream_options: an object (not null) */
	size_t cut_from, cut_to;   /* the member and the comma after it */
	size_t value_end;
	size_t open, close;        /* objects: offsets of '{' and '}' */
	bool has_iu;               /* stream_options.include_usage given */
	size_t iu_from, iu_to;     /* its cut inside the object */
	size_t other_end;          /* end of its last other member (0: none) */
};

struct fg_req_info {
	char model[FG_CAL_MODEL_MAX];
	bool stream;
	bool client_wants_usage;   /* stream_options.include_usage as the client sent it */
	struct fg_request_shape shape;
	/* the body's layout, for fg_request_forward_body */
	size_t brace;              /* offset of the top-level '{' */
	uint32_t members;          /* top-level members */
	size_t other_end;          /* end of the last member no rewrite drops (0: none) */
	struct fg_req_member cache_salt, priority, stream_options;
};

/* Parse and validate a body in one streaming pass (yajl): well-formed JSON
 * in strict UTF-8 without NUL (raw or \u0000), lone surrogates, numbers
 * out of range, nesting deeper than 2048 or duplicate keys at any depth,
 * whose top level is an object with the members of `api` well typed.
 * Returns 0, or -1 with a message for the client and the offending
 * parameter (or NULL). No tree is built: the shape, the model and the
 * layout the rewrite needs are recorded in `info`. */
int fg_request_parse(enum fg_api api, const char *body, size_t len, struct fg_req_info *info,
		     char *msg, size_t msglen, const char **param);

struct fg_rewrite {
	const char *cache_salt;    /* NULL: forward no salt at all */
	bool force_usage;          /* streams: stream_options.include_usage = true */
	bool set_priority;
	int priority;
};

/* The body to forward (malloc'd, NUL-terminated, *out_len bytes) for a body
 * fg_request_parse accepted into `info`: the new members are spliced in
 * after the opening brace and the client's bytes follow untouched, less
 * any member the rewrite owns (a client's cache_salt and priority; with
 * forced usage, its stream_options, whose other members are carried into
 * the new one). Duplicate keys were refused at parse, so nothing can
 * shadow the spliced members. NULL when out of memory. */
char *fg_request_forward_body(const struct fg_req_info *info, const char *body, size_t len,
			      const struct fg_rewrite *rw, size_t *out_len);

#endif
