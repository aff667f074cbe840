/* proxy_sched.c — the gateway's clock inside fairgated.
 *
 * policy/gateway.c decides (admission, fair queue, KV ledger, engine
 * window); this file calls it at the right moments on the agent's loop:
 *
 *   pump      `while ((r = fg_gw_dispatch(gw, now))) send it`, run from a
 *             zero-delay timer after anything that can free room: an
 *             admission, a first token, the end of a request, a reload, an
 *             engine metrics update, the 1 s tick. Deferring keeps it out of
 *             the client and upstream code that asked for it (a failed
 *             dispatch answers and may free a client). It also batches:
 *             the engine gets the batch's requests in one burst, which
 *             measured ~1.5% more req/s than sending each as it is admitted
 *             (fewer cross-CPU wakeups of an engine that went idle).
 *   expiry    a timer at fg_gw_next_deadline: requests past their tier's
 *             max_queue_s get 429 + Retry-After (refunded in full), requests
 *             of a tenant removed by a reload get 403.
 *   first     streams report their first token with the first SSE event; a
 *   token     non-streaming answer gives no signal until it is complete, so
 *             the window waits for the engine's own counts to show it
 *             started (policy/engine_window.h): while any such request is
 *             unconfirmed, or the engine holds waiting requests the window
 *             did not send, its /metrics is read every SCRAPE_FAST_NS.
 *             Nothing is timed on the engine's behalf, so the window is right
 *             whatever the engine's pace (a simulator at --speedup 10 too).
 *   tick      1 s: close peak-meter windows, publish the overload level to
 *             the kernel (gate sheds new connections of the lowest tiers
 *             while the backlog exceeds what they may wait), forget engine
 *             metrics that went stale, and when nothing is at the engine
 *             after requests ran, give the heap's freed pages back (an
 *             idle connection then costs its struct, not a burst's peak).
 *   scrape    the engine's /metrics (agent/http/engine_scrape.c), every second
 *             or every SCRAPE_FAST_NS as above: running and waiting requests
 *             into the engine window, preemptions into a counter and a log
 *             line (recompute is the platform's cost).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/http/engine_scrape.h"
#include "agent/http/http_errors.h"
#include "agent/kernel/kernel.h"
#include "agent/proxy/proxy_internal.h"
#include "policy/overload.h"

#define TICK_NS 1000000000ull
#define SCRAPE_PERIOD_NS 1000000000ull
/* While the window waits for the engine's counts. A non-streamed request is
 * started one scrape after the engine schedules it, so this is the delay it
 * adds; 20 ms lets a window of 792 prefill tokens turn over faster than the
 * seed's replica prefills them (~28 ms), for a 13 KB page read 50 times a
 * second. */
#define SCRAPE_FAST_NS 20000000ull
#define ENGINE_METRICS_STALE_NS 3500000000ull
/* Less than this free in the heap is not worth walking it for: about 200
 * small requests' exchanges. */
#define HEAP_GIVE_BACK_MIN (1u << 20)

static void arm_expiry(struct fg_proxy *px, uint64_t now);

/* ---- dispatch pump --------------------------------------------------------- */

static void pump(struct fg_loop *loop, void *ctx)
{
	struct fg_proxy *px = ctx;
	uint64_t now = fg_now_ns();
	struct fg_gw_request *r;
	(void)loop;

	px->pump_timer = 0;
	px->pump_loop = NULL;
	while ((r = fg_gw_dispatch(px->gw, now))) {
		struct fg_client *c = r->item.owner;
		fg_tenants_publish(px->st, &px->tenants, c->x->tenant, now); /* one less queued */
		if (fg_proxy_dispatch(c))
			fg_client_resume(c); /* answered 503: serve what it pipelined */
	}
	arm_expiry(px, now);
}

