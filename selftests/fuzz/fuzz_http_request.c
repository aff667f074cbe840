/* fuzz_http_request.c — libFuzzer target: client bytes on the agent's
 * listening socket, through what the proxy does with them before anything
 * reaches the engine: libhttp-parser driving the proxy's header collector
 * (agent/http/http_headers.c, which must cope with names and values split
 * across reads), the API of the request line, the tenant's credential
 * (agent/proxy/identity.c), the route the target names (policy/request_path.c),
 * and for inference calls the body parse, price, rewrite and the /tokenize
 * body (agent/http/http_request.c) — pipelined requests included.
 *
 * The input is fed in chunks whose sizes come from its first byte, the way
 * recv() splits a stream, into the proxy's own parser callbacks
 * (fg_client_req_settings) on a client that is never connected: the
 * harness plays the proxy's read loop around them. Invariants: every
 * header and the URL lie inside the collected
 * buffer, names and values concatenate to what was on the wire, a bearer
 * token is a non-empty blank-free slice of its header, a routed path is
 * canonical (no percent-encoding, dot or empty segments), and an inference
 * body that parses is forwarded as a JSON object carrying the injected
 * salt and the output cap (once, as its API names it), with a /tokenize
 * body, when there is one, that is a JSON object too. */
#include <http_parser.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "agent/http/http_request.h"
#include "agent/proxy/identity.h"
#include "agent/proxy/proxy_internal.h"
#include "selftests/fuzz/fuzz_common.h"

#define MAX_BODY (1u << 20)
#define SALT "fg1-acme-0123456789abcdef"

static void check_headers(const struct fg_hdrs *h)
{
	size_t total = 0;

	FUZZ_CHECK(h->n <= FG_MAX_HEADERS, "%u headers", h->n);
	for (uint32_t i = 0; i < h->n; i++) {
		const struct fg_hdr *e = &h->h[i];
		size_t vlen;
		FUZZ_CHECK((size_t)e->name + e->name_len <= h->raw.len, "header %u name outside", i);
		FUZZ_CHECK(!e->value_len || (size_t)e->value + e->value_len <= h->raw.len,
			   "header %u value outside", i);
		const char *v = fg_hdr_value(h, i, &vlen);
		FUZZ_CHECK(!vlen || (v >= h->raw.data && v + vlen <= h->raw.data + h->raw.len),
			   "value pointer outside");
		(void)fg_hop_by_hop(h, i);
		total += e->name_len + e->value_len;
	}
	FUZZ_CHECK(total <= h->raw.len, "headers claim %zu of %zu bytes", total, h->raw.len);
}

static void check_identity(const struct fg_hdrs *h)
{
	size_t len, tlen;
	const char *v = fg_hdrs_get(h, "authorization", &len);

	if (!v)
		return;
	const char *tok = fg_bearer_token(v, len, &tlen);
	if (!tok)
		return;
	FUZZ_CHECK(tok >= v && tlen && tok + tlen <= v + len, "token outside its header");
	for (size_t i = 0; i < tlen; i++)
		FUZZ_CHECK(tok[i] != ' ' && tok[i] != '\t', "blank inside a token");
	uint8_t hash[32];
	FUZZ_CHECK(fg_sha256(tok, tlen, hash) == 0, "sha256 failed");
	(void)fg_hdrs_get(h, FG_TENANT_HEADER, &len);
	(void)fg_hdrs_get(h, "expect", &len);
}

static struct fg_agent agent; /* with a passthrough entry, set up once */

static void check_route(const char *url, size_t len, const struct fg_route *r)
{
	const char *q = memchr(url, '?', len);
	size_t plen = q ? (size_t)(q - url) : len;

	FUZZ_CHECK(r->path_len == plen, "path length %zu, want %zu", r->path_len, plen);
	FUZZ_CHECK(plen && url[0] == '/', "a routed path that does not start with '/'");
	FUZZ_CHECK(!memchr(url, '%', plen) && !memmem(url, plen, "//", 2),
		   "a routed path with %% or //: %.*s", (int)plen, url);
	FUZZ_CHECK(!memmem(url, plen, "/./", 3) && !memmem(url, plen, "/../", 4) &&
			   !(plen >= 2 && !memcmp(url + plen - 2, "/.", 2)) &&
			   !(plen >= 3 && !memcmp(url + plen - 3, "/..", 3)),
		   "a routed path with a dot segment: %.*s", (int)plen, url);
	FUZZ_CHECK(r->api != FG_API_PASSTHROUGH || r->pass, "passthrough without its entry");
}

static void check_forwarded(const struct fg_req_info *info, const char *fwd, size_t n,
			    uint64_t cap)
{
	json_t *out = json_loadb(fwd, n, JSON_REJECT_DUPLICATES, NULL);
	FUZZ_CHECK(json_is_object(out), "forwarded body is not a JSON object: %.*s",
		   (int)(n < 300 ? n : 300), fwd);
	FUZZ_CHECK(!strcmp(json_string_value(json_object_get(out, "cache_salt")) ?: "", SALT),
		   "salt not injected");
	const char *cap_key = info->api == FG_API_RESPONSES ? "max_output_tokens" : "max_tokens";
	if (cap)
		FUZZ_CHECK(json_integer_value(json_object_get(out, cap_key)) == (json_int_t)cap,
		   "%s is not the reserved cap %llu", cap_key, (unsigned long long)cap);
	if (cap && info->api == FG_API_CHAT)
		FUZZ_CHECK(json_integer_value(json_object_get(out, "max_completion_tokens")) ==
				   (json_int_t)cap,
			   "max_completion_tokens is not the reserved cap");
	json_decref(out);
}

