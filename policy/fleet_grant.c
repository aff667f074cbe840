/* fleet_grant.c — a node's side of the fleet bucket; see fleet_grant.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fleet_grant.h"

#define NS_PER_S 1e9

static double secs(uint64_t a_ns, uint64_t b_ns)
{
	return a_ns > b_ns ? (double)(a_ns - b_ns) / NS_PER_S : 0;
}

static double nonneg(double v)
{
	return isfinite(v) && v > 0 ? v : 0;
}

static double sliver(const struct fg_fleet_params *p)
{
	return FG_FLEET_MIN_SHARE * p->rate;
}

const char *fg_fleet_mode_name(enum fg_fleet_mode m)
{
	switch (m) {
	case FG_FLEET_UNHEARD: return "unheard";
	case FG_FLEET_LEASE: return "lease";
	case FG_FLEET_FALLBACK: return "fallback";
	case FG_FLEET_FLOOR: return "floor";
	}
	return "?";
}

void fg_fleet_tenant_init(struct fg_fleet_tenant *ft, struct fg_bucket *b,
			  const struct fg_fleet_books *books, uint64_t now_ns)
{
	memset(ft, 0, sizeof(*ft));
	ft->level_mark = fg_bucket_level(b, now_ns);
	ft->consumed_mark = ft->call_consumed = ft->sample_consumed = books->consumed;
	ft->call_refused = ft->sample_refused = ft->refused_mark = books->refused;
	ft->billed_mark = books->billed;
	ft->sample_ns = now_ns;
}

enum fg_fleet_mode fg_fleet_mode_at(const struct fg_fleet_tenant *ft,
				    const struct fg_fleet_params *p, uint64_t now_ns)
{
	if (!ft->last_ok_ns)
		return FG_FLEET_UNHEARD;
	double age = secs(now_ns, ft->last_ok_ns);
	if (age < 2 * p->period_s)
		return FG_FLEET_LEASE;
	if (ft->idle_declared || age >= p->node_timeout_s)
		return FG_FLEET_FLOOR;
	return FG_FLEET_FALLBACK;
}

double fg_fleet_rate(const struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
		     uint64_t now_ns)
{
	double r;

	switch (fg_fleet_mode_at(ft, p, now_ns)) {
	case FG_FLEET_LEASE:
		r = ft->rate;
		break;
	case FG_FLEET_FALLBACK:
		r = fmax(p->floor, p->rate / (ft->live_nodes ? ft->live_nodes : 1));
		break;
	default:
		r = p->floor;
		break;
	}
	return fmax(nonneg(r), sliver(p));
}

double fg_fleet_idle_hold(const struct fg_fleet_params *p, double typical_cost)
{
	double h = typical_cost > 0 ? 2 * typical_cost : FG_FLEET_IDLE_HOLD_S * p->rate;
	return fmin(h, p->depth);
}

double fg_fleet_hold_cap(const struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
			 double rate, double typical_cost)
{
	double h = rate * (p->period_s + p->buffer_s);

	h = fmax(h, fg_fleet_idle_hold(p, typical_cost));
	h = fmax(h, fmax(ft->refused_peak, ft->refused_peak_prev));
	return fmin(h, p->depth);
}

/* demand: what was used and what was refused, per second, averaged over
 * about a period (sampled at most every quarter period) */
static void sample_demand(struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
			  const struct fg_fleet_books *books, uint64_t now_ns)
{
	double dt = secs(now_ns, ft->sample_ns);
	if (dt < p->period_s / 4)
		return;
	double sample = (books->consumed - ft->sample_consumed +
			 nonneg(books->refused - ft->sample_refused)) / dt;
	double a = 1 - exp(-dt / p->period_s);
	ft->demand = nonneg(ft->demand + a * (nonneg(sample) - ft->demand));
	ft->sample_ns = now_ns;
	ft->sample_consumed = books->consumed;
	ft->sample_refused = books->refused;
}

void fg_fleet_observe(struct fg_fleet_tenant *ft, struct fg_bucket *b,
		      const struct fg_fleet_params *p, const struct fg_fleet_books *books,
		      uint64_t now_ns)
{
	double level = fg_bucket_level(b, now_ns);
	/* the level moves only by refill, requests (reserve, settle, refund:
	 * all in `consumed`) and grants (apply moves the mark with them), so
	 * what is left is refill; a reload that cut the level is not */
	double refill = level - ft->level_mark + (books->consumed - ft->consumed_mark);

	if (refill > 1e-9) {
		ft->refill_unreported += refill;
		/* at the rate last set: a lease's, or one the node chose itself */
		if (ft->shaped != FG_FLEET_LEASE)
			ft->self_granted += refill;
	}
	ft->level_mark = level;
	ft->consumed_mark = books->consumed;
	ft->refused_mark = books->refused;
	ft->backlog = nonneg(books->refused - ft->call_refused);
	if (books->billed > ft->billed_mark) {
		ft->usage_unreported += books->billed - ft->billed_mark;
		ft->billed_mark = books->billed;
	}
	if (books->refused_peak > ft->refused_peak)
		ft->refused_peak = books->refused_peak;
	sample_demand(ft, p, books, now_ns);
}

