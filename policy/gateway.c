/* gateway.c — a request's life at the gateway; see gateway.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lib/huge_pages.h"

#define NS_PER_S 1e9

static const struct fg_tier *tier_of(const struct fg_gateway *gw, uint32_t tenant)
{
	return &gw->policy->tiers[gw->policy->tenants[tenant].tier];
}

static void setup_tenant(struct fg_gateway *gw, uint32_t id, uint64_t now_ns, bool keep)
{
	const struct fg_tenant *tn = &gw->policy->tenants[id];
	const struct fg_tier *tier = &gw->policy->tiers[tn->tier];
	double depth = tn->burst_s * tn->units_per_s;

	if (keep)
		fg_bucket_reshape(&gw->t[id].bucket, tn->units_per_s, depth, now_ns);
	else
		fg_bucket_init(&gw->t[id].bucket, tn->units_per_s, depth, now_ns);
	fg_fq_set_weight(&gw->fq, id, tier->weight > 0 ? tier->weight : 1);
	fg_kv_set_cap(&gw->kv, id, gw->kv_caps ? tier->kv_cap_tokens : 0);
}

/* The reservation follows the policy and the gateway's step model; the KV
 * ledger keeps its holders' memory out of others' reach. */
static void setup_tpot(struct fg_gateway *gw)
{
	const struct fg_policy *p = gw->policy;

	fg_tpot_configure(&gw->tpot, &gw->step_cm, p);
	memset(gw->kv.protect, 0, gw->kv.slots * sizeof(*gw->kv.protect));
	for (uint32_t i = 0; i < gw->n_tenants; i++)
		gw->kv.protect[i] = fg_tpot_is_holder(&gw->tpot, i);
	fg_kv_set_reserve(&gw->kv, gw->tpot.reserve_tokens);
	fg_kv_recount_protected(&gw->kv);
}

static void tenant_state_free(struct fg_gw_tenant_state *s)
{
	free(s->t);
	s->t = NULL;
	fg_idset_free(&s->moved);
	free(s->map);
	s->map = NULL;
	fg_fq_free(&s->fq);
	fg_kv_free(&s->kv);
	fg_peak_free(&s->peaks);
}

/* Per-tenant state for the policy's tenants, all or nothing. */
static int tenant_state_alloc(struct fg_gw_tenant_state *s, const struct fg_policy *p,
			      uint64_t window_ns, uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	s->t = fg_calloc_huge(fg_tenant_slots(p->n_tenants), sizeof(*s->t));
	int bad = !s->t;
	bad |= fg_idset_init(&s->moved, fg_tenant_slots(p->n_tenants)) < 0;
	bad |= fg_fq_init(&s->fq, p->n_tenants) < 0;
	bad |= fg_kv_init(&s->kv, p->replica.kv_pool_tokens, p->agent.kv_headroom, p->n_tenants) < 0;
	bad |= fg_peak_init(&s->peaks, p->n_tenants, window_ns, now_ns) < 0;
	if (bad) {
		tenant_state_free(s);
		return -1;
	}
	return 0;
}

void fg_gw_free(struct fg_gateway *gw)
{
	struct fg_gw_tenant_state s = { .t = gw->t, .moved = gw->moved, .fq = gw->fq, .kv = gw->kv,
					.peaks = gw->peaks };

	tenant_state_free(&s);
	gw->t = NULL;
	memset(&gw->moved, 0, sizeof(gw->moved));
	gw->n_tenants = 0;
	memset(&gw->fq, 0, sizeof(gw->fq));
	memset(&gw->kv, 0, sizeof(gw->kv));
	memset(&gw->peaks, 0, sizeof(gw->peaks));
}

int fg_gw_init(struct fg_gateway *gw, const struct fg_policy *p, uint64_t step_tokens,
	       uint64_t now_ns)
{
	struct fg_gw_tenant_state s;

	memset(gw, 0, sizeof(*gw));
	if (tenant_state_alloc(&s, p, 0, now_ns) < 0)
		return -1;
	gw->t = s.t;
	gw->moved = s.moved;
	gw->fq = s.fq;
	gw->kv = s.kv;
	gw->peaks = s.peaks;
	gw->n_tenants = p->n_tenants;
	gw->policy = p;
	gw->kv_caps = true;
	fg_cost_model_init_policy(&gw->cm, p);
	gw->step_cm = gw->cm;
	/* One engine step, in prefill tokens of the same replica time: the
	 * reference decode step. "Two steps of work" is then ~28 ms on the seed's
	 * replica, shallow enough that FCFS inside the engine cannot undo the
	 * order chosen here, deep enough to keep it busy. */
	if (!step_tokens)
		step_tokens = (uint64_t)ceil(gw->cm.decode_step_s / gw->cm.prompt_token_s);
	fg_ew_init(&gw->ew, p->agent.engine_queue_steps, step_tokens);
	gw->rng = now_ns ^ 0x6a09e667f3bcc909ull;
	for (uint32_t i = 0; i < p->n_tenants; i++)
		setup_tenant(gw, i, now_ns, false);
	setup_tpot(gw);
	return 0;
}

/* Uniform in [0, 1): splitmix64, so the gateway stays pure and repeatable
 * from its init time. */
