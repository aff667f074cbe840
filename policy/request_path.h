/* request_path.h — which request targets reach the engine, and as what.
 *
 * Deny by default: a request goes to the engine only on a route the proxy
 * understands and prices (the inference APIs, vLLM's tokenizer endpoints),
 * on the engine's read-only endpoints (models, health, version, metrics),
 * or on a path the policy lists under agent.passthrough with its own price.
 * Everything else is answered by the proxy (404 or 405).
 *
 * Paths are matched the way the engine (vLLM on Starlette) routes them:
 * exactly, case-sensitively, the query ignored. A target the engine could
 * read differently from this table (percent-encoding, dot segments, empty
 * segments, backslashes) is refused instead of guessed at, so no spelling
 * of a priced path reaches the engine unpriced.
 *
 * Pure: the agent and the policy parser (for agent.passthrough) call it.
 */
#ifndef FAIRGATE_REQUEST_PATH_H
#define FAIRGATE_REQUEST_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy.h"

enum fg_api {
	FG_API_NONE = 0,      /* an engine endpoint without a body to price (GET/HEAD) */
	FG_API_CHAT,          /* POST /v1/chat/completions */
	FG_API_COMPLETIONS,   /* POST /v1/completions */
	FG_API_EMBEDDINGS,    /* POST /v1/embeddings: prompt only */
	FG_API_RESPONSES,     /* POST /v1/responses */
	FG_API_TOKENIZE,      /* POST /tokenize: priced by its body, no GPU work */
	FG_API_DETOKENIZE,    /* POST /detokenize: the same */
	FG_API_PASSTHROUGH,   /* agent.passthrough: its per-request price */
};

enum fg_route_verdict {
	FG_ROUTE_OK = 0,
	FG_ROUTE_BAD_TARGET,  /* 400: not a canonical origin-form target */
	FG_ROUTE_NOT_FOUND,   /* 404 */
	FG_ROUTE_METHOD,      /* 405: the path exists, not with this method */
};

struct fg_route {
	enum fg_api api;
	bool public_path;     /* answered without an API key */
	const struct fg_passthrough *pass; /* FG_API_PASSTHROUGH: the policy's entry */
	uint32_t allowed;     /* FG_ROUTE_METHOD: the methods that path takes */
	size_t path_len;      /* the target without its query */
};

/* The method bit (enum fg_method_bit) of a method name, 0 if none. */
uint32_t fg_method_bit(const char *name, size_t len);
/* "GET, HEAD" for an Allow header or a message. */
void fg_methods_text(uint32_t methods, char *out, size_t len);

/* Why `path` (no query) is not a canonical absolute path, or NULL. */
const char *fg_url_path_problem(const char *path, size_t len);

/* Route an origin-form target ("/path?query") with method bit `method`
 * against the built-in routes and then a's passthrough table (a NULL: the
 * built-in routes only, which need no policy). *why: for
 * FG_ROUTE_BAD_TARGET, what is wrong with the target. */
enum fg_route_verdict fg_route_target(const struct fg_agent *a, uint32_t method, const char *target,
				      size_t len, struct fg_route *out, const char **why);

/* A built-in route's path (for agent.passthrough: those cannot be listed). */
bool fg_route_is_builtin(const char *path, size_t len);

#endif
