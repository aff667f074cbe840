/* http_request.h — the JSON body of an OpenAI-style (or vLLM) request: what
 * admission needs to price it, the rewrite forwarded to the engine, and the
 * body of the /tokenize call that counts its prompt exactly.
 *
 * Rewrite: the output cap that was reserved replaces the client's
 * (max_tokens and max_completion_tokens for chat, max_tokens for
 * completions, max_output_tokens for responses), so the engine cannot
 * generate past what was paid for; the tenant's cache_salt replaces any
 * client salt (or none for shared-cache tenants); streams get
 * stream_options {include_usage, continuous_usage_stats} so the agent knows
 * the true prompt at the first chunk and settles from the engine's usage;
 * `priority` is set from the tier only where the engine schedules by
 * priority (a client's own priority is never forwarded). */
#ifndef FAIRGATE_HTTP_REQUEST_H
#define FAIRGATE_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/pricing.h"
#include "policy/request_path.h"

/* Where a top-level member the rewrite may drop sits in the body. */
struct fg_req_member {
	bool present;
	bool is_object;            /* stream_options: an object (not null) */
	size_t cut_from, cut_to;   /* the member and the comma after it */
	size_t value_end;
	size_t open, close;        /* objects: offsets of '{' and '}' */
};

/* A member of stream_options the rewrite owns, inside that object. */
struct fg_inner_member {
	bool present;
	size_t cut_from, cut_to;
};

/* A top-level member copied into the /tokenize body: "key": value. */
struct fg_span {
	size_t from, to;           /* to == 0: absent */
};

enum fg_tok_member {
	FG_TM_MODEL = 0, FG_TM_MESSAGES, FG_TM_TOOLS, FG_TM_PROMPT, FG_TM_ADD_GENERATION,
	FG_TM_CONTINUE_FINAL, FG_TM_CHAT_TEMPLATE, FG_TM_TEMPLATE_KWARGS, FG_TM_ADD_SPECIAL,
	FG_TM_MM_KWARGS, FG_TM_INSTRUCTIONS, FG_TM_N
};

struct fg_req_info {
	enum fg_api api;
	char model[FG_CAL_MODEL_MAX];
	bool stream;
	bool client_wants_usage;   /* stream_options.include_usage as the client sent it */
	bool client_wants_continuous; /* stream_options.continuous_usage_stats */
	bool input_is_string;      /* responses: `input` is one string */
	uint32_t videos, files;    /* content parts no rule prices: refused by the proxy */
	struct fg_request_shape shape;
	/* the body's layout, for fg_request_forward_body */
	size_t brace;              /* offset of the top-level '{' */
	uint32_t members;          /* top-level members */
	size_t other_end;          /* end of the last member no rewrite drops (0: none) */
	struct fg_req_member cache_salt, priority, stream_options;
	struct fg_req_member max_tokens, max_completion_tokens, max_output_tokens;
	struct fg_inner_member include_usage, continuous_usage;
	size_t so_kept_end;        /* inside stream_options: end of its last member that stays */
	struct fg_span tok[FG_TM_N];
};

/* Parse and validate a body in one streaming pass (lib/json_tok.c): well-formed JSON
 * in strict UTF-8 without NUL (raw or \u0000), lone surrogates, numbers
 * out of range, nesting deeper than 2048 or duplicate keys at any depth,
 * whose top level is an object with the members of `api` well typed.
 * FG_API_PASSTHROUGH takes any object (only its cache_salt and priority
 * matter). Returns 0, or -1 with a message for the client and the
 * offending parameter (or NULL). No tree is built: the shape, the model and
 * the layout the rewrite needs are recorded in `info`. */
int fg_request_parse(enum fg_api api, const char *body, size_t len, struct fg_req_info *info,
		     char *msg, size_t msglen, const char **param);

/* The same check by the reference reader (yajl, a separate strict-UTF-8
 * pass): what fg_request_parse was before its own tokenizer, and what
 * words its refusals (a body the tokenizer refuses is read again by it).
 * For every body both return the same, fill the same fg_req_info and say
 * the same (test_request_scan and fuzz_request_json compare them). */
int fg_request_parse_reference(enum fg_api api, const char *body, size_t len,
			       struct fg_req_info *info, char *msg, size_t msglen, const char **param);

