/* gateway.h — one request's life at the gateway, as pure logic.
 *
 * Composes the pieces in policy/: pricing (what a request may cost), the
 * tenant's token bucket (may it spend that now), tier limits and the
 * long-context route, the KV ledger (does its memory fit), the fair queue
 * (who goes next), the engine window (is the engine's own queue shallow
 * enough to send more) and the TPOT reservation (would the engine's step
 * stay within the tightest latency SLO sold). The proxy calls these functions around its I/O; the
 * scenario tests and benchmarks call the very same functions in virtual time
 * against the simulator's engine model, so what they measure is what runs.
 *
 *   fg_gw_exact_wanted  would the engine's own prompt count change the verdict?
 *   fg_gw_admit      priced, checked, bucket reserved, queued (or refused)
 *   fg_gw_dispatch   next request to send to the engine, if any may go
 *   fg_gw_first_token / fg_gw_output   progress (output charged as it streams)
 *   fg_gw_prompt_known  the engine's prompt count mid-stream: limits checked again
 *   fg_gw_learn      the tenant's calibration learns from its own usage
 *   fg_gw_finish     settled from usage, KV released
 *   fg_gw_abort      engine failure or refusal, or client gone while queued:
 *                    the tenant is refunded; a request that was sent keeps
 *                    its fair-queue charge (it held its place in the window)
 *   fg_gw_expire     waited past the tier's max_queue_s: refund, 429
 *   fg_gw_tokenizer_ran  the engine counted a prompt admission then refused: billed
 */
#ifndef FAIRGATE_GATEWAY_H
#define FAIRGATE_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/id_set.h"
#include "admission.h"
#include "cost_model.h"
#include "engine_window.h"
#include "fair_queue.h"
#include "kv_ledger.h"
#include "peak_meter.h"
#include "policy.h"
#include "pricing.h"
#include "token_bucket.h"
#include "tpot_reserve.h"

enum fg_gw_outcome {
	FG_GW_QUEUED = 0,          /* admitted; wait for fg_gw_dispatch */
	FG_GW_LONG_CONTEXT,        /* admitted; send now to the long-context pool */
	FG_GW_RETRY_LATER,         /* 429 + Retry-After (wait_ns) */
	FG_GW_BUCKET_NEVER,        /* 4xx, x-should-retry: false: above the bucket depth */
	FG_GW_CONTEXT_EXCEEDED,    /* 400 context_length_exceeded: above the tier's max_context */
	FG_GW_KV_NEVER,            /* 400: alone above the tenant's KV cap or the node pool */
	FG_GW_NO_LONG_POOL,        /* 400: long context and no long-context pool */
	FG_GW_TIMED_OUT,           /* 429: waited past max_queue_s (from fg_gw_expire) */
	FG_GW_TENANT_GONE,         /* 403: its tenant left the policy while it waited */
};

enum fg_gw_state { FG_GW_S_NEW = 0, FG_GW_S_QUEUED, FG_GW_S_SENT, FG_GW_S_STARTED, FG_GW_S_DONE };

struct fg_gw_request {
	struct fg_fq_item item;       /* item.owner: the caller's object */
	struct fg_gw_request *prev, *next; /* live list, for reloads */
	uint32_t tenant;
	bool orphan;                  /* its tenant left the policy on reload */
	bool long_context;
	enum fg_gw_state state;
	struct fg_price price;
	uint64_t context_tokens;      /* prompt + max output of one choice */
	uint64_t kv_tokens;           /* n x (prompt + max output) */
	uint64_t prefill_tokens;
	uint32_t prompts, n;          /* sequences: prompts x n choices */
	int cal_model;                /* fg_cal_models index, 0 = not yet named */
	uint64_t prompt_chars;        /* what calibration learns from */
	double prompt_fixed;          /* framing, media, token ids: not text */
	bool prompt_exact;            /* priced on the engine's own count */
	/* Set by the caller after admission: the answer streams, so its first
	 * token will say when the engine started it (else the engine's counts
	 * must; see engine_window.h). */
	bool streams;
	struct fg_ew_item ew;         /* while sent to the engine */
	bool kv_held;
	double output_charged;        /* output tokens already charged to the fair queue */
	double queue_charged;         /* units charged to the fair queue so far */
	uint64_t admitted_ns, sent_ns, first_token_ns;
};

struct fg_gw_decision {
	enum fg_gw_outcome outcome;
	uint64_t wait_ns;             /* RETRY_LATER / TIMED_OUT: Retry-After source */
	double cost;                  /* units reserved or that would have been */
	char reason[200];             /* for the client's error message */
};

