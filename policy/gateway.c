/* gateway.c — a request's life at the gateway; see gateway.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gateway.h"

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

void fg_gw_init(struct fg_gateway *gw, const struct fg_policy *p, uint64_t step_tokens,
		uint64_t now_ns)
{
	memset(gw, 0, sizeof(*gw));
	gw->policy = p;
	gw->kv_caps = true;
	fg_cost_model_init_policy(&gw->cm, p);
	fg_fq_init(&gw->fq, p->n_tenants);
	fg_kv_init(&gw->kv, p->replica.kv_pool_tokens, p->agent.kv_headroom);
	/* One engine step, in prefill tokens of the same replica time: the
	 * reference decode step. "Two steps of work" is then ~28 ms on the seed's
	 * replica, shallow enough that FCFS inside the engine cannot undo the
	 * order chosen here, deep enough to keep it busy. */
	if (!step_tokens)
		step_tokens = (uint64_t)ceil(gw->cm.decode_step_s / gw->cm.prompt_token_s);
	fg_ew_init(&gw->ew, p->agent.engine_queue_steps, step_tokens);
	fg_peak_init(&gw->peaks, p->n_tenants, 0, now_ns);
	fg_calibration_init(&gw->cal);
	for (uint32_t i = 0; i < p->n_tenants; i++)
		setup_tenant(gw, i, now_ns, false);
}