static void handle(struct fg_exchange *c, int method, bool stream_rewrite)
{
	const char *url = c->hdrs.raw.data + c->url;
	const char *name = http_method_str((enum http_method)method), *why;
	struct fg_route route;

	FUZZ_CHECK((size_t)c->url + c->url_len <= c->hdrs.raw.len, "URL outside the buffer");
	check_headers(&c->hdrs);
	check_identity(&c->hdrs);
	if (!c->url_len)
		return;
	if (fg_route_target(&agent, fg_method_bit(name, strlen(name)), url, c->url_len, &route,
			    &why) != FG_ROUTE_OK)
		return;
	check_route(url, c->url_len, &route);
	enum fg_api api = route.api;
	if (api == FG_API_NONE)
		return;

	struct fg_req_info info;
	char msg[384];
	const char *param;
	if (fg_request_parse(api, fg_buf_head(&c->body), fg_buf_used(&c->body), &info, msg,
			     sizeof(msg), &param)) {
		FUZZ_CHECK(msg[0], "refusal without a message");
		return;
	}
	bool inference = api == FG_API_CHAT || api == FG_API_COMPLETIONS || api == FG_API_RESPONSES;
	uint64_t cap = inference ? 1 + (info.shape.max_tokens % 4096) : 0;
	struct fg_rewrite rw = { .cache_salt = SALT, .force_usage = info.stream || stream_rewrite,
				 .max_tokens = cap };
	size_t n = 0;
	char *fwd = fg_request_forward_body(&info, fg_buf_head(&c->body), fg_buf_used(&c->body), &rw,
					    &n);
	if (fwd)
		check_forwarded(&info, fwd, n, cap);
	free(fwd);
	char *tok = fg_tokenize_body(&info, fg_buf_head(&c->body), fg_buf_used(&c->body), &n);
	if (tok) {
		json_t *t = json_loadb(tok, n, 0, NULL);
		/* responses input items are copied as messages: any JSON the
		 * client sent stays JSON */
		FUZZ_CHECK(json_is_object(t), "the /tokenize body is not a JSON object: %.*s",
			   (int)(n < 300 ? n : 300), tok);
		json_decref(t);
	}
	free(tok);
}

/* What the proxy's exchange_reset leaves for the next pipelined request. */
static void next_exchange(struct fg_exchange *x)
{
	fg_hdrs_reset(&x->hdrs);
	fg_buf_reset(&x->body);
	x->url = x->url_len = 0;
	x->started = x->headers_done = x->complete = false;
	x->heads_pending = x->want_continue = false;
	x->reject_status = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t opt = fuzz_take_byte(&data, &size);
	uint32_t rng = opt | (uint32_t)size << 8;
	size_t max_chunk = opt & 0x80 ? size : 1 + (opt & 0x3f);
	static struct fg_proxy px;
	struct fg_client *c = calloc(1, sizeof(*c));
	struct fg_exchange *x;
	size_t off = 0;

	FUZZ_CHECK(c, "out of memory");
	if (!agent.n_passthrough) {
		agent.n_passthrough = 1;
		strcpy(agent.passthrough[0].path, "/v1/audio/");
		agent.passthrough[0].prefix = true;
		agent.passthrough[0].methods = FG_M_POST;
		agent.passthrough[0].units = 10;
		agent.passthrough[0].auth = 1;
	}
	x = c->x = calloc(1, sizeof(*x));
	FUZZ_CHECK(x, "out of memory");
	px.max_body = MAX_BODY;
	px.header_ns = px.body_ns = 10ull * 1000000000ull;
	c->px = &px;
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	/* The proxy's loop: parse what arrived, one exchange at a time; a
	 * paused parser is resumed after the exchange and fed the rest. */
	while (off < size) {
		size_t n = fuzz_next_chunk(&rng, max_chunk);
		size_t end = off + n < size ? off + n : size;
		while (off < end) {
			size_t got = http_parser_execute(&c->parser, &fg_client_req_settings,
							 (const char *)data + off, end - off);
			FUZZ_CHECK(got <= end - off, "parser consumed %zu of %zu", got, end - off);
			off += got;
			if (x->heads_pending) {
				/* the proxy judges the key here (check_heads): the
				 * harness lets every request's body come */
				FUZZ_CHECK(x->headers_done, "paused for a body before the headers");
				x->heads_pending = false;
				http_parser_pause(&c->parser, 0);
				continue;
			}
			if (x->complete) {
				FUZZ_CHECK(x->headers_done && !x->reject_status,
					   "complete without headers, or refused (%d)", x->reject_status);
				http_parser_pause(&c->parser, 0);
				handle(x, c->parser.method, opt & 0x40);
				next_exchange(x);
				continue;
			}
			if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
				enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);

				/* A callback's refusal is one the proxy can answer;
				 * nothing here runs out of memory, so a header the
				 * collector refused is one too many or too long. */
				FUZZ_CHECK(e != HPE_CB_header_field || x->reject_status == 431,
					   "header collector failed without overflow");
				FUZZ_CHECK((e != HPE_CB_headers_complete && e != HPE_CB_body) ||
						   x->reject_status >= 400,
					   "callback refused without a status");
				goto done;
			}
			if (got == 0)
				break;
		}
	}
done:
	fg_buf_free(&x->hdrs.raw);
	fg_buf_free(&x->body);
	fg_buf_free(&c->out);
	free(x);
	free(c);
	return 0;
}