/* The same check over a body read piece by piece, so that each read costs
 * only its own bytes and the end of the body costs nothing more:
 * fg_request_scan_feed after each read (body: all of it so far, which may
 * have moved; only what is past the previous call is read), then
 * fg_request_scan_finish with the whole body, which returns and fills
 * exactly what fg_request_parse would for it, wherever the reads fell, and
 * frees the scan. fg_request_scan_free drops one that is not finished.
 * NULL when out of memory. */
struct fg_req_scan;
struct fg_req_scan *fg_request_scan_new(enum fg_api api);
enum fg_api fg_request_scan_api(const struct fg_req_scan *scan);
void fg_request_scan_feed(struct fg_req_scan *scan, const char *body, size_t len);
int fg_request_scan_finish(struct fg_req_scan *scan, const char *body, size_t len,
			   struct fg_req_info *info, char *msg, size_t msglen, const char **param);
void fg_request_scan_free(struct fg_req_scan *scan);

/* The APIs whose streams the rewrite can force usage on (their parse
 * tracks stream_options; vLLM's responses streams carry no usage option). */
static inline bool fg_api_streams_usage(enum fg_api api)
{
	return api == FG_API_CHAT || api == FG_API_COMPLETIONS;
}

struct fg_rewrite {
	const char *cache_salt;    /* NULL: forward no salt at all */
	bool force_usage;          /* streams of fg_api_streams_usage APIs: include_usage
				    * and continuous_usage_stats on */
	bool set_priority;
	int priority;
	uint64_t max_tokens;       /* > 0: the output cap, written the way info->api names it */
};

/* The body to forward for a body fg_request_parse accepted into `info`:
 * the new members are spliced in after the opening brace and the client's
 * bytes follow untouched, less any member the rewrite owns (a client's
 * cache_salt and priority; its output caps when one is written; with
 * forced usage, its stream_options, whose other members are carried into
 * the new one). Duplicate keys were refused at parse, so nothing can
 * shadow the spliced members. Only what changes is copied: `head` (the
 * brace and the spliced members) is made, the client's bytes that follow
 * are ranges of its body, sent from where they are (writev). */
#define FG_FWD_PARTS 7 /* one more than the members a rewrite can cut */
struct fg_body_part {
	size_t from, to;
};
struct fg_fwd_body {
	char *head;                /* malloc'd, NUL-terminated; NULL: nothing rewritten */
	size_t head_len;
	uint32_t n;
	struct fg_body_part part[FG_FWD_PARTS]; /* then body[from, to) of each */
	size_t len;                /* the whole forwarded body */
};

/* 0, or -1 when out of memory (fwd then holds nothing). */
int fg_request_forward(const struct fg_req_info *info, const char *body, size_t len,
		       const struct fg_rewrite *rw, struct fg_fwd_body *fwd);
void fg_fwd_body_free(struct fg_fwd_body *fwd);

/* The most fg_request_forward's head can take for this body with a salt of
 * salt_len bytes (what the buffered-bytes budget holds for it). */
size_t fg_request_forward_head_room(const struct fg_req_info *info, size_t salt_len);

/* The same body in one buffer (malloc'd, NUL-terminated, *out_len bytes),
 * for the tests and benches; NULL when out of memory. */
char *fg_request_forward_body(const struct fg_req_info *info, const char *body, size_t len,
			      const struct fg_rewrite *rw, size_t *out_len);

/* The body of a POST /tokenize that counts this request's prompt as the
 * engine will (vLLM's completion-shaped {"model","prompt"} or chat-shaped
 * {"model","messages",...}; a responses request becomes chat-shaped: its
 * instructions a system message, its input the messages). NULL when the
 * shape cannot be counted in one call (several prompts, token ids) or out
 * of memory. */
char *fg_tokenize_body(const struct fg_req_info *info, const char *body, size_t len,
		       size_t *out_len);

/* vLLM's /tokenize answer: `count` and `max_model_len` (0 when absent).
 * 0, or -1 when it is not an object with a non-negative integer count. */
int fg_tokenize_answer(const char *body, size_t len, uint64_t *count, uint64_t *max_model_len);

#endif