static double draw01(struct fg_gateway *gw)
{
	uint64_t x = (gw->rng += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (double)(x >> 11) / 9007199254740992.0;
}

/* `prompts` distinct prompts, `sequences` sequences between them (fg_price's) */
static double metered(const struct fg_gateway *gw, double prompt, double cached, double out,
		      double prompts, double sequences)
{
	return fg_metered_units_batch(&gw->cm, gw->policy->agent.metering, prompt, cached, out,
				      prompts, sequences);
}

static void live_link(struct fg_gateway *gw, struct fg_gw_request *r)
{
	r->prev = NULL;
	r->next = gw->live;
	if (gw->live)
		gw->live->prev = r;
	gw->live = r;
}

static void live_unlink(struct fg_gateway *gw, struct fg_gw_request *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else if (gw->live == r)
		gw->live = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
}

static void refuse(struct fg_gw_decision *d, enum fg_gw_outcome o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void refuse(struct fg_gw_decision *d, enum fg_gw_outcome o, const char *fmt, ...)
{
	va_list ap;

	d->outcome = o;
	va_start(ap, fmt);
	vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
	va_end(ap);
}

/* A request's size, estimated (or exact): what every limit is checked on. */
struct sizing {
	struct fg_prompt_est est;
	struct fg_price price;
	uint64_t context_limit;   /* tier max_context, or the engine's smaller max_model_len */
	uint64_t ctx_safe, ctx_max; /* longest prompt + its output cap */
	uint64_t kv_safe, kv_max; /* every sequence's prompt + output */
	int cal_model;
};

static uint64_t tokens_of(double v)
{
	return v > 0 ? (uint64_t)ceil(v) : 0;
}

static void size_request(const struct fg_gateway *gw, uint32_t tenant, const char *model,
			 const struct fg_request_shape *shape, struct sizing *z)
{
	const struct fg_policy *p = gw->policy;
	const struct fg_tier *tier = tier_of(gw, tenant);
	uint32_t n = shape->n ? shape->n : 1, prompts = shape->prompts > 1 ? shape->prompts : 1;

	z->cal_model = fg_cal_model_find(&gw->models, model);
	double cpt = fg_chars_per_token(&gw->t[tenant].cal, z->cal_model,
					p->replica.model.chars_per_token);
	z->est = fg_estimate_prompt(&p->replica.model, cpt, shape);
	uint64_t limit = tier->max_context;
	if (gw->engine_max_model_len && (!limit || gw->engine_max_model_len < limit))
		limit = gw->engine_max_model_len;
	z->context_limit = limit;
	uint64_t longest = tokens_of(z->est.longest_safe);
	uint64_t room = !limit ? UINT64_MAX : limit > longest ? limit - longest : 1;
	z->price = fg_price_request(&gw->cm, p->agent.metering, &z->est, shape,
				    tier->default_max_tokens, room);
	uint64_t out = z->price.per_choice;
	z->ctx_safe = longest + out;
	z->ctx_max = tokens_of(z->est.longest_max) + out;
	z->kv_safe = fg_kv_tokens(tokens_of(z->est.tokens_safe), prompts * out, n);
	z->kv_max = fg_kv_tokens(tokens_of(z->est.tokens_max), prompts * out, n);
	if (z->price.flat)
		z->ctx_safe = z->ctx_max = z->kv_safe = z->kv_max = 0;
}

/* A limit the estimate may be on either side of. */
static bool uncertain(uint64_t safe, uint64_t most, uint64_t limit, bool cut_off_later)
{
	if (!limit || most <= limit)
		return false; /* fits whatever the tokenizer makes of it */
	return !cut_off_later || (double)safe >= (double)limit * (1 - FG_EXACT_MARGIN);
}

/* A cheap screen: even at the most tokens its bytes can make and the
 * largest cap it can take, the request fits every limit and the bucket is
 * above any price it could have: nothing to count. */
static bool maybe_near_a_limit(const struct fg_gateway *gw, uint32_t tenant,
			       const struct fg_request_shape *shape, uint64_t now_ns)
{
	const struct fg_policy *p = gw->policy;
	const struct fg_tier *tier = tier_of(gw, tenant);
	uint32_t n = shape->n ? shape->n : 1;
	uint64_t out = shape->prompt_only ? 0
		       : shape->max_tokens ? shape->max_tokens
		       : tier->default_max_tokens ? tier->default_max_tokens : FG_FALLBACK_MAX_TOKENS;
	uint64_t hi = tokens_of(fg_prompt_bound(&p->replica.model, shape));
	uint64_t ctx = hi + out, kv = fg_kv_tokens(hi, out, n);
	uint64_t limits[] = { tier->max_context, gw->engine_max_model_len,
			      p->agent.long_context_threshold };
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (limits[i] && ctx > limits[i])
			return true;
	if ((gw->kv_caps && gw->kv.cap[tenant] && kv > gw->kv.cap[tenant]) || kv > gw->kv.node_cap)
		return true;
	struct fg_bucket b = gw->t[tenant].bucket;
	double top = metered(gw, (double)hi * (1 + FG_EXACT_MARGIN), 0, (double)n * (double)out, 1, n);
	return fg_bucket_level(&b, now_ns) < top;
}

bool fg_gw_exact_wanted(const struct fg_gateway *gw, uint32_t tenant, const char *model,
			const struct fg_request_shape *shape, bool cut_off_later, uint64_t now_ns)
{
	const struct fg_policy *p = gw->policy;
	struct sizing z;

	if (tenant >= gw->n_tenants || shape->fixed_units > 0 || shape->no_gpu ||
	    shape->exact_prompt_tokens || shape->prompts > 1 || !shape->prompt_chars)
		return false;
	if (!maybe_near_a_limit(gw, tenant, shape, now_ns))
		return false; /* the common small request: no sizing twice */
	size_request(gw, tenant, model, shape, &z);
	uint64_t threshold = p->agent.long_context_threshold;
	if (uncertain(z.ctx_safe, z.ctx_max, z.context_limit, cut_off_later) ||
	    uncertain(z.ctx_safe, z.ctx_max, threshold, cut_off_later))
		return true;
	if (!threshold || z.ctx_safe <= threshold) {
		if ((gw->kv_caps && uncertain(z.kv_safe, z.kv_max, gw->kv.cap[tenant], cut_off_later)) ||
		    uncertain(z.kv_safe, z.kv_max, gw->kv.node_cap, cut_off_later))
			return true;
	}
	/* a bucket that barely covers (or barely misses) the estimated price */
	struct fg_bucket b = gw->t[tenant].bucket;
	double level = fg_bucket_level(&b, now_ns), prompt = z.price.prompt_tokens;
	double lo = metered(gw, prompt * (1 - FG_EXACT_MARGIN), 0, z.price.output_tokens,
			    z.price.prompts, z.price.sequences);
	double hi = metered(gw, prompt * (1 + FG_EXACT_MARGIN), 0, z.price.output_tokens,
			    z.price.prompts, z.price.sequences);
	return level >= lo && level < hi && hi - lo >= 1;
}

struct fg_gw_decision fg_gw_admit(struct fg_gateway *gw, struct fg_gw_request *req,
				  uint32_t tenant, const char *model,
				  const struct fg_request_shape *shape, uint64_t now_ns)
{
	struct fg_gw_decision d = { 0 };
	const struct fg_policy *p = gw->policy;
	struct sizing z;

	memset(req, 0, sizeof(*req));
	if (tenant >= gw->n_tenants) {
		refuse(&d, FG_GW_BUCKET_NEVER, "unknown tenant");
		return d;
	}
	const struct fg_tier *tier = tier_of(gw, tenant);
	struct fg_gw_tenant *t = &gw->t[tenant];
	fg_idset_add(&gw->moved, tenant); /* reserved, or refused: the books move either way */

	size_request(gw, tenant, model, shape, &z);
	req->tenant = tenant;
	req->price = z.price;
	req->n = shape->n ? shape->n : 1;
	req->prompts = shape->prompts > 1 ? shape->prompts : 1;
	req->cal_model = z.cal_model;
	req->prompt_chars = shape->prompt_chars;
	req->prompt_fixed = z.est.fixed;
	req->prompt_exact = z.est.exact;
	uint64_t prompt = tokens_of(z.est.longest_safe), out_per_choice = z.price.per_choice;
	req->context_tokens = z.ctx_safe;
	req->kv_tokens = z.kv_safe;
	req->prefill_tokens = z.price.flat ? 0 : tokens_of(z.est.tokens);
	d.cost = req->price.units;
	if (z.est.exact)
		t->exact_counts++;

	/* Memory limits first: they do not depend on the rate, and a request
	 * refused for its size must not look like "retry later". */
	if (tier->max_context && req->context_tokens > tier->max_context) {
		refuse(&d, FG_GW_CONTEXT_EXCEEDED,
		       "This request needs %s%llu tokens of context (prompt %llu + max output %llu), "
		       "above the %llu-token maximum of tier '%s'.",
		       z.est.exact ? "" : "about ", (unsigned long long)req->context_tokens,
		       (unsigned long long)prompt, (unsigned long long)out_per_choice,
		       (unsigned long long)tier->max_context, tier->name);
		t->never++;
		return d;
	}
	if (gw->engine_max_model_len && req->context_tokens > gw->engine_max_model_len) {
		refuse(&d, FG_GW_CONTEXT_EXCEEDED,
		       "This request needs %s%llu tokens of context (prompt %llu + max output %llu), "
		       "above the engine's maximum context length of %llu tokens.",
		       z.est.exact ? "" : "about ", (unsigned long long)req->context_tokens,
		       (unsigned long long)prompt, (unsigned long long)out_per_choice,
		       (unsigned long long)gw->engine_max_model_len);
		t->never++;
		return d;
	}
	if (p->agent.long_context_threshold && req->context_tokens > p->agent.long_context_threshold) {
		if (!p->agent.long_context_upstream.host[0]) {
			refuse(&d, FG_GW_NO_LONG_POOL,
			       "This request needs %s%llu tokens of context, above the %llu-token "
			       "threshold of this pool, and no long-context pool is configured.",
			       z.est.exact ? "" : "about ", (unsigned long long)req->context_tokens,
			       (unsigned long long)p->agent.long_context_threshold);
			t->never++;
			return d;
		}
		req->long_context = true;
	}
	if (!req->long_context) {
		enum fg_kv_verdict kv = fg_kv_check(&gw->kv, tenant, req->kv_tokens);
		if (kv == FG_KV_NEVER_TENANT || kv == FG_KV_NEVER_NODE) {
			refuse(&d, FG_GW_KV_NEVER,
			       "This request would hold %llu tokens of KV cache (n x (prompt + max output)), "
			       "above %s of %llu tokens.",
			       (unsigned long long)req->kv_tokens,
			       kv == FG_KV_NEVER_TENANT ? "the tier's per-tenant KV cap"
			       : fg_kv_node_cap_for(&gw->kv, tenant) < gw->kv.node_cap
				       ? "the replica's reservable KV pool less what the TPOT tiers keep"
				       : "the replica's reservable KV pool",
			       (unsigned long long)(kv == FG_KV_NEVER_TENANT
							    ? gw->kv.cap[tenant]
							    : fg_kv_node_cap_for(&gw->kv, tenant)));
			t->never++;
			return d;
		}
	}

	struct fg_decision bd = fg_admission_decide(&t->bucket, req->price.units, now_ns);
	if (bd.verdict == FG_NEVER_FITS) {
		refuse(&d, FG_GW_BUCKET_NEVER,
		       "This request is priced at %.0f units, more than the %.0f units the tenant's "
		       "quota can ever hold (%.0f units/s x %.0f s burst). Lower max_tokens or n.",
		       req->price.units, t->bucket.depth, t->bucket.rate,
		       t->bucket.rate > 0 ? t->bucket.depth / t->bucket.rate : 0);
		t->never++;
		return d;
	}
	if (bd.verdict == FG_RETRY_LATER) {
		d.wait_ns = fg_retry_turn_ns(&t->bucket, req->price.units, now_ns, &t->retry_turn_ns,
					     draw01(gw));
		refuse(&d, FG_GW_RETRY_LATER,
		       "Rate limit reached: this request is priced at %.0f units of replica time and the "
		       "tenant's quota refills at %.0f units/s.",
		       req->price.units, t->bucket.rate);
		t->rejected++;
		t->refused_units += req->price.units;
		if (req->price.units > t->refused_peak)
			t->refused_peak = req->price.units;
		return d;
	}

	t->typical_cost = fg_typical_cost_update(t->typical_cost, req->price.units);
	t->reserved_units += req->price.units;
	t->admitted++;
	t->inflight++;
	req->admitted_ns = now_ns;
	live_link(gw, req);
	if (req->long_context) {
		req->state = FG_GW_S_SENT;
		req->sent_ns = now_ns;
		d.outcome = FG_GW_LONG_CONTEXT;
		return d;
	}
	req->item.tenant = tenant;
	req->item.dispatch_units = req->price.flat ? req->price.units
						   : metered(gw, req->price.prompt_tokens, 0, 0, 1, 1);
	req->item.backlog_units = req->price.units;
	req->item.enqueued_ns = now_ns;
	req->item.deadline_ns = tier->max_queue_s > 0
		? now_ns + (uint64_t)(tier->max_queue_s * NS_PER_S) : 0;
	req->state = FG_GW_S_QUEUED;
	fg_fq_push(&gw->fq, &req->item);
	d.outcome = FG_GW_QUEUED;
	return d;
}

struct fg_gw_decision fg_gw_prompt_known(struct fg_gateway *gw, struct fg_gw_request *r,
					 double prompt_tokens, uint64_t now_ns)
{
	struct fg_gw_decision d = { .outcome = FG_GW_QUEUED };
	(void)now_ns;

	if (r->state == FG_GW_S_DONE || r->state == FG_GW_S_NEW || r->orphan || r->prompts > 1 ||
	    !(prompt_tokens > 0) || r->price.flat)
		return d;
	const struct fg_tier *tier = tier_of(gw, r->tenant);
	uint64_t prompt = tokens_of(prompt_tokens), out = r->price.per_choice;
	uint64_t ctx = prompt + out;
	if (tier->max_context && ctx > tier->max_context) {
		refuse(&d, FG_GW_CONTEXT_EXCEEDED,
		       "The prompt is %llu tokens as the engine counts it: with max output %llu, %llu "
		       "tokens of context, above the %llu-token maximum of tier '%s'.",
		       (unsigned long long)prompt, (unsigned long long)out, (unsigned long long)ctx,
		       (unsigned long long)tier->max_context, tier->name);
		gw->t[r->tenant].cut_off++;
		return d;
	}
	r->context_tokens = ctx;
	if (r->long_context || !r->kv_held)
		return d;
	uint64_t kv = fg_kv_tokens(prompt, out, r->n), cap = gw->kv.cap[r->tenant];
	if (kv <= r->kv_tokens) {
		fg_kv_release(&gw->kv, r->tenant, r->kv_tokens - kv);
		r->kv_tokens = kv;
		return d;
	}
	uint64_t more = kv - r->kv_tokens;
	bool alone_over = (cap && kv > cap) || kv > gw->kv.node_cap;
	if (alone_over || fg_kv_reserve(&gw->kv, r->tenant, more) != FG_KV_OK) {
		refuse(&d, FG_GW_KV_NEVER,
		       "The prompt is %llu tokens as the engine counts it: %llu tokens of KV cache "
		       "(n x (prompt + max output)), with the tenant's others above %s of %llu.",
		       (unsigned long long)prompt, (unsigned long long)kv,
		       cap ? "the tier's per-tenant KV cap" : "the replica's reservable KV pool",
		       (unsigned long long)(cap ? cap : gw->kv.node_cap));
		gw->t[r->tenant].cut_off++;
		return d;
	}
	r->kv_tokens = kv;
	return d;
}

void fg_gw_learn(struct fg_gateway *gw, const struct fg_gw_request *r, const char *model,
		 double prompt_tokens)
{
	if (r->orphan || r->tenant >= gw->n_tenants || !r->prompt_chars || r->price.flat ||
	    r->prompts > 1)
		return;
	int m = r->cal_model ? r->cal_model : fg_cal_model_add(&gw->models, model);
	fg_calibration_learn(&gw->t[r->tenant].cal, m, gw->policy->replica.model.chars_per_token,
			     r->prompt_chars, prompt_tokens - r->prompt_fixed);
}

double fg_gw_chars_per_token(const struct fg_gateway *gw, uint32_t tenant, const char *model)
{
	double prior = gw->policy->replica.model.chars_per_token;

	if (tenant >= gw->n_tenants)
		return prior;
	return fg_chars_per_token(&gw->t[tenant].cal, fg_cal_model_find(&gw->models, model), prior);
}

static uint32_t sequences_of(const struct fg_gw_request *r)
{
	return (r->n ? r->n : 1) * (r->prompts ? r->prompts : 1);
}

/* A request that waits for what every tenant shares. Under a TPOT
 * reservation a non-holder's stops the others behind it but not the
 * holders: they have room kept for them. */
static enum fg_fq_verdict hold(struct fg_gateway *gw, const struct fg_gw_request *r)
{
	if (fg_tpot_active(&gw->tpot) && !fg_tpot_is_holder(&gw->tpot, r->tenant)) {
		gw->others_held = true;
		return FG_FQ_SKIP;
	}
	return FG_FQ_HOLD;
}

static enum fg_fq_verdict may_go(const struct fg_fq_item *item, void *ctx)
{
	struct fg_gateway *gw = ctx;
	const struct fg_gw_request *r = (const struct fg_gw_request *)item;

	if (gw->others_held && !fg_tpot_is_holder(&gw->tpot, r->tenant))
		return FG_FQ_SKIP;
	switch (fg_kv_check(&gw->kv, r->tenant, r->kv_tokens)) {
	case FG_KV_OK: {
		struct fg_tpot_batch b = {
			.sequences = gw->tpot.sequences,
			.context_tokens = gw->kv.node_reserved,
			.holders_tokens = gw->kv.protected_reserved,
			.pending_prefill = gw->ew.pending_tokens,
		};
		if (fg_tpot_check(&gw->tpot, &gw->step_cm, r->tenant, sequences_of(r), r->kv_tokens,
				  r->prefill_tokens, &b) == FG_TPOT_GO)
			return FG_FQ_GO;
		/* the batch is at the size its step stays within the target */
		return hold(gw, r);
	}
	case FG_KV_WAIT_NODE:
		/* the pool frees as requests end; what frees is this one's */
		return hold(gw, r);
	default:
		/* its tenant's own cap (or, after a reload shrank a limit, one it
		 * can never fit: it waits out its deadline without stalling others) */
		return FG_FQ_SKIP;
	}
}

struct fg_gw_request *fg_gw_dispatch(struct fg_gateway *gw, uint64_t now_ns)
{
	/* The window is the engine's, so it gates every tenant alike and never
	 * reorders the fair queue: whoever is next goes once there is room. */
	if (!fg_ew_may_dispatch(&gw->ew))
		return NULL;
	gw->others_held = false;
	struct fg_fq_item *it = fg_fq_pop(&gw->fq, may_go, gw);

	if (!it)
		return NULL;
	struct fg_gw_request *r = (struct fg_gw_request *)it;
	fg_kv_reserve(&gw->kv, r->tenant, r->kv_tokens);
	r->kv_held = true;
	fg_tpot_sent(&gw->tpot, sequences_of(r));
	fg_ew_sent(&gw->ew, &r->ew, r->prefill_tokens, r->streams, now_ns);
	r->queue_charged = it->dispatch_units;
	r->state = FG_GW_S_SENT;
	r->sent_ns = now_ns;
	return r;
}

void fg_gw_first_token(struct fg_gateway *gw, struct fg_gw_request *r, uint64_t now_ns)
{
	if (r->state != FG_GW_S_SENT)
		return;
	if (!r->long_context)
		fg_ew_started(&gw->ew, &r->ew);
	r->state = FG_GW_S_STARTED;
	r->first_token_ns = now_ns;
}

void fg_gw_output(struct fg_gateway *gw, struct fg_gw_request *r, double completion_tokens,
		  uint64_t now_ns)
{
	if (r->state == FG_GW_S_SENT)
		fg_gw_first_token(gw, r, now_ns);
	if (r->long_context || r->orphan || completion_tokens <= r->output_charged)
		return;
	/* each new token at the price of the context it decoded against: the
	 * difference of the closed form between what had streamed and now */
	double out = fmin(completion_tokens, r->price.output_tokens);
	double delta = metered(gw, r->price.prompt_tokens, 0, out, r->price.prompts,
			       r->price.sequences) -
		       metered(gw, r->price.prompt_tokens, 0, r->output_charged, r->price.prompts,
			       r->price.sequences);
	r->output_charged = out;
	if (delta > 0) {
		fg_fq_charge(&gw->fq, r->tenant, delta);
		r->queue_charged += delta;
	}
}

/* Common end of a live request: bucket settled against `billed`, the fair
 * queue left charged `fq_units` in all. */
static void end_request(struct fg_gateway *gw, struct fg_gw_request *r, double billed,
			double fq_units, uint64_t now_ns)
{
	if (!r->long_context)
		fg_ew_ended(&gw->ew, &r->ew);
	if (r->state == FG_GW_S_QUEUED)
		fg_fq_remove(&gw->fq, &r->item);
	if (r->kv_held && !r->orphan)
		fg_kv_release(&gw->kv, r->tenant, r->kv_tokens);
	else if (r->kv_held) /* its tenant slot is gone; only the node total */
		gw->kv.node_reserved -= r->kv_tokens < gw->kv.node_reserved ? r->kv_tokens
									   : gw->kv.node_reserved;
	if (r->kv_held)
		fg_tpot_ended(&gw->tpot, sequences_of(r));
	r->kv_held = false;
	if (!r->orphan) {
		struct fg_gw_tenant *t = &gw->t[r->tenant];
		fg_idset_add(&gw->moved, r->tenant);
		fg_bucket_settle(&t->bucket, r->price.units, billed, now_ns);
		t->reserved_units -= r->price.units;
		if (t->reserved_units < 1e-6)
			t->reserved_units = 0;
		t->billed_units += billed;
		if (t->inflight)
			t->inflight--;
		if (!r->long_context) {
			if (r->state != FG_GW_S_QUEUED) {
				fg_fq_charge(&gw->fq, r->tenant, fq_units - r->queue_charged);
				fg_fq_done(&gw->fq, r->tenant);
			}
		}
		if (billed > 0)
			fg_peak_add(&gw->peaks, r->tenant, billed, now_ns);
	}
	r->state = FG_GW_S_DONE;
	live_unlink(gw, r);
}

double fg_gw_finish(struct fg_gateway *gw, struct fg_gw_request *r, const struct fg_usage *u,
		    uint64_t now_ns)
{
	if (r->state == FG_GW_S_DONE || r->state == FG_GW_S_NEW)
		return 0;
	/* the engine's word is trusted up to what the request's bytes can make
	 * (fg_settle_units clamps there): more is an engine fault */
	if (!r->price.flat && r->price.prompt_ceiling > 0 && u->prompt_tokens > r->price.prompt_ceiling &&
	    !r->orphan)
		gw->t[r->tenant].usage_clamped++;
	double billed = fg_settle_units(&gw->cm, gw->policy->agent.metering, &r->price, u);
	if (!r->orphan) {
		struct fg_gw_tenant *t = &gw->t[r->tenant];
		struct fg_usage prompt_only = *u;
		prompt_only.completion_tokens = 0;
		if (u->prompt_tokens > 0)
			t->settled++;
		if (u->completion_tokens > 0) {
			t->billed_output_tokens += fmin(u->completion_tokens, r->price.output_tokens);
			t->billed_output_units += billed - fg_settle_units(&gw->cm, gw->policy->agent.metering,
									   &r->price, &prompt_only);
		}
	}
	/* the fair queue ends up charged exactly what was billed */
	end_request(gw, r, billed, billed, now_ns);
	return billed;
}

/* ns + later, held below 2^64 (the cap fg_retry_turn_ns keeps too) */
static uint64_t ns_later(uint64_t ns, double later)
{
	double at = (double)ns + later;

	return at > 1.8e19 ? (uint64_t)1.8e19 : ns + (uint64_t)later;
}

double fg_gw_tokenizer_ran(struct fg_gateway *gw, uint32_t tenant, uint64_t tokens, uint64_t now_ns,
			   struct fg_gw_decision *refusal)
{
	if (tenant >= gw->n_tenants)
		return 0;
	double units = fg_price_tokenizer(&gw->cm, gw->policy->agent.metering, (double)tokens);
	struct fg_gw_tenant *t = &gw->t[tenant];
	fg_idset_add(&gw->moved, tenant);
	fg_bucket_settle(&t->bucket, 0, units, now_ns);
	t->billed_units += units;
	if (units > 0)
		fg_peak_add(&gw->peaks, tenant, units, now_ns);
	/* the bucket refills linearly below its depth: taking `units` out
	 * moves the moment it holds the refused price by units / rate */
	if (refusal && refusal->outcome == FG_GW_RETRY_LATER && units > 0 && t->bucket.rate > 0) {
		double later = units / t->bucket.rate * 1e9;
		refusal->wait_ns = ns_later(refusal->wait_ns, later);
		if (t->retry_turn_ns > now_ns)
			t->retry_turn_ns = ns_later(t->retry_turn_ns, later);
	}
	return units;
}

void fg_gw_abort(struct fg_gateway *gw, struct fg_gw_request *r, uint64_t now_ns)
{
	if (r->state == FG_GW_S_DONE || r->state == FG_GW_S_NEW)
		return;
	if (!r->orphan)
		gw->t[r->tenant].aborted++;
	/* billed nothing, and the fair queue keeps what it charged so far */
	end_request(gw, r, 0, r->queue_charged, now_ns);
}

struct fg_gw_request *fg_gw_expire(struct fg_gateway *gw, uint64_t now_ns,
				   struct fg_gw_decision *why)
{
	struct fg_gw_request *r = gw->orphans_queued;

	memset(why, 0, sizeof(*why));
	if (r) {
		/* queued when its tenant left the policy: nobody's bucket to settle */
		gw->orphans_queued = (struct fg_gw_request *)r->item.next;
		r->item.next = NULL;
		why->outcome = FG_GW_TENANT_GONE;
		why->cost = r->price.units;
		snprintf(why->reason, sizeof(why->reason),
			 "The tenant was removed from the policy while this request waited.");
		r->state = FG_GW_S_DONE;
		live_unlink(gw, r);
		return r;
	}
	struct fg_fq_item *it = fg_fq_expire(&gw->fq, now_ns);
	if (!it)
		return NULL;
	r = (struct fg_gw_request *)it;
	struct fg_gw_tenant *t = &gw->t[r->tenant];
	const struct fg_tier *tier = tier_of(gw, r->tenant);

	why->outcome = FG_GW_TIMED_OUT;
	why->cost = r->price.units;
	/* Truthful, not precise: the queue is about as long as this wait was. */
	why->wait_ns = fg_retry_spread_ns(now_ns - r->admitted_ns, draw01(gw));
	snprintf(why->reason, sizeof(why->reason),
		 "The replica is busy: this request waited %.1f s in the queue of tier '%s', the "
		 "tier's limit. It was not charged.",
		 (double)(now_ns - r->admitted_ns) / NS_PER_S, tier->name);
	t->timed_out++;
	fg_idset_add(&gw->moved, r->tenant);
	t->reserved_units -= r->price.units;
	if (t->reserved_units < 1e-6)
		t->reserved_units = 0;
	fg_bucket_settle(&t->bucket, r->price.units, 0, now_ns);
	if (t->inflight)
		t->inflight--;
	r->state = FG_GW_S_DONE;
	live_unlink(gw, r);
	return r;
}

uint64_t fg_gw_next_deadline(const struct fg_gateway *gw)
{
	return fg_fq_next_deadline(&gw->fq);
}

double fg_gw_backlog_s(const struct fg_gateway *gw)
{
	/* kept by the fair queue as requests come and go: O(1), not a walk
	 * over every tenant's queue once a second */
	double units = gw->fq.queued_units > 0 ? gw->fq.queued_units : 0;
	double full_speed = gw->policy->replica.ceiling > 0
		? gw->cm.replica_units_per_s / gw->policy->replica.ceiling : gw->cm.replica_units_per_s;
	return full_speed > 0 ? units / full_speed : 0;
}

uint64_t fg_gw_deny_until(struct fg_gateway *gw, uint32_t tenant, uint64_t now_ns)
{
	if (tenant >= gw->n_tenants)
		return 0;
	struct fg_gw_tenant *t = &gw->t[tenant];
	t->deny_until_ns = fg_deny_until_ns(&t->bucket, t->typical_cost, now_ns,
					    t->deny_until_ns > now_ns);
	return t->deny_until_ns;
}

void fg_gw_set_cost_model(struct fg_gateway *gw, const struct fg_cost_model *cm)
{
	gw->cm = *cm;
}

void fg_gw_set_step_model(struct fg_gateway *gw, const struct fg_cost_model *cm)
{
	gw->step_cm = *cm;
	/* (calibration may call this every second): the holders are the
	 * policy's, so only the cap and the reserve move, no walk over tenants */
	if (gw->policy) { /* no policy yet, no TPOT tier to follow it */
		fg_tpot_recost(&gw->tpot, &gw->step_cm);
		fg_kv_set_reserve(&gw->kv, gw->tpot.reserve_tokens);
	}
}

/* Old tenant id -> new id (-1: left the policy), matched by name: a search
 * in the new policy's name order, since a scan per tenant would be 2^32
 * compares at 65,536 tenants. Without the memory for the order, scanned
 * (slow, still right). */
static int32_t *match_tenants(const struct fg_policy *old, uint32_t n_old,
			       const struct fg_policy *p)
{
	int32_t *map = malloc((n_old ? n_old : 1) * sizeof(*map));
	uint32_t *order = fg_policy_name_order(p);

	for (uint32_t i = 0; map && i < n_old; i++) {
		const struct fg_tenant *nt = fg_policy_find_sorted(p, order, old->tenants[i].name);
		map[i] = nt ? (int32_t)nt->id : -1;
	}
	free(order);
	return map;
}

int fg_gw_reload_prepare(const struct fg_gateway *gw, const struct fg_policy *p,
			 struct fg_gw_tenant_state *next)
{
	if (tenant_state_alloc(next, p, gw->peaks.window_ns, gw->peaks.window_start_ns) < 0)
		return -1;
	next->map = match_tenants(gw->policy, gw->n_tenants, p);
	if (!next->map) {
		tenant_state_free(next);
		return -1;
	}
	next->policy = p;
	return 0;
}

void fg_gw_reload_cancel(struct fg_gw_tenant_state *next)
{
	tenant_state_free(next);
}

void fg_gw_reload_commit(struct fg_gateway *gw, struct fg_gw_tenant_state *now, uint64_t now_ns)
{
	const struct fg_policy *p = now->policy;
	struct fg_gw_tenant_state was = { .t = gw->t, .moved = gw->moved, .fq = gw->fq, .kv = gw->kv,
					  .peaks = gw->peaks };
	int32_t *map = now->map;
	uint32_t n_old = gw->n_tenants;

	gw->t = now->t;
	gw->moved = now->moved;
	gw->n_tenants = p->n_tenants;
	gw->fq = now->fq;
	gw->kv = now->kv;
	gw->peaks = now->peaks;
	memset(now, 0, sizeof(*now));

	/* The node-wide books (node KV total, engine window, calibration,
	 * peaks) carry over as they are: the engine did not change. */
	gw->policy = p;
	fg_cost_model_init_policy(&gw->cm, p);
	gw->step_cm = gw->cm;
	gw->ew.steps = p->agent.engine_queue_steps > 0 ? p->agent.engine_queue_steps : 2;
	gw->kv.node_reserved = was.kv.node_reserved;
	gw->peaks.cur_node = was.peaks.cur_node;
	gw->peaks.peak_node = was.peaks.peak_node;
	gw->peaks.windows_closed = was.peaks.windows_closed;
	for (uint32_t i = 0; i < p->n_tenants; i++)
		setup_tenant(gw, i, now_ns, false);

	for (uint32_t i = 0; i < n_old; i++) {
		if (map[i] < 0)
			continue;
		uint32_t n = (uint32_t)map[i];
		struct fg_bucket fresh = gw->t[n].bucket;
		gw->t[n] = was.t[i];
		fg_bucket_reshape(&gw->t[n].bucket, fresh.rate, fresh.depth, now_ns);
		gw->fq.t[n].vtc = was.fq.t[i].vtc;
		gw->fq.t[n].served_units = was.fq.t[i].served_units;
		gw->fq.t[n].in_service = was.fq.t[i].in_service;
		gw->kv.reserved[n] = was.kv.reserved[i];
		gw->peaks.peak[n] = was.peaks.peak[i];
		gw->peaks.sum_peaks += was.peaks.peak[i];
		if (was.peaks.cur[i] > 0)
			fg_peak_add(&gw->peaks, n, was.peaks.cur[i], gw->peaks.window_start_ns);
	}
	/* fg_peak_add counted those in the node's window a second time */
	gw->peaks.cur_node = was.peaks.cur_node;
	for (struct fg_gw_request *r = gw->live; r; r = r->next) {
		if (r->orphan)
			continue;
		if (map[r->tenant] < 0)
			r->orphan = true;
		else
			r->item.tenant = r->tenant = (uint32_t)map[r->tenant];
	}
	/* Move waiting requests queue by queue, so each keeps its FIFO order;
	 * only tenants with a queue are visited (the ready heap holds them). */
	for (uint32_t k = 0; k < was.fq.n_ready; k++) {
		struct fg_fq_item *it = was.fq.t[was.fq.ready[k]].head, *next;
		for (; it; it = next) {
			next = it->next;
			struct fg_gw_request *r = (struct fg_gw_request *)it;
			if (r->orphan) {
				it->next = (struct fg_fq_item *)gw->orphans_queued;
				gw->orphans_queued = r;
			} else {
				fg_fq_push(&gw->fq, it);
			}
		}
	}
	fg_fq_resync(&gw->fq);
	setup_tpot(gw);
	was.map = map;
	tenant_state_free(&was);
}

int fg_gw_reload(struct fg_gateway *gw, const struct fg_policy *p, uint64_t now_ns)
{
	struct fg_gw_tenant_state next;

	if (fg_gw_reload_prepare(gw, p, &next) < 0)
		return -1;
	fg_gw_reload_commit(gw, &next, now_ns);
	return 0;
}

const char *fg_gw_outcome_name(enum fg_gw_outcome o)
{
	switch (o) {
	case FG_GW_QUEUED: return "queued";
	case FG_GW_LONG_CONTEXT: return "long_context";
	case FG_GW_RETRY_LATER: return "retry_later";
	case FG_GW_BUCKET_NEVER: return "bucket_never";
	case FG_GW_CONTEXT_EXCEEDED: return "context_exceeded";
	case FG_GW_KV_NEVER: return "kv_never";
	case FG_GW_NO_LONG_POOL: return "no_long_pool";
	case FG_GW_TIMED_OUT: return "timed_out";
	case FG_GW_TENANT_GONE: return "tenant_gone";
	}
	return "?";
}
