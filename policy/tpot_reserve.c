/* tpot_reserve.c — the TPOT reservation's rule and price; see tpot_reserve.h. */
#include <math.h>
#include <string.h>

#include "tpot_reserve.h"

/* sequences a context of `tokens` stands for at `context_per_seq` each */
static double sequences_of(double tokens, double context_per_seq)
{
	if (!(tokens > 0))
		return 0;
	return context_per_seq >= 1 ? fmax(1, ceil(tokens / context_per_seq)) : 1;
}

uint64_t fg_tpot_context_within(const struct fg_cost_model *cm, double step_s,
				double context_per_seq)
{
	/* the step grows with context: bisect on the model, whatever its form */
	uint64_t lo = 0, hi = 1ull << 40;

	if (fg_batch_step_s(cm, 1, 1, 0) > step_s)
		return 0;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		double t = (double)mid;
		if (fg_batch_step_s(cm, sequences_of(t, context_per_seq), t, 0) <= step_s)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

uint32_t fg_tpot_batch_within(const struct fg_cost_model *cm, double step_s,
			      double context_per_seq)
{
	uint32_t lo = 0, hi = 1u << 24;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (fg_batch_step_s(cm, mid, (double)mid * context_per_seq, 0) <= step_s)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

void fg_tpot_configure(struct fg_tpot_reserve *r, const struct fg_cost_model *cm,
		       const struct fg_policy *p)
{
	uint32_t sequences = r->sequences;
	double reserve = 0;

	memset(r, 0, sizeof(*r));
	r->sequences = sequences;
	r->policy = p;
	for (uint32_t i = 0; i < p->n_tenants; i++) {
		const struct fg_tier *t = &p->tiers[p->tenants[i].tier];
		if (!(t->tpot_p99_ms > 0))
			continue;
		double target = t->tpot_p99_ms / 1e3;
		if (!r->target_s || target < r->target_s)
			r->target_s = target;
		r->holders++;
		reserve += (double)t->kv_cap_tokens;
	}
	r->holders_kv_caps = reserve;
	fg_tpot_recost(r, cm);
}

void fg_tpot_recost(struct fg_tpot_reserve *r, const struct fg_cost_model *cm)
{
	if (!r->target_s)
		return;
	double reserve = r->holders_kv_caps;
	r->cap_tokens = fg_tpot_context_within(cm, r->target_s, cm->ref_context);
	r->reserve_tokens = reserve < (double)r->cap_tokens ? (uint64_t)reserve : r->cap_tokens;
}

enum fg_tpot_verdict fg_tpot_check(const struct fg_tpot_reserve *r, const struct fg_cost_model *cm,
				   uint32_t tenant, uint32_t sequences, uint64_t context_tokens,
				   uint64_t prefill_tokens, const struct fg_tpot_batch *b)
{
	if (!fg_tpot_active(r))
		return FG_TPOT_GO;
	/* alone it cannot do better: refusing it would starve it */
	if (!b->sequences && !b->context_tokens)
		return FG_TPOT_GO;
	bool holder = fg_tpot_is_holder(r, tenant);
	uint64_t unused = 0;
	if (!holder && r->reserve_tokens > b->holders_tokens)
		unused = r->reserve_tokens - b->holders_tokens;
	double ctx = (double)b->context_tokens + (double)context_tokens + (double)unused;
	double own = sequences ? sequences : 1, seqs = (double)b->sequences + own;
	double prefill = (double)b->pending_prefill + (double)prefill_tokens;
	if (fg_batch_step_s(cm, seqs, ctx, prefill) <= r->target_s)
		return FG_TPOT_GO;
	/* A prompt whose prefill misses the target even on an empty engine can
	 * never fit: it goes when nothing else waits to start and the batch
	 * has room for its decode, one long step, rather than never. */
	if (!b->pending_prefill &&
	    fg_batch_step_s(cm, own, (double)context_tokens, (double)prefill_tokens) > r->target_s &&
	    fg_batch_step_s(cm, seqs, ctx, 0) <= r->target_s)
		return FG_TPOT_GO;
	return holder ? FG_TPOT_WAIT_HOLDER : FG_TPOT_WAIT_OTHER;
}

void fg_tpot_sent(struct fg_tpot_reserve *r, uint32_t sequences)
{
	r->sequences += sequences;
}

void fg_tpot_ended(struct fg_tpot_reserve *r, uint32_t sequences)
{
	r->sequences -= sequences < r->sequences ? sequences : r->sequences;
}

struct fg_tpot_price fg_tpot_price(const struct fg_cost_model *cm, double target_s)
{
	struct fg_tpot_price pr = { 0 };
	double ctx = cm->ref_context;

	pr.ref_batch = cm->ref_batch;
	pr.ref_step_s = fg_batch_step_s(cm, pr.ref_batch, pr.ref_batch * ctx, 0);
	pr.ref_tokens_per_s = pr.ref_step_s > 0 ? pr.ref_batch / pr.ref_step_s : 0;
	pr.batch = fg_tpot_batch_within(cm, target_s, ctx);
	pr.step_s = fg_batch_step_s(cm, pr.batch, pr.batch * ctx, 0);
	pr.tokens_per_s = pr.batch && pr.step_s > 0 ? pr.batch / pr.step_s : 0;
	/* a cap above the reference batch forgoes nothing the policy sells */
	pr.forgone_share = pr.ref_tokens_per_s > 0 ? 1 - pr.tokens_per_s / pr.ref_tokens_per_s : 1;
	if (pr.forgone_share < 0)
		pr.forgone_share = 0;
	pr.usd_per_month = pr.forgone_share * cm->dedicated_usd_per_month;
	return pr;
}