void fg_fleet_idle_until(struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
			 uint64_t t_ns)
{
	/* the books as the last sample saw them: a sample of nothing */
	struct fg_fleet_books same = { .consumed = ft->sample_consumed, .refused = ft->sample_refused };

	sample_demand(ft, p, &same, t_ns);
}

bool fg_fleet_quiet(const struct fg_fleet_tenant *ft, struct fg_bucket *b,
		    const struct fg_fleet_params *p, const struct fg_fleet_books *books,
		    uint64_t now_ns)
{
	if (ft->in_flight || ft->retry || !ft->last_call_ns || !ft->idle_declared)
		return false;
	/* the floor, once idle was declared, is for ever (age only grows) */
	if (fg_fleet_mode_at(ft, p, now_ns) != FG_FLEET_FLOOR || ft->shaped != FG_FLEET_FLOOR)
		return false;
	/* nothing since the last call and nothing seen by observe unreported */
	if (books->consumed != ft->call_consumed || books->consumed != ft->consumed_mark ||
	    books->refused != ft->call_refused || books->refused != ft->refused_mark ||
	    books->billed != ft->billed_mark || books->refused_peak > 0 || ft->refused_peak > 0 ||
	    ft->refill_unreported > 1e-6 || ft->usage_unreported > 0)
		return false;
	/* full to where refill stops: no refill to account from here */
	double top = b->cap > 0 && b->cap < b->depth ? b->cap : b->depth;
	return fg_bucket_level(b, now_ns) >= top && ft->level_mark == fg_bucket_level(b, now_ns);
}

void fg_fleet_shape(struct fg_fleet_tenant *ft, struct fg_bucket *b,
		    const struct fg_fleet_params *p, double typical_cost, uint64_t now_ns)
{
	double rate = fg_fleet_rate(ft, p, now_ns);

	ft->shaped = fg_fleet_mode_at(ft, p, now_ns);
	/* refill up to now at the old rate first (observe did), then the new */
	fg_bucket_reshape(b, rate, p->depth, now_ns);
	b->cap = fg_fleet_hold_cap(ft, p, rate, typical_cost);
	ft->level_mark = fg_bucket_level(b, now_ns);
}

double fg_fleet_want(const struct fg_fleet_tenant *ft, struct fg_bucket *b,
		     const struct fg_fleet_params *p, double typical_cost, uint64_t now_ns)
{
	double target = ft->demand * (p->period_s + p->buffer_s);

	target = fmax(target, fg_fleet_idle_hold(p, typical_cost));
	target += fmax(ft->backlog, fmax(ft->refused_peak, ft->refused_peak_prev));
	double want = target - fg_bucket_level(b, now_ns) - b->rate * p->period_s;
	return fmin(nonneg(want), p->depth);
}

bool fg_fleet_due(const struct fg_fleet_tenant *ft, struct fg_bucket *b,
		  const struct fg_fleet_params *p, double typical_cost, uint64_t now_ns)
{
	double T = p->period_s;

	if (ft->in_flight)
		return false;
	if (!ft->last_call_ns)
		return true;
	double since = secs(now_ns, ft->last_call_ns);
	if (ft->retry)
		return since >= FG_FLEET_RETRY_GAP * T;
	bool used = ft->consumed_mark != ft->call_consumed;
	bool refused = ft->refused_mark != ft->call_refused || ft->refused_peak > 0;
	bool active = used || refused || ft->refill_unreported > 1e-6;
	if (!active)
		/* idle: say so once; after that nothing to report until it is used */
		return !ft->idle_declared && since >= T;
	if (since >= T)
		return true;
	/* refusals get an early call only while the fleet had units left to
	 * grant: a node of a drained fleet learns nothing sooner than T */
	if (refused && ft->last.fleet_avail > 0 && since >= FG_FLEET_BURST_GAP * T)
		return true;
	if (since < FG_FLEET_MIN_GAP * T)
		return false;
	double cap = b->cap > 0 ? b->cap : fg_fleet_hold_cap(ft, p, b->rate, typical_cost);
	return fg_bucket_level(b, now_ns) < FG_FLEET_EARLY_LEVEL * cap;
}