void fg_sched_kick(struct fg_proxy *px)
{
	/* Right after the callback that kicked, not after the whole epoll
	 * batch: a request read at the top of a batch of 30 would otherwise
	 * wait for the other 29 to be served before it leaves for the engine,
	 * and the engine idle meanwhile (bench/proxy.sh: +3-7% req/s). */
	if (px->pump_timer || !px->gw)
		return;
	/* on the loop that kicked (with agent.workers, the worker whose
	 * callback admitted or settled): the requests it starts are mostly
	 * that worker's, so no other thread is woken to start them */
	struct fg_loop *loop = fg_loop_current();
	if (!loop)
		loop = px->st->loop;
	px->pump_timer = fg_loop_soon(loop, pump, px);
	if (px->pump_timer)
		px->pump_loop = loop;
}

/* ---- queue deadlines ----------------------------------------------------------- */

static void answer_expired(struct fg_proxy *px, struct fg_client *c,
			   const struct fg_gw_decision *why, uint64_t now)
{
	struct fg_exchange *x = c->x;
	bool gone = why->outcome == FG_GW_TENANT_GONE;

	/* the gateway has ended the request and refunded it */
	x->reserved = false;
	fg_tenants_ended(x->tenant, x->gwr.price.units, 0,
		       gone ? FG_OUT_TENANT_GONE : FG_OUT_QUEUE_TIMEOUT);
	fg_tenants_publish(px->st, &px->tenants, x->tenant, now);
	if (gone) {
		fg_client_error(c, 403, "permission_error", "tenant_removed", NULL, why->reason,
				"x-should-retry: false\r\n");
	} else {
		char hdr[128];
		snprintf(hdr, sizeof(hdr), "Retry-After: %" PRIu64 "\r\nretry-after-ms: %" PRIu64 "\r\n",
			 fg_retry_after_s(why->wait_ns), fg_retry_after_ms(why->wait_ns));
		fg_client_error(c, 429, "rate_limit_error", "queue_timeout", NULL, why->reason, hdr);
	}
	fg_client_resume(c);
}

static void expire(struct fg_loop *loop, void *ctx)
{
	struct fg_proxy *px = ctx;
	uint64_t now = fg_now_ns();
	struct fg_gw_decision why;
	struct fg_gw_request *r;
	(void)loop;

	px->expire_timer = 0;
	px->expire_at = 0;
	while ((r = fg_gw_expire(px->gw, now, &why)))
		answer_expired(px, r->item.owner, &why, now);
	arm_expiry(px, now);
	fg_sched_kick(px); /* orphans leaving may unblock nothing, timeouts free queue slots */
}

static void arm_expiry(struct fg_proxy *px, uint64_t now)
{
	uint64_t at = fg_gw_next_deadline(px->gw);

	if (px->gw->orphans_queued)
		at = now; /* after a reload: answer them right away */
	if (at == px->expire_at && (px->expire_timer || !at))
		return;
	if (px->expire_timer)
		fg_loop_timer_cancel(px->st->loop, px->expire_timer);
	px->expire_timer = 0;
	px->expire_at = at;
	if (at)
		px->expire_timer = fg_loop_timer(px->st->loop, at > now ? at - now : 0, expire, px);
}

/* ---- progress of a dispatched request --------------------------------------------- */

static void scrape_pace(struct fg_proxy *px, bool fast)
{
	if (fast == px->scrape_fast || !px->scrape)
		return;
	px->scrape_fast = fast;
	fg_engine_scrape_set_period(px->scrape, fast ? SCRAPE_FAST_NS : SCRAPE_PERIOD_NS);
}

void fg_sched_first_token(struct fg_client *c)
{
	struct fg_exchange *x = c->x;

	if (!x->reserved || x->gwr.state != FG_GW_S_SENT)
		return;
	fg_gw_first_token(c->px->gw, &x->gwr, fg_now_ns());
	fg_sched_kick(c->px); /* the engine window has room again */
}

void fg_sched_output(struct fg_client *c, double completion_tokens)
{
	struct fg_exchange *x = c->x;
	bool first = x->gwr.state == FG_GW_S_SENT;

	if (!x->reserved)
		return;
	uint64_t now = fg_now_ns();
	double uncached = x->sse_state.prompt_reported
		? x->sse_state.usage.prompt_tokens - x->sse_state.usage.cached_tokens : 0;
	fg_pcal_output(c->px->calib, &x->pcal, completion_tokens, uncached, now);
	fg_gw_output(c->px->gw, &x->gwr, completion_tokens, now);
	if (first)
		fg_sched_kick(c->px);
}

