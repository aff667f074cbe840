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

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
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

struct fg_req_info {
	char model[FG_CAL_MODEL_MAX];
	bool stream;
	bool client_wants_usage;   /* stream_options.include_usage as the client sent it */
	struct fg_request_shape shape;
};

/* Parse and validate a body. Returns the JSON root (json_decref it), or NULL
 * with a message for the client and the offending parameter (or NULL). */
json_t *fg_request_parse(enum fg_api api, const char *body, size_t len, struct fg_req_info *info,
			 char *msg, size_t msglen, const char **param);

struct fg_rewrite {
	const char *cache_salt;    /* NULL: forward no salt at all */
	bool force_usage;          /* streams: stream_options.include_usage = true */
	bool set_priority;
	int priority;
};

/* Apply the rewrite in place; 0, or -1 when out of memory. */
int fg_request_rewrite(json_t *root, const struct fg_rewrite *rw);

/* The body to forward (malloc'd, *out_len bytes). When the client sent none
 * of the members the rewrite touches, the new members are spliced in after
 * the opening brace and the client's bytes follow untouched (duplicate keys
 * were refused at parse, so nothing can shadow them); otherwise the
 * rewritten tree is serialised. NULL when out of memory. */
char *fg_request_forward_body(json_t *root, const char *body, size_t len,
			      const struct fg_rewrite *rw, size_t *out_len);

#endif