double fg_fleet_ttl_s(const struct fg_fleet_params *p)
{
	double refill_s = p->rate > 0 ? p->depth / p->rate : 0;
	return 2 * refill_s + p->node_timeout_s;
}

const struct fg_fleet_call *fg_fleet_prepare(struct fg_fleet_tenant *ft, struct fg_bucket *b,
					     const struct fg_fleet_params *p,
					     const struct fg_fleet_books *books, uint64_t now_ns)
{
	struct fg_fleet_call *c = &ft->call;

	ft->in_flight = true;
	ft->last_call_ns = now_ns;
	if (ft->retry)
		return c; /* the same seq, the same figures: the store answers it once */
	bool used = books->consumed != ft->call_consumed;
	bool refused = books->refused != ft->call_refused || ft->refused_peak > 0;

	memset(c, 0, sizeof(*c));
	c->seq = ft->seq + 1;
	/* after ttl_s unheard the store has forgotten the tenant: a missing
	 * bucket then is not a loss */
	if (ft->last_ok_ns && secs(now_ns, ft->last_ok_ns) < fg_fleet_ttl_s(p))
		memcpy(c->epoch, ft->epoch, sizeof(c->epoch));
	c->demand = ft->demand;
	c->rate_now = b->rate;
	c->refill = ft->refill_unreported;
	c->usage = ft->usage_unreported;
	c->want = fg_fleet_want(ft, b, p, books->typical_cost, now_ns);
	c->has = fg_bucket_level(b, now_ns);
	c->idle = !used && !refused && ft->refill_unreported <= 1e-6;
	c->ttl_s = fg_fleet_ttl_s(p);
	c->sent_ns = now_ns;
	ft->call_consumed = books->consumed;
	ft->call_refused = books->refused;
	ft->backlog = 0;
	ft->refused_peak_prev = ft->refused_peak;
	ft->refused_peak = 0;
	return c;
}

void fg_fleet_apply(struct fg_fleet_tenant *ft, struct fg_bucket *b,
		    const struct fg_fleet_params *p, const struct fg_fleet_books *books,
		    const struct fg_fleet_answer *a, uint64_t now_ns)
{
	const struct fg_fleet_call *c = &ft->call;

	fg_fleet_observe(ft, b, p, books, now_ns);
	ft->in_flight = false;
	ft->retry = false;
	ft->seq = c->seq;
	if (strncmp(c->epoch, a->epoch, sizeof(c->epoch))) {
		/* a bucket this node had not seen (new, or the store lost the old
		 * one): what it refilled and billed before belongs to no bucket
		 * that still exists, and charging it to the new one would bill
		 * an outage twice */
		ft->refill_unreported = 0;
		ft->usage_unreported = 0;
	} else {
		ft->refill_unreported = nonneg(ft->refill_unreported - c->refill);
		ft->usage_unreported = nonneg(ft->usage_unreported - c->usage);
	}
	if (strncmp(ft->epoch, a->epoch, sizeof(ft->epoch))) {
		if (ft->epoch[0])
			ft->epoch_changes++;
		snprintf(ft->epoch, sizeof(ft->epoch), "%s", a->epoch);
	}
	ft->rate = nonneg(a->rate);
	ft->live_nodes = a->live_nodes ? a->live_nodes : 1;
	ft->last_ok_ns = now_ns;
	ft->idle_declared = c->idle;
	ft->last = *a;
	ft->calls_ok++;
	ft->replays += a->replayed;
	ft->last_rtt_s = secs(now_ns, c->sent_ns);

	double units = nonneg(a->units);
	if (units > 0) {
		double before = fg_bucket_level(b, now_ns);
		fg_bucket_settle(b, units, 0, now_ns); /* + units, up to the depth */
		ft->units_granted += fg_bucket_level(b, now_ns) - before;
	}
	fg_fleet_shape(ft, b, p, books->typical_cost, now_ns);
}

void fg_fleet_failed(struct fg_fleet_tenant *ft, uint64_t now_ns)
{
	(void)now_ns;
	ft->in_flight = false;
	ft->retry = true;
	ft->calls_failed++;
}

double fg_fleet_bound_units(const struct fg_fleet_params *p, uint32_t nodes, double window_s,
			    double excess)
{
	return p->depth + p->rate * window_s + nodes * (nonneg(excess) + sliver(p) * window_s);
}

double fg_fleet_outage_bound_units(const struct fg_fleet_params *p, uint32_t nodes,
				   double window_s, double held, double excess)
{
	double per_s = fmax(p->rate, nodes * p->floor) + nodes * sliver(p);

	return nonneg(held) + per_s * window_s + nodes * nonneg(excess);
}