void fg_sched_sent(struct fg_client *c)
{
	struct fg_exchange *x = c->x;

	if (x->reserved && !x->long_ctx && !x->gwr.streams && x->gwr.state == FG_GW_S_SENT)
		scrape_pace(c->px, true);
	if (x->reserved && !x->long_ctx && x->gwr.state == FG_GW_S_SENT)
		fg_pcal_sent(c->px->calib, &x->pcal, &x->gwr, x->gwr.streams);
}

/* ---- the 1 s tick: overload, peaks, stale engine metrics ---------------------------- */

static void publish_overload(struct fg_proxy *px, int level, double backlog_s)
{
	const struct fg_policy *p = px->gw->policy;
	int ranks[FG_MAX_TIERS];
	char names[256] = "";
	size_t n = 0;

	fg_kernel_set_overload_tier(px->st, level);
	fg_tier_ranks(p, ranks);
	for (uint32_t i = 0; i < p->n_tiers && n < sizeof(names); i++)
		if (ranks[i] <= level)
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "",
					      p->tiers[i].name);
	if (level >= 0)
		fprintf(stderr, "fairgated: overload: %.1f s of queued replica time; the kernel sheds "
				"new connections of tier(s) %s\n", backlog_s, names);
	else
		fprintf(stderr, "fairgated: overload cleared (%.1f s of queued replica time)\n",
			backlog_s);
	px->overload_level = level;
	px->overload_changes++;
}

static void tick(struct fg_loop *loop, void *ctx)
{
	struct fg_proxy *px = ctx;
	struct fg_gateway *gw = px->gw;
	uint64_t now = fg_now_ns();

	fg_peak_tick(&gw->peaks, now);
	if (px->engine_metrics_known && now - px->engine_metrics_ns > ENGINE_METRICS_STALE_NS) {
		/* the engine stopped answering /metrics: back to our own books */
		px->engine_metrics_known = false;
		fg_ew_engine_unknown(&gw->ew);
		scrape_pace(px, false); /* no counts to wait for: once a second */
	}
	double backlog = fg_gw_backlog_s(gw);
	int level = fg_overload_level(gw->policy, backlog, px->overload_level);
	if (level != px->overload_level)
		publish_overload(px, level, backlog);
	else if (level >= 0)
		fg_kernel_set_overload_tier(px->st, level); /* renewed: it lapses if we die */
	fg_pcal_tick(px->calib, gw, now);
	/* nothing at the engine and requests begun since the last time: a
	 * burst is over, its freed pages go back (lib/heap_give_back.h) */
	if (!px->n_busy)
		fg_heap_give_back(&px->heap, atomic_load(&px->exchanges_begun), HEAP_GIVE_BACK_MIN);
	fg_sched_kick(px);
	arm_expiry(px, now);
	px->tick_timer = fg_loop_timer(loop, TICK_NS, tick, px);
}

/* ---- the engine's metrics ------------------------------------------------------------ */

static void on_engine_metrics(void *ctx, const struct fg_engine_metrics *m)
{
	struct fg_proxy *px = ctx;

	px->engine_metrics_ns = fg_now_ns();
	px->engine_metrics_known = true;
	if (m->found & 1) {
		px->engine_waiting = m->waiting;
		/* without a running count nothing is matched: only the waiting
		 * ones beyond ours are learnt (see fg_ew_engine_counts) */
		fg_ew_engine_counts(&px->gw->ew, m->found & 2 ? m->running : 0, m->waiting,
				    m->asked_ns);
	}
	if (m->found & 2)
		px->engine_running = m->running;
	/* fast only while it helps: counts to wait for, from an engine that has them */
	scrape_pace(px, (m->found & 1) &&
			    (fg_ew_unconfirmed(&px->gw->ew) > 0 || px->gw->ew.engine_extra > 0));
	if (m->found & 8)
		px->engine_kv_usage = m->kv_usage;
	if (m->found & 16)
		fg_pcal_engine_itl(px->calib, m->totals.itl_sum, m->totals.itl_count);
	fg_pcal_engine_totals(px->calib, &m->totals, m->found & 2 ? m->running : -1, m->asked_ns);
	if (m->found & 4) {
		double was = px->engine_preemptions_seen;
		if (px->preemptions_baseline && m->preemptions > was) {
			uint64_t d = (uint64_t)(m->preemptions - was);
			px->engine_preemptions += d;
			fprintf(stderr, "fairgated: the engine preempted %" PRIu64 " sequence(s) "
					"(vllm:num_preemptions_total %.0f): recompute is the platform's "
					"cost; KV caps or agent.kv_headroom are too loose for this load\n",
				d, m->preemptions);
		}
		/* a restarted engine starts its counter again: re-baseline */
		px->engine_preemptions_seen = m->preemptions;
		px->preemptions_baseline = true;
	}
	fg_sched_kick(px);
}