static double metered(const struct fg_gateway *gw, double prompt, double cached, double out,
		      double n)
{
	return fg_metered_units_n(&gw->cm, gw->policy->agent.metering, prompt, cached, out, n);
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

struct fg_gw_decision fg_gw_admit(struct fg_gateway *gw, struct fg_gw_request *req,
				  uint32_t tenant, const char *model,
				  const struct fg_request_shape *shape, uint64_t now_ns)
{
	struct fg_gw_decision d = { 0 };
	const struct fg_policy *p = gw->policy;

	memset(req, 0, sizeof(*req));
	if (tenant >= p->n_tenants) {
		refuse(&d, FG_GW_BUCKET_NEVER, "unknown tenant");
		return d;
	}
	const struct fg_tier *tier = tier_of(gw, tenant);
	struct fg_gw_tenant *t = &gw->t[tenant];

	req->tenant = tenant;
	req->price = fg_price_request(&gw->cm, p->agent.metering, &gw->cal, model, shape,
				      tier->default_max_tokens);
	uint32_t n = shape->n ? shape->n : 1;
	uint64_t prompt = (uint64_t)req->price.prompt_tokens;
	uint64_t out_per_choice = (uint64_t)(req->price.output_tokens / n);
	req->context_tokens = prompt + out_per_choice;
	req->kv_tokens = fg_kv_tokens(prompt, out_per_choice, n);
	req->prefill_tokens = prompt;
	d.cost = req->price.units;

	/* Memory limits first: they do not depend on the rate, and a request
	 * refused for its size must not look like "retry later". */
	if (tier->max_context && req->context_tokens > tier->max_context) {
		refuse(&d, FG_GW_CONTEXT_EXCEEDED,
		       "This request needs about %llu tokens of context (prompt %llu + max output %llu), "
		       "above the %llu-token maximum of tier '%s'.",
		       (unsigned long long)req->context_tokens, (unsigned long long)prompt,
		       (unsigned long long)out_per_choice, (unsigned long long)tier->max_context,
		       tier->name);
		t->never++;
		return d;
	}
	if (p->agent.long_context_threshold && req->context_tokens > p->agent.long_context_threshold) {
		if (!p->agent.long_context_upstream.host[0]) {
			refuse(&d, FG_GW_NO_LONG_POOL,
			       "This request needs about %llu tokens of context, above the %llu-token "
			       "threshold of this pool, and no long-context pool is configured.",
			       (unsigned long long)req->context_tokens,
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
							: "the replica's reservable KV pool",
			       (unsigned long long)(kv == FG_KV_NEVER_TENANT ? gw->kv.cap[tenant]
									      : gw->kv.node_cap));
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
		d.wait_ns = bd.wait_ns;
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
	req->item.dispatch_units = metered(gw, req->price.prompt_tokens, 0, 0, 1);
	req->item.enqueued_ns = now_ns;
	req->item.deadline_ns = tier->max_queue_s > 0
		? now_ns + (uint64_t)(tier->max_queue_s * NS_PER_S) : 0;
	req->state = FG_GW_S_QUEUED;
	fg_fq_push(&gw->fq, &req->item);
	d.outcome = FG_GW_QUEUED;
	return d;
}

static bool may_go(const struct fg_fq_item *item, void *ctx)
{
	struct fg_gateway *gw = ctx;
	const struct fg_gw_request *r = (const struct fg_gw_request *)item;

	return fg_ew_may_dispatch(&gw->ew, r->prefill_tokens) &&
	       fg_kv_check(&gw->kv, r->tenant, r->kv_tokens) == FG_KV_OK;
}

struct fg_gw_request *fg_gw_dispatch(struct fg_gateway *gw, uint64_t now_ns)
{
	struct fg_fq_item *it = fg_fq_pop(&gw->fq, may_go, gw);

	if (!it)
		return NULL;
	struct fg_gw_request *r = (struct fg_gw_request *)it;
	fg_kv_reserve(&gw->kv, r->tenant, r->kv_tokens);
	r->kv_held = true;
	fg_ew_sent(&gw->ew, r->prefill_tokens);
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
		fg_ew_started(&gw->ew, r->prefill_tokens);
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
	double delta = metered(gw, r->price.prompt_tokens, 0, out, r->price.choices) -
		       metered(gw, r->price.prompt_tokens, 0, r->output_charged, r->price.choices);
	r->output_charged = out;
	if (delta > 0) {
		fg_fq_charge(&gw->fq, r->tenant, delta);
		r->queue_charged += delta;
	}
}

/* Common end of a live request: bucket settled against `billed`. */
static void end_request(struct fg_gateway *gw, struct fg_gw_request *r, double billed,
			uint64_t now_ns)
{
	if (r->state == FG_GW_S_SENT && !r->long_context)
		fg_ew_started(&gw->ew, r->prefill_tokens); /* never saw a first token */
	if (r->state == FG_GW_S_QUEUED)
		fg_fq_remove(&gw->fq, &r->item);
	if (r->kv_held && !r->orphan)
		fg_kv_release(&gw->kv, r->tenant, r->kv_tokens);
	else if (r->kv_held) /* its tenant slot is gone; only the node total */
		gw->kv.node_reserved -= r->kv_tokens < gw->kv.node_reserved ? r->kv_tokens
									   : gw->kv.node_reserved;
	r->kv_held = false;
	if (!r->orphan) {
		struct fg_gw_tenant *t = &gw->t[r->tenant];
		fg_bucket_settle(&t->bucket, r->price.units, billed, now_ns);
		t->reserved_units -= r->price.units;
		if (t->reserved_units < 1e-6)
			t->reserved_units = 0;
		t->billed_units += billed;
		if (t->inflight)
			t->inflight--;
		if (!r->long_context) {
			/* the fair queue ends up charged exactly what was billed */
			if (r->state != FG_GW_S_QUEUED) {
				fg_fq_charge(&gw->fq, r->tenant, billed - r->queue_charged);
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
	struct fg_usage billable = *u;
	/* The engine's word is trusted up to what the request could have been:
	 * a prompt longer than the tier's max_context was refused before it
	 * was sent, so a larger count is an engine fault, not the tenant's. */
	uint64_t max_ctx = r->orphan ? 0 : tier_of(gw, r->tenant)->max_context;
	if (max_ctx && billable.prompt_tokens > (double)max_ctx) {
		billable.prompt_tokens = (double)max_ctx;
		if (billable.cached_tokens > billable.prompt_tokens)
			billable.cached_tokens = billable.prompt_tokens;
		gw->t[r->tenant].usage_clamped++;
	}
	double billed = fg_settle_units(&gw->cm, gw->policy->agent.metering, &r->price, &billable);
	if (!r->orphan) {
		struct fg_gw_tenant *t = &gw->t[r->tenant];
		struct fg_usage prompt_only = billable;
		prompt_only.completion_tokens = 0;
		if (u->prompt_tokens > 0)
			t->settled++;
		if (billable.completion_tokens > 0) {
			t->billed_output_tokens += fmin(billable.completion_tokens, r->price.output_tokens);
			t->billed_output_units += billed - fg_settle_units(&gw->cm, gw->policy->agent.metering,
									   &r->price, &prompt_only);
		}
	}
	end_request(gw, r, billed, now_ns);
	return billed;
}

void fg_gw_abort(struct fg_gateway *gw, struct fg_gw_request *r, uint64_t now_ns)
{
	if (r->state == FG_GW_S_DONE || r->state == FG_GW_S_NEW)
		return;
	if (!r->orphan)
		gw->t[r->tenant].aborted++;
	end_request(gw, r, 0, now_ns);
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
	why->wait_ns = now_ns - r->admitted_ns;
	snprintf(why->reason, sizeof(why->reason),
		 "The replica is busy: this request waited %.1f s in the queue of tier '%s', the "
		 "tier's limit. It was not charged.",
		 (double)(now_ns - r->admitted_ns) / NS_PER_S, tier->name);
	t->timed_out++;
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
	uint64_t best = 0;

	for (uint32_t i = 0; i < gw->fq.n_tenants; i++) {
		const struct fg_fq_item *h = gw->fq.t[i].head;
		if (h && h->deadline_ns && (!best || h->deadline_ns < best))
			best = h->deadline_ns;
	}
	return best;
}

double fg_gw_backlog_s(const struct fg_gateway *gw)
{
	double units = 0;

	for (uint32_t i = 0; i < gw->fq.n_tenants; i++)
		for (const struct fg_fq_item *it = gw->fq.t[i].head; it; it = it->next)
			units += ((const struct fg_gw_request *)it)->price.units;
	double full_speed = gw->policy->replica.ceiling > 0
		? gw->cm.replica_units_per_s / gw->policy->replica.ceiling : gw->cm.replica_units_per_s;
	return full_speed > 0 ? units / full_speed : 0;
}

uint64_t fg_gw_deny_until(struct fg_gateway *gw, uint32_t tenant, uint64_t now_ns)
{
	if (tenant >= gw->policy->n_tenants)
		return 0;
	struct fg_gw_tenant *t = &gw->t[tenant];
	t->deny_until_ns = fg_deny_until_ns(&t->bucket, t->typical_cost, now_ns,
					    t->deny_until_ns > now_ns);
	return t->deny_until_ns;
}

void fg_gw_reload(struct fg_gateway *gw, const struct fg_policy *p, uint64_t now_ns)
{
	const struct fg_policy *old = gw->policy;
	static int32_t map[FG_MAX_TENANTS];
	static struct fg_gw_tenant saved[FG_MAX_TENANTS];
	static uint64_t kv_saved[FG_MAX_TENANTS];
	static struct fg_fq old_fq;

	for (uint32_t i = 0; i < old->n_tenants; i++) {
		const struct fg_tenant *nt = fg_policy_tenant_by_name(p, old->tenants[i].name);
		map[i] = nt ? (int32_t)nt->id : -1;
	}
	memcpy(saved, gw->t, sizeof(saved));
	memcpy(kv_saved, gw->kv.reserved, sizeof(kv_saved));
	old_fq = gw->fq;

	/* The node-wide books (node KV total, engine window, calibration,
	 * peaks) carry over as they are: the engine did not change. */
	gw->policy = p;
	fg_cost_model_init_policy(&gw->cm, p);
	gw->ew.steps = p->agent.engine_queue_steps > 0 ? p->agent.engine_queue_steps : 2;
	double headroom = p->agent.kv_headroom > 0 && p->agent.kv_headroom <= 1 ? p->agent.kv_headroom : 1;
	gw->kv.node_cap = (uint64_t)((double)p->replica.kv_pool_tokens * headroom);
	memset(gw->kv.reserved, 0, sizeof(gw->kv.reserved));
	memset(gw->kv.cap, 0, sizeof(gw->kv.cap));
	memset(gw->t, 0, sizeof(gw->t));
	fg_fq_init(&gw->fq, p->n_tenants);
	for (uint32_t i = 0; i < p->n_tenants; i++)
		setup_tenant(gw, i, now_ns, false);

	for (uint32_t i = 0; i < old->n_tenants; i++) {
		if (map[i] < 0)
			continue;
		uint32_t n = (uint32_t)map[i];
		struct fg_bucket fresh = gw->t[n].bucket;
		gw->t[n] = saved[i];
		fg_bucket_reshape(&gw->t[n].bucket, fresh.rate, fresh.depth, now_ns);
		gw->fq.t[n].vtc = old_fq.t[i].vtc;
		gw->fq.t[n].served_units = old_fq.t[i].served_units;
		gw->fq.t[n].in_service = old_fq.t[i].in_service;
		gw->kv.reserved[n] = kv_saved[i];
	}
	for (struct fg_gw_request *r = gw->live; r; r = r->next) {
		if (r->orphan)
			continue;
		if (map[r->tenant] < 0)
			r->orphan = true;
		else
			r->item.tenant = r->tenant = (uint32_t)map[r->tenant];
	}
	/* Move waiting requests queue by queue, so each keeps its FIFO order. */
	for (uint32_t i = 0; i < old_fq.n_tenants; i++) {
		struct fg_fq_item *it = old_fq.t[i].head, *next;
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
	for (uint32_t i = 0; i < p->n_tenants; i++)
		gw->fq.t[i].active = gw->fq.t[i].queued || gw->fq.t[i].in_service;
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
