/* tpot_reserve.h — TPOT reservations: the decode batch kept small enough
 * that every engine step stays within the tightest tier's tpot_p99_ms.
 *
 * Quota cannot buy latency: a tenant's inter-token time is the replica's
 * step time, and the step grows with everything in the batch (the KV every
 * running sequence reads, the prompts mixed into the step by chunked
 * prefill). So a tier with `tpot_p99_ms` buys a capacity reservation on the
 * replica serving it: a request goes to the engine only while the step the
 * gateway's cost model predicts,
 *
 *   fg_batch_step_s(sequences in flight + its own,
 *                   context reserved in flight + its own,
 *                   prefill sent and not started + its own prompt)
 *
 * stays within the target, its own prompt counted as prefill of the next
 * step. Context is counted as reserved (each sequence's prompt + max output,
 * the KV ledger's own count), so the bound holds until the last sequence's
 * last token. A prompt whose prefill misses the target even on an empty
 * engine could never fit: it goes when no other prompt waits to start and
 * the batch has room for its decode, one long step, rather than never.
 *
 * Tenants of a TPOT tier are the reservation's holders. Others may use the
 * batch only up to the target less what the holders could still take (the
 * sum of their tiers' kv_cap_tokens, the holders' `reserve_tokens`, of which
 * what they hold now is already in the batch), so a holder's request never
 * waits for others' growth; the KV ledger keeps the same reserve out of the
 * node's pool for others (kv_ledger.h), so the engine never has to preempt a
 * holder's sequence for their memory. A holder's request that does not fit
 * holds the queue (what frees up goes to it); another's is skipped, and the
 * others behind it skip too, while holders behind it may still go.
 *
 * The price (fg_tpot_price): the replica's decode throughput at the capped
 * batch against the reference batch the policy prices (replica.decode), at
 * the reference context per sequence; the share forgone, in $/month of the
 * dedicated replica. Every step time comes from the cost model the gateway
 * prices with (policy/cost_model.c), so a calibrated model moves the cap.
 */
#ifndef FAIRGATE_TPOT_RESERVE_H
#define FAIRGATE_TPOT_RESERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "cost_model.h"
#include "policy.h"

struct fg_tpot_reserve {
	double target_s;         /* tightest tpot_p99_ms among tiers with tenants; 0 = none */
	uint64_t reserve_tokens; /* context the holders may take: their kv caps, within the cap */
	uint64_t cap_tokens;     /* most context a step holds within the target, nothing pending */
	uint32_t sequences;      /* sent to the engine and not ended (long-context pool aside) */
	uint32_t holders;        /* tenants in TPOT tiers */
	double holders_kv_caps;  /* the sum of their tiers' kv_cap_tokens */
	/* the policy configured from: a holder is a tenant whose tier sells
	 * tpot_p99_ms, read from it (no per-tenant array to size or copy) */
	const struct fg_policy *policy;
};

/* The batch as the gateway books it when a request asks to go. */
struct fg_tpot_batch {
	uint32_t sequences;          /* in flight */
	uint64_t context_tokens;     /* reserved context in flight (the KV ledger's node total) */
	uint64_t holders_tokens;     /* of which the holders' */
	uint64_t pending_prefill;    /* prompt tokens sent and not started */
};

enum fg_tpot_verdict {
	FG_TPOT_GO = 0,
	FG_TPOT_WAIT_HOLDER, /* a holder's request: waits, and nobody behind it goes */
	FG_TPOT_WAIT_OTHER,  /* another's: it and the others wait; holders may go */
};

/* From the policy and the gateway's cost model; `sequences` is kept. The
 * policy must outlive the reservation (or be configured again). O(tenants). */
void fg_tpot_configure(struct fg_tpot_reserve *r, const struct fg_cost_model *cm,
		       const struct fg_policy *p);
/* Another cost model, the same policy: the cap and reserve follow, O(1). */
void fg_tpot_recost(struct fg_tpot_reserve *r, const struct fg_cost_model *cm);
static inline bool fg_tpot_active(const struct fg_tpot_reserve *r) { return r->target_s > 0; }
static inline bool fg_tpot_is_holder(const struct fg_tpot_reserve *r, uint32_t tenant)
{
	const struct fg_policy *p = r->policy;

	return p && tenant < p->n_tenants && p->tiers[p->tenants[tenant].tier].tpot_p99_ms > 0;
}

/* May a request of `tenant` with `sequences` sequences holding
 * `context_tokens` of reserved context and `prefill_tokens` of prompt to
 * compute go to the engine now? */
enum fg_tpot_verdict fg_tpot_check(const struct fg_tpot_reserve *r, const struct fg_cost_model *cm,
				   uint32_t tenant, uint32_t sequences, uint64_t context_tokens,
				   uint64_t prefill_tokens, const struct fg_tpot_batch *b);
void fg_tpot_sent(struct fg_tpot_reserve *r, uint32_t sequences);
void fg_tpot_ended(struct fg_tpot_reserve *r, uint32_t sequences);

/* Most context tokens a step of `ceil(tokens / context_per_seq)` sequences
 * can hold within `step_s` (0 if not even one token fits). */
uint64_t fg_tpot_context_within(const struct fg_cost_model *cm, double step_s,
				double context_per_seq);
/* Most sequences of `context_per_seq` tokens a step holds within `step_s`. */
uint32_t fg_tpot_batch_within(const struct fg_cost_model *cm, double step_s,
			      double context_per_seq);

struct fg_tpot_price {
	uint32_t batch;            /* sequences at the reference context within the target */
	double step_s;             /* that batch's step */
	double tokens_per_s;       /* its decode throughput */
	uint32_t ref_batch;
	double ref_step_s, ref_tokens_per_s;
	double forgone_share;      /* 1 - tokens_per_s / ref_tokens_per_s, at least 0 */
	double usd_per_month;      /* forgone_share x the dedicated replica */
};
struct fg_tpot_price fg_tpot_price(const struct fg_cost_model *cm, double target_s);

#endif