struct fg_gw_tenant {
	struct fg_bucket bucket;
	double typical_cost;          /* EWMA, drives deny windows */
	double reserved_units;        /* held by admitted, unsettled requests */
	double billed_units;
	double billed_output_tokens;  /* completion tokens settled (capped at the reservation) */
	double billed_output_units;   /* what they were billed: by their context, or flat */
	uint32_t inflight;            /* admitted and not finished (queued + sent) */
	uint64_t admitted, rejected, never, timed_out, settled, aborted;
	uint64_t usage_clamped;       /* engine reported a prompt above what its bytes make */
	uint64_t cut_off;             /* streams ended when their true prompt broke a limit */
	uint64_t exact_counts;        /* admissions decided on the engine's /tokenize count */
	struct fg_calibration cal;    /* this tenant's chars/token, learned from its own usage */
	double refused_units;         /* priced and told to retry later (429): unmet demand */
	double refused_peak;          /* the largest such price since a reader reset it */
	uint64_t deny_until_ns;       /* what the kernel should enforce */
	uint64_t retry_turn_ns;       /* when the bucket has refilled for every client told to retry */
};

struct fg_gateway {
	const struct fg_policy *policy;
	struct fg_cost_model cm;      /* what every price is charged on */
	/* what the TPOT cap is sized on: the policy's, or under calibration
	 * `on` the measured step at once (fg_gw_set_step_model) */
	struct fg_cost_model step_cm;
	/* Per-tenant state, by tenant id, for the n_tenants the policy had at
	 * init or the last reload (a policy grown in place is not seen before
	 * fg_gw_reload: its new ids are refused as unknown until then). */
	uint32_t n_tenants;
	struct fg_gw_tenant *t;
	/* tenants whose books or bucket a request moved (admitted, refused,
	 * settled, refunded, timed out, a count billed) since the reader last
	 * cleared it: agent.fleet's tick wakes these instead of visiting every
	 * tenant. Starts empty at init and at a reload (whose reader then
	 * looks at every tenant anyway). */
	struct fg_idset moved;
	struct fg_fq fq;
	struct fg_kv_ledger kv;
	struct fg_engine_window ew;
	struct fg_tpot_reserve tpot;  /* tiers' tpot_p99_ms: the decode batch's cap */
	bool others_held;             /* this dispatch: a non-holder's request waits for the batch */
	struct fg_peak_meter peaks;
	struct fg_cal_models models;  /* names only: every ratio is per tenant */
	uint64_t engine_max_model_len;/* the engine's context limit, from /tokenize; 0 unknown */
	struct fg_gw_request *live;   /* every admitted, unfinished request */
	struct fg_gw_request *orphans_queued; /* waiting when their tenant left */
	bool kv_caps;                 /* enforce tier kv_cap_tokens (default on) */
	uint64_t rng;                 /* Retry-After jitter */
};

/* The policy must outlive the gateway (or be replaced by fg_gw_reload).
 * step_tokens: prefill tokens per engine step for the shallow-queue window;
 * 0 = derive from the cost model (decode step time / prompt-token time).
 * Per-tenant state is sized to the policy's tenants (~600 bytes each).
 * Returns -1 when out of memory (the gateway then holds nothing). */
int fg_gw_init(struct fg_gateway *gw, const struct fg_policy *p, uint64_t step_tokens,
	       uint64_t now_ns);
/* Frees the per-tenant state (live requests are the caller's). */
void fg_gw_free(struct fg_gateway *gw);
/* New policy: tenants are matched by name; buckets, counters, queued and
 * in-flight requests follow them, into state resized to the new policy.
 * Requests of tenants that left finish (or time out) without touching
 * anyone's bucket. Returns -1 when out of memory: the gateway keeps the old
 * policy and all its state. */
int fg_gw_reload(struct fg_gateway *gw, const struct fg_policy *p, uint64_t now_ns);
/* fg_gw_reload in two steps, for a caller with more to prepare that may
 * fail: prepare takes all the memory (-1 if it cannot: nothing changed),
 * then exactly one of commit (cannot fail) or cancel. */
struct fg_gw_tenant_state {
	const struct fg_policy *policy;
	int32_t *map;                 /* old tenant id -> new id, -1 = gone */
	struct fg_gw_tenant *t;
	struct fg_idset moved;
	struct fg_fq fq;
	struct fg_kv_ledger kv;
	struct fg_peak_meter peaks;
};
int fg_gw_reload_prepare(const struct fg_gateway *gw, const struct fg_policy *p,
			 struct fg_gw_tenant_state *next);
void fg_gw_reload_commit(struct fg_gateway *gw, struct fg_gw_tenant_state *next, uint64_t now_ns);
void fg_gw_reload_cancel(struct fg_gw_tenant_state *next);
/* Prices from another cost model (calibration under `on`, moving at a
 * bounded rate so a bill never jumps). The TPOT cap does not follow it. */
void fg_gw_set_cost_model(struct fg_gateway *gw, const struct fg_cost_model *cm);
/* The step model the TPOT reservation's batch cap and KV reserve are sized
 * on, recomputed at once: the measured one under calibration `on` (a cap
 * sized on a model faster than the engine breaks the SLO for as long as
 * the prices take to follow), the policy's otherwise. fg_gw_init and
 * fg_gw_reload set it to the policy's. */
void fg_gw_set_step_model(struct fg_gateway *gw, const struct fg_cost_model *cm);

