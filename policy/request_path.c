/* request_path.c — the route table and the canonical-path rule; see
 * request_path.h. */
#include <stdio.h>
#include <string.h>
#include "request_path.h"

#define READ_ONLY (FG_M_GET | FG_M_HEAD)

#define ROUTE(p, m, api, pub) { p, sizeof(p) - 1, m, api, pub }
static const struct builtin {
	const char *path;
	size_t len;
	uint32_t methods;
	enum fg_api api;
	bool public_path;
} builtins[] = {
	ROUTE("/v1/chat/completions", FG_M_POST, FG_API_CHAT, false),
	ROUTE("/v1/completions", FG_M_POST, FG_API_COMPLETIONS, false),
	ROUTE("/v1/embeddings", FG_M_POST, FG_API_EMBEDDINGS, false),
	ROUTE("/v1/responses", FG_M_POST, FG_API_RESPONSES, false),
	ROUTE("/tokenize", FG_M_POST, FG_API_TOKENIZE, false),
	ROUTE("/detokenize", FG_M_POST, FG_API_DETOKENIZE, false),
	ROUTE("/v1/models", READ_ONLY, FG_API_NONE, false),
	ROUTE("/metrics", READ_ONLY, FG_API_NONE, false),
	/* probes: load balancers and kubelets ask without a key */
	ROUTE("/health", READ_ONLY, FG_API_NONE, true),
	ROUTE("/ping", READ_ONLY, FG_API_NONE, true),
	ROUTE("/version", READ_ONLY, FG_API_NONE, true),
};
#undef ROUTE

static const struct builtin *builtin_of(const char *path, size_t len)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (builtins[i].len == len && !memcmp(builtins[i].path, path, len))
			return &builtins[i];
	return NULL;
}

static const char *const method_names[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
					    "OPTIONS" };

uint32_t fg_method_bit(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++)
		if (strlen(method_names[i]) == len && !memcmp(name, method_names[i], len))
			return 1u << i;
	return 0;
}

void fg_methods_text(uint32_t methods, char *out, size_t len)
{
	size_t o = 0;

	if (len)
		out[0] = 0;
	for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]) && o < len; i++)
		if (methods & (1u << i))
			o += (size_t)snprintf(out + o, len - o, "%s%s", o ? ", " : "", method_names[i]);
}

/* RFC 3986 pchar less pct-encoded: what a path segment may hold as is. */
static bool plain_path_char(unsigned char ch)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
		return true;
	return ch && strchr("-._~!$&'()*+,;=:@", ch);
}

const char *fg_url_path_problem(const char *p, size_t len)
{
	if (!len || p[0] != '/')
		return "the path must start with '/'";
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '%')
			return "percent-encoded paths are not accepted (the engine would decode them)";
		if (ch == '/') {
			size_t seg = i + 1, end = seg;
			while (end < len && p[end] != '/')
				end++;
			size_t sl = end - seg;
			if (end < len && sl == 0)
				return "empty path segments ('//') are not accepted";
			if ((sl == 1 && p[seg] == '.') || (sl == 2 && p[seg] == '.' && p[seg + 1] == '.'))
				return "dot segments ('.', '..') are not accepted";
			continue;
		}
		if (!plain_path_char(ch))
			return "the path holds a character that must be percent-encoded";
	}
	return NULL;
}

static bool same(const char *p, size_t len, const char *want)
{
	return strlen(want) == len && !memcmp(p, want, len);
}

bool fg_route_is_builtin(const char *path, size_t len)
{
	return builtin_of(path, len) != NULL;
}

static const struct fg_passthrough *find_passthrough(const struct fg_agent *a, const char *p,
						     size_t len)
{
	const struct fg_passthrough *best = NULL;
	size_t best_len = 0;

	for (uint32_t i = 0; i < a->n_passthrough; i++) {
		const struct fg_passthrough *e = &a->passthrough[i];
		size_t el = strlen(e->path);
		if (!e->prefix) {
			if (same(p, len, e->path))
				return e; /* an exact entry beats any prefix */
			continue;
		}
		if (len >= el && !memcmp(p, e->path, el) && el >= best_len) {
			best = e;
			best_len = el;
		}
	}
	return best;
}

enum fg_route_verdict fg_route_target(const struct fg_agent *a, uint32_t method, const char *target,
				      size_t len, struct fg_route *out, const char **why)
{
	const char *q = memchr(target, '?', len);
	size_t plen = q ? (size_t)(q - target) : len;

	memset(out, 0, sizeof(*out));
	*why = NULL;
	out->path_len = plen;
	if (memchr(target, '#', len)) {
		*why = "a request target cannot carry a fragment ('#')";
		return FG_ROUTE_BAD_TARGET;
	}
	/* the table's paths are canonical: an exact match needs no check */
	const struct builtin *b = builtin_of(target, plen);
	if (b) {
		if (!(b->methods & method)) {
			out->allowed = b->methods;
			return FG_ROUTE_METHOD;
		}
		out->api = b->api;
		out->public_path = b->public_path;
		return FG_ROUTE_OK;
	}
	if ((*why = fg_url_path_problem(target, plen)))
		return FG_ROUTE_BAD_TARGET;
	const struct fg_passthrough *e = a ? find_passthrough(a, target, plen) : NULL;
	if (!e)
		return FG_ROUTE_NOT_FOUND;
	if (!(e->methods & method)) {
		out->allowed = e->methods;
		return FG_ROUTE_METHOD;
	}
	out->api = FG_API_PASSTHROUGH;
	out->pass = e;
	out->public_path = !e->auth;
	return FG_ROUTE_OK;
}