static void scrape_engine(struct fg_proxy *px, const struct fg_hostport *engine)
{
	fg_engine_scrape_stop(px->scrape);
	px->scrape = NULL;
	px->engine_metrics_known = false;
	px->preemptions_baseline = false;
	px->scrape_fast = false;
	if (px->gw)
		fg_ew_engine_unknown(&px->gw->ew);
	if (engine->host[0])
		px->scrape = fg_engine_scrape_start(px->st->loop, engine, SCRAPE_PERIOD_NS,
						    on_engine_metrics, px);
	fg_engine_scrape_set_auth(px->scrape, px->engine_auth);
}

/* ---- lifecycle ------------------------------------------------------------------------- */

int fg_sched_start(struct fg_proxy *px, char *err, size_t errlen)
{
	const struct fg_policy *p = px->st->policy;
	uint64_t now = fg_now_ns();

	px->overload_level = -1;
	px->gw = malloc(sizeof(*px->gw));
	if (!px->gw) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (fg_gw_init(px->gw, p, 0, now) < 0) {
		free(px->gw);
		px->gw = NULL;
		snprintf(err, errlen, "out of memory for %u tenants' gateway state", p->n_tenants);
		return -1;
	}
	fg_peak_set_window(&px->gw->peaks, (uint64_t)(p->agent.peak_window_s * 1e9));
	px->calib = fg_pcal_new(p, &px->gw->cm, now);
	if (!px->calib) {
		fg_gw_free(px->gw);
		free(px->gw);
		px->gw = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	scrape_engine(px, &p->agent.engine);
	px->tick_timer = fg_loop_timer(px->st->loop, TICK_NS, tick, px);
	return 0;
}

void fg_sched_apply_policy(struct fg_proxy *px, const struct fg_policy *old,
			   const struct fg_policy *p)
{
	bool new_engine = old->agent.engine.port != p->agent.engine.port ||
			  strcmp(old->agent.engine.host, p->agent.engine.host);
	if (new_engine)
		scrape_engine(px, &p->agent.engine);
	fg_pcal_apply_policy(px->calib, p, px->gw, new_engine, fg_now_ns());
	arm_expiry(px, fg_now_ns());
	fg_sched_kick(px);
}

void fg_sched_stop(struct fg_proxy *px)
{
	struct fg_loop *loop = px->st->loop;

	fg_engine_scrape_stop(px->scrape);
	px->scrape = NULL;
	if (px->pump_timer)
		fg_loop_timer_cancel(px->pump_loop, px->pump_timer);
	if (px->expire_timer)
		fg_loop_timer_cancel(loop, px->expire_timer);
	if (px->tick_timer)
		fg_loop_timer_cancel(loop, px->tick_timer);
	px->pump_timer = px->expire_timer = px->tick_timer = 0;
	px->pump_loop = NULL;
	if (px->overload_level >= 0)
		fg_kernel_set_overload_tier(px->st, -1); /* nobody left to clear it */
	px->overload_level = -1;
	fg_gw_free(px->gw);
	free(px->gw);
	px->gw = NULL;
	fg_pcal_free(px->calib);
	px->calib = NULL;
}