/* Whether asking the engine for the prompt's exact count could change what
 * fg_gw_admit decides: the estimate lies between "certainly fits" (the most
 * tokens its bytes can make) and a limit that refuses or routes it (tier
 * max_context, the long-context threshold, the engine's max_model_len, the
 * KV caps), or the bucket barely covers (or misses) the price.
 * `cut_off_later`: a stream whose true prompt is reported with its first
 * chunk (ended there if it breaks a limit), so only estimates within
 * FG_EXACT_MARGIN of a limit are worth the round trip. False for shapes the
 * engine cannot count in one call (prompt arrays) and exact prompts. */
#define FG_EXACT_MARGIN 0.25
bool fg_gw_exact_wanted(const struct fg_gateway *gw, uint32_t tenant, const char *model,
			const struct fg_request_shape *shape, bool cut_off_later, uint64_t now_ns);

/* Price and admit. On QUEUED or LONG_CONTEXT the request is live and must end
 * with fg_gw_finish, fg_gw_abort or fg_gw_expire; otherwise it never was. */
struct fg_gw_decision fg_gw_admit(struct fg_gateway *gw, struct fg_gw_request *req,
				  uint32_t tenant, const char *model,
				  const struct fg_request_shape *shape, uint64_t now_ns);
/* Next queued request that may go to the engine now, or NULL. */
struct fg_gw_request *fg_gw_dispatch(struct fg_gateway *gw, uint64_t now_ns);
void fg_gw_first_token(struct fg_gateway *gw, struct fg_gw_request *req, uint64_t now_ns);
/* `completion_tokens` streamed so far (monotonic). */
void fg_gw_output(struct fg_gateway *gw, struct fg_gw_request *req, double completion_tokens,
		  uint64_t now_ns);
/* The engine reported the prompt's true count while the request runs (a
 * stream's first chunk). Its KV reservation follows the count; returns
 * FG_GW_QUEUED (go on) or, when the true prompt breaks the tier's
 * max_context or the tenant's KV cap, FG_GW_CONTEXT_EXCEEDED / FG_GW_KV_NEVER
 * with the reason: the caller ends the request there (fg_gw_finish with
 * what it used). */
struct fg_gw_decision fg_gw_prompt_known(struct fg_gateway *gw, struct fg_gw_request *req,
					 double prompt_tokens, uint64_t now_ns);
/* Learn from the engine's prompt count in this request's usage: the
 * tenant's own calibration for the model (nothing else moves it). */
void fg_gw_learn(struct fg_gateway *gw, const struct fg_gw_request *req, const char *model,
		 double prompt_tokens);
/* The tenant's current chars/token for `model`. */
double fg_gw_chars_per_token(const struct fg_gateway *gw, uint32_t tenant, const char *model);

/* Returns the units billed. */
double fg_gw_finish(struct fg_gateway *gw, struct fg_gw_request *req,
		    const struct fg_usage *usage, uint64_t now_ns);
/* Engine failure or refusal before usage, or the client left while queued:
 * the tenant's bucket is refunded in full. A request that was sent keeps what
 * the fair queue charged it (its prompt, and any output that streamed): the
 * window was held for it, and a refusal that cost nothing would let its
 * tenant go first for ever. */
void fg_gw_abort(struct fg_gateway *gw, struct fg_gw_request *req, uint64_t now_ns);
/* A queued request past its deadline (removed, refunded), or NULL. */
struct fg_gw_request *fg_gw_expire(struct fg_gateway *gw, uint64_t now_ns,
				   struct fg_gw_decision *why);
/* Earliest queue deadline, 0 if none (for the caller's timer). */
/* The engine's /tokenize counted `tokens` of this tenant's prompt before
 * admission (fg_gw_exact_wanted asked for it) and admission refused the
 * request: the engine did that work for a request nobody will bill, so it
 * is billed as the tenant's own /tokenize would be (fg_price_tokenizer),
 * from the bucket (which may go into debt), outside the fair queue (it ran
 * outside the engine window). An admitted request pays for its prompt.
 * `refusal`: admission's decision, or NULL; a rate refusal's wait
 * (RETRY_LATER) grows by the time the bucket takes to refill the charge,
 * and so does the tenant's retry turn, so the Retry-After stays true.
 * Returns the units billed. */
double fg_gw_tokenizer_ran(struct fg_gateway *gw, uint32_t tenant, uint64_t tokens, uint64_t now_ns,
			   struct fg_gw_decision *refusal);

uint64_t fg_gw_next_deadline(const struct fg_gateway *gw);

/* Seconds of replica time the queued requests will take at full speed
 * (their reserved units over the replica's units/s at 100%): the node's
 * backlog, for fg_overload_level. */
double fg_gw_backlog_s(const struct fg_gateway *gw);

/* Deny window for the kernel after the latest decision (0 = none). */
uint64_t fg_gw_deny_until(struct fg_gateway *gw, uint32_t tenant, uint64_t now_ns);

const char *fg_gw_outcome_name(enum fg_gw_outcome o);

#endif
