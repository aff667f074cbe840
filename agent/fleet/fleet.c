/* fleet.c — agent.fleet's glue on the agent's loop; see fleet.h. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "agent/fleet/fleet.h"
#include "agent/fleet/fleet_client.h"
#include "agent/proxy/proxy_internal.h"
#include "lib/id_set.h"

#define TICK_MAX_NS 20000000ull /* observe and shape at least this often */
#define LEAVE_WAIT_NS 1000000000ull

struct fleet_view {
	uint32_t n, total;        /* kept, and seen */
	struct fg_fleet_peer peers[FG_FLEET_VIEW_MAX];
};

struct fleet_tenants {
	uint32_t n;
	char (*names)[FG_NAME_MAX];
	struct fg_fleet_tenant *ft;
	struct fleet_view *views;
	double *fleet_peak;       /* the tenant's fleet-wide peak units/s */
	double *report_mark;      /* billed when last reported */
	uint32_t *order;          /* the policy's ids in name order (answers come
				   * back by name); NULL: out of memory, scanned */
	/* the tenants the tick visits: all at first, then those not quiet
	 * (fg_fleet_quiet) and those the gateway says a request moved */
	struct fg_idset awake;
};

static void tenants_free(struct fleet_tenants *s)
{
	free(s->names);
	free(s->ft);
	free(s->views);
	free(s->fleet_peak);
	free(s->report_mark);
	free(s->order);
	fg_idset_free(&s->awake);
	memset(s, 0, sizeof(*s));
}

static int tenants_alloc(struct fleet_tenants *s, const struct fg_policy *p)
{
	size_t n = fg_tenant_slots(p->n_tenants);

	memset(s, 0, sizeof(*s));
	s->names = calloc(n, sizeof(*s->names));
	s->ft = calloc(n, sizeof(*s->ft));
	s->views = calloc(n, sizeof(*s->views));
	s->fleet_peak = calloc(n, sizeof(double));
	s->report_mark = calloc(n, sizeof(double));
	s->order = fg_policy_name_order(p);
	if (!s->names || !s->ft || !s->views || !s->fleet_peak || !s->report_mark ||
	    fg_idset_init(&s->awake, (uint32_t)n) < 0) {
		tenants_free(s);
		return -1;
	}
	s->n = p->n_tenants;
	fg_idset_fill(&s->awake, s->n);
	return 0;
}

static const struct fg_tenant *tenant_named(const struct fleet_tenants *s,
					    const struct fg_policy *p, const char *name)
{
	return fg_policy_find_sorted(p, s->order, name);
}

struct fg_fleet {
	struct fg_proxy *px;
	struct fg_fleet_cfg cfg;
	char node[FG_FLEET_NODE_MAX];
	char inc[20];
	int efd;
	struct fg_fleet_client *client;
	uint64_t timer, tick_ns;
	uint64_t last_tick_ns;       /* the clock of the last run_tick */

	/* by tenant id of the policy in force (n of them, sized to it); names
	 * say whose they are */
	struct fleet_tenants cur;
	struct fleet_tenants next; /* fg_fleet_prepare_policy's, until applied */

	struct fg_fleet_batch batch; /* reqs and report arrays: batch_slots */
	uint32_t batch_slots;
	bool batch_out;
	bool report_retry;
	uint64_t report_seq, report_last_ns;

	/* the fleet, from the last answered report */
	uint32_t live_nodes, windows_closed;
	double peak, last_window, sum_peaks;
	uint64_t report_ok_ns;

	/* the store */
	bool reachable;
	uint64_t last_ok_ns, unreachable_since_ns, outages;
	char last_error[256];
};

static struct fg_fleet_books books_of(const struct fg_gateway *gw, uint32_t id)
{
	const struct fg_gw_tenant *g = &gw->t[id];

	return (struct fg_fleet_books){
		.consumed = g->billed_units + g->reserved_units,
		.billed = g->billed_units,
		.refused = g->refused_units,
		.refused_peak = g->refused_peak,
		.typical_cost = g->typical_cost,
	};
}

static struct fg_fleet_params params_of(const struct fg_fleet *f, const struct fg_policy *p,
					uint32_t id)
{
	const struct fg_tenant *t = &p->tenants[id];

	return (struct fg_fleet_params){
		.rate = t->units_per_s,
		.depth = t->units_per_s * t->burst_s,
		.floor = t->fleet_floor_units_per_s,
		.period_s = f->cfg.period_s,
		.buffer_s = f->cfg.buffer_s,
		.node_timeout_s = f->cfg.node_timeout_s,
	};
}

static uint64_t ns_of(double s)
{
	return (uint64_t)(s * 1e9);
}

/* ---- answers ------------------------------------------------------------------ */

static void store_state(struct fg_fleet *f, const struct fg_fleet_batch *b, uint64_t now)
{
	if (b->connected) {
		if (!f->reachable && f->unreachable_since_ns)
			fprintf(stderr, "fairgated: fleet: the store answers again after %.1f s\n",
				(double)(now - f->unreachable_since_ns) / 1e9);
		f->reachable = true;
		f->last_ok_ns = now;
		f->unreachable_since_ns = 0;
		return;
	}
	snprintf(f->last_error, sizeof(f->last_error), "%s", b->error);
	if (f->reachable || !f->unreachable_since_ns) {
		fprintf(stderr, "fairgated: fleet: the store does not answer (%s): leases hold %.1f s, "
				"then each tenant falls back to max(floor, contract / live nodes)\n",
			b->error, 2 * f->cfg.period_s);
		f->unreachable_since_ns = now;
		f->outages++;
	}
	f->reachable = false;
}

static void take_batch(struct fg_fleet *f, struct fg_fleet_batch *b)
{
	struct fg_proxy *px = f->px;
	struct fg_gateway *gw = px->gw;
	const struct fg_policy *p = gw->policy;
	uint64_t now = fg_now_ns();

	f->batch_out = false;
	store_state(f, b, now);
	for (uint32_t k = 0; k < b->n; k++) {
		struct fg_fleet_req *q = &b->reqs[k];
		const struct fg_tenant *t = tenant_named(&f->cur, p, q->tenant);
		if (!t)
			continue; /* left the policy meanwhile */
		struct fg_fleet_tenant *ft = &f->cur.ft[t->id];
		if (!ft->in_flight || ft->call.seq != q->call.seq)
			continue;
		struct fg_fleet_params pp = params_of(f, p, t->id);
		struct fg_fleet_books bk = books_of(gw, t->id);
		if (q->ok) {
			fg_fleet_apply(ft, &gw->t[t->id].bucket, &pp, &bk, &q->ans, now);
			struct fleet_view *v = &f->cur.views[t->id];
			v->total = q->n_peers;
			v->n = q->n_peers < FG_FLEET_VIEW_MAX ? q->n_peers : FG_FLEET_VIEW_MAX;
			memcpy(v->peers, q->peers, v->n * sizeof(v->peers[0]));
			if (q->ans.recreated)
				fprintf(stderr, "fairgated: fleet: tenant %s: the store had lost its bucket; "
						"recreated empty, relearning for %.1f s (no burst)\n",
					q->tenant, 2 * f->cfg.period_s);
		} else {
			fg_fleet_failed(ft, now);
		}
		struct fg_tenant_rt *rt = fg_tenants_by_name(&px->tenants, q->tenant);
		if (rt)
			fg_tenants_publish(px->st, &px->tenants, rt, now);
	}
	struct fg_fleet_report *rp = &b->report;
	if (rp->send) {
		f->report_retry = !rp->ok;
		if (rp->ok) {
			f->live_nodes = rp->live_nodes;
			f->windows_closed = rp->windows_closed;
			f->peak = rp->fleet_peak;
			f->last_window = rp->fleet_last;
			f->sum_peaks = rp->sum_tenant_peaks;
			f->report_ok_ns = now;
			for (uint32_t k = 0; k < rp->n; k++) {
				const struct fg_tenant *t = tenant_named(&f->cur, p, rp->tenant[k]);
				if (t)
					f->cur.fleet_peak[t->id] = rp->peak[k];
			}
		}
	}
}

static void on_notify(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_fleet *f = ctx;
	uint64_t v;
	(void)loop;
	(void)events;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	struct fg_fleet_batch *b = fg_fleet_client_take(f->client);
	if (b)
		take_batch(f, b);
}

/* ---- the tick ------------------------------------------------------------------- */

/* The fleet-wide report: every tenant's billed units since the last one.
 * Only awake tenants can have any: one with billing unreported here is not
 * let sleep (tick_tenant), and billing wakes a sleeping one. */
static void prepare_report(struct fg_fleet *f, uint64_t now)
{
	struct fg_fleet_report *rp = &f->batch.report;
	const struct fg_gateway *gw = f->px->gw;

	rp->send = false;
	if (f->report_retry) {
		rp->send = now - f->report_last_ns >= ns_of(FG_FLEET_RETRY_GAP * f->cfg.period_s);
		if (rp->send)
			f->report_last_ns = now;
		return; /* the same report again */
	}
	if (f->report_last_ns && now - f->report_last_ns < ns_of(f->cfg.period_s))
		return;
	rp->n = 0;
	for (uint32_t k = 0; k < f->cur.awake.n; k++) {
		uint32_t i = f->cur.awake.ids[k];
		double billed = gw->t[i].billed_units;
		if (billed > f->cur.report_mark[i]) {
			snprintf(rp->tenant[rp->n], FG_NAME_MAX, "%s", f->cur.names[i]);
			rp->units[rp->n++] = billed - f->cur.report_mark[i];
			f->cur.report_mark[i] = billed;
		}
	}
	rp->seq = ++f->report_seq;
	rp->window_s = gw->policy->agent.peak_window_s;
	rp->node_timeout_s = f->cfg.node_timeout_s;
	rp->send = true;
	f->report_last_ns = now;
}

static void tick(struct fg_loop *loop, void *ctx);

static void arm(struct fg_fleet *f)
{
	if (!f->timer)
		f->timer = fg_loop_timer(f->px->st->loop, f->tick_ns, tick, f);
}

/* The batch's arrays hold a call and a report line per tenant. They only
 * grow, and only while the thread does not hold the batch; a report being
 * retried keeps its lines (realloc). */
static int grow_batch(struct fg_fleet *f, uint32_t n)
{
	struct fg_fleet_batch *b = &f->batch;

	if (!n)
		n = 1;
	if (n <= f->batch_slots)
		return 0;
	void *reqs = realloc(b->reqs, n * sizeof(*b->reqs));
	if (reqs)
		b->reqs = reqs;
	void *tenant = realloc(b->report.tenant, n * sizeof(*b->report.tenant));
	if (tenant)
		b->report.tenant = tenant;
	void *units = realloc(b->report.units, n * sizeof(double));
	if (units)
		b->report.units = units;
	void *peak = realloc(b->report.peak, n * sizeof(double));
	if (peak)
		b->report.peak = peak;
	if (!reqs || !tenant || !units || !peak)
		return -1;
	f->batch_slots = n;
	return 0;
}

/* The tenants a request moved since the last tick join the awake ones; one
 * that was asleep first takes the demand samples of nothing the ticks it
 * missed would have taken (its books had not moved by the last one). */
static void wake_moved(struct fg_fleet *f)
{
	struct fg_gateway *gw = f->px->gw;
	struct fg_idset *moved = &gw->moved;

	for (uint32_t k = 0; k < moved->n; k++) {
		uint32_t i = moved->ids[k];
		if (i >= f->cur.n || !fg_idset_add(&f->cur.awake, i))
			continue;
		struct fg_fleet_params pp = params_of(f, gw->policy, i);
		fg_fleet_idle_until(&f->cur.ft[i], &pp, f->last_tick_ns);
	}
	fg_idset_clear(moved);
}

struct tick_pass {
	struct fg_fleet *f;
	uint64_t now;
	uint32_t n;   /* calls in the batch */
	bool hold;    /* nothing is sent this tick (batch out, or no room) */
};

/* One awake tenant: observe, shape, its call if due. False when it is quiet
 * (nothing would change until a request moves its books): it sleeps. */
static bool tick_tenant(uint32_t i, void *ctx)
{
	struct tick_pass *t = ctx;
	struct fg_fleet *f = t->f;
	struct fg_gateway *gw = f->px->gw;
	struct fg_fleet_params pp = params_of(f, gw->policy, i);
	struct fg_fleet_books bk = books_of(gw, i);
	struct fg_fleet_tenant *ft = &f->cur.ft[i];
	struct fg_bucket *b = &gw->t[i].bucket;

	fg_fleet_observe(ft, b, &pp, &bk, t->now);
	gw->t[i].refused_peak = 0; /* observe keeps the largest */
	fg_fleet_shape(ft, b, &pp, bk.typical_cost, t->now);
	if (!t->hold && fg_fleet_due(ft, b, &pp, bk.typical_cost, t->now)) {
		struct fg_fleet_req *q = &f->batch.reqs[t->n++];
		snprintf(q->tenant, sizeof(q->tenant), "%s", f->cur.names[i]);
		q->params = pp;
		q->call = *fg_fleet_prepare(ft, b, &pp, &bk, t->now);
		return true;
	}
	/* billing the fleet-wide report has not carried yet keeps it awake */
	return !fg_fleet_quiet(ft, b, &pp, &bk, t->now) ||
	       gw->t[i].billed_units != f->cur.report_mark[i];
}

/* Observe and shape every awake tenant; send what is due. A quiet tenant
 * is left alone until a request moves its books: the tick costs the
 * tenants in use, not the policy's. */
static void run_tick(struct fg_fleet *f)
{
	const struct fg_policy *p = f->px->gw->policy;
	uint64_t now = fg_now_ns();
	/* after a reload that added tenants, nothing is sent until the
	 * batch has room for them all (out of memory: retried each tick) */
	bool no_room = !f->batch_out && grow_batch(f, f->cur.n) < 0;
	struct tick_pass pass = { .f = f, .now = now, .hold = f->batch_out || no_room };

	wake_moved(f);
	fg_idset_filter(&f->cur.awake, tick_tenant, &pass);
	f->last_tick_ns = now;
	uint32_t n = pass.n;
	if (f->batch_out || no_room)
		return;
	prepare_report(f, now);
	if (!n && !f->batch.report.send)
		return;
	f->batch.n = n;
	f->batch.leave = false;
	if (fg_fleet_client_submit(f->client, &f->batch)) {
		f->batch_out = true;
		return;
	}
	/* the thread still holds the last one (cannot happen with batch_out
	 * kept right); count these as failed so they are resent */
	for (uint32_t k = 0; k < n; k++) {
		const struct fg_tenant *t = tenant_named(&f->cur, p, f->batch.reqs[k].tenant);
		if (t)
			fg_fleet_failed(&f->cur.ft[t->id], now);
	}
	if (f->batch.report.send)
		f->report_retry = true;
}

static void tick(struct fg_loop *loop, void *ctx)
{
	struct fg_fleet *f = ctx;
	(void)loop;

	f->timer = 0;
	run_tick(f);
	arm(f);
}

/* ---- lifecycle -------------------------------------------------------------------- */

static int read_password(const char *path, char **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!path[0])
		return 0;
	FILE *fp = fopen(path, "re");
	if (!fp) {
		snprintf(err, errlen, "agent.fleet.password_file %s: %s", path, strerror(errno));
		return -1;
	}
	char line[1024];
	if (!fgets(line, sizeof(line), fp)) {
		fclose(fp);
		snprintf(err, errlen, "agent.fleet.password_file %s: empty", path);
		return -1;
	}
	fclose(fp);
	line[strcspn(line, "\r\n")] = 0;
	*out = strdup(line);
	memset(line, 0, sizeof(line));
	return *out ? 0 : -1;
}

static void free_fleet(struct fg_fleet *f)
{
	if (!f)
		return;
	tenants_free(&f->cur);
	tenants_free(&f->next);
	free(f->batch.reqs);
	free(f->batch.report.tenant);
	free(f->batch.report.units);
	free(f->batch.report.peak);
	if (f->efd >= 0)
		close(f->efd);
	free(f);
}

static void init_tenant(struct fg_fleet *f, uint32_t id, uint64_t now)
{
	struct fg_gateway *gw = f->px->gw;
	struct fg_fleet_books bk = books_of(gw, id);

	fg_fleet_tenant_init(&f->cur.ft[id], &gw->t[id].bucket, &bk, now);
	memset(&f->cur.views[id], 0, sizeof(f->cur.views[id]));
	f->cur.fleet_peak[id] = 0;
	f->cur.report_mark[id] = gw->t[id].billed_units;
	snprintf(f->cur.names[id], FG_NAME_MAX, "%s", gw->policy->tenants[id].name);
}

int fg_fleet_start(struct fg_proxy *px, char *err, size_t errlen)
{
	const struct fg_fleet_cfg *cfg = &px->st->policy->agent.fleet;
	const struct fg_policy *p = px->st->policy;
	char *password = NULL;
	uint64_t now = fg_now_ns();

	if (!cfg->enabled)
		return 0;
	struct fg_fleet *f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	f->efd = -1;
	f->px = px;
	f->cfg = *cfg;
	if (tenants_alloc(&f->cur, p) || grow_batch(f, p->n_tenants)) {
		snprintf(err, errlen, "out of memory for %u tenants' fleet state", p->n_tenants);
		goto fail;
	}
	if (cfg->node[0]) {
		snprintf(f->node, sizeof(f->node), "%s", cfg->node);
	} else if (gethostname(f->node, sizeof(f->node) - 1) || !f->node[0]) {
		snprintf(err, errlen, "agent.fleet.node is unset and the host name is unknown");
		goto fail;
	}
	uint8_t rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < 8; i++)
		snprintf(f->inc + 2 * i, 3, "%02x", rnd[i]);
	if (read_password(cfg->password_file, &password, err, errlen))
		goto fail;
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0 || fg_loop_add(px->st->loop, f->efd, EPOLLIN, on_notify, f)) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	f->client = fg_fleet_client_start(cfg, f->node, f->inc, password, f->efd, err, errlen);
	if (password) {
		memset(password, 0, strlen(password));
		free(password);
		password = NULL;
	}
	if (!f->client) {
		fg_loop_del(px->st->loop, f->efd);
		goto fail;
	}
	f->tick_ns = ns_of(cfg->period_s / 8);
	if (f->tick_ns > TICK_MAX_NS)
		f->tick_ns = TICK_MAX_NS;
	f->cur.n = p->n_tenants;
	for (uint32_t i = 0; i < f->cur.n; i++)
		init_tenant(f, i, now);
	px->fleet = f;

	/* the first calls before the proxy serves, bounded: a store that does
	 * not answer leaves every tenant at its floor until it does */
	run_tick(f);
	if (f->batch_out && fg_fleet_client_wait(f->client, 2 * ns_of(cfg->call_timeout_s))) {
		struct fg_fleet_batch *b = fg_fleet_client_take(f->client);
		uint64_t v;
		if (read(f->efd, &v, sizeof(v)) < 0) { /* the notify is consumed here */ }
		if (b)
			take_batch(f, b);
	}
	arm(f);
	char where[FG_PATH_MAX + 16];
	if (cfg->redis_unix[0])
		snprintf(where, sizeof(where), "%s", cfg->redis_unix);
	else
		snprintf(where, sizeof(where), "%s:%u", cfg->redis_host, cfg->redis_port);
	fprintf(stderr, "fairgated: fleet: node %s (incarnation %s), store %s, period %.2g s: %s\n",
		f->node, f->inc, where, cfg->period_s,
		f->reachable ? "the store answers" : "the store does not answer yet (tenants at their floors)");
	return 0;
fail:
	if (password) {
		memset(password, 0, strlen(password));
		free(password);
	}
	free_fleet(f);
	return -1;
}

int fg_fleet_prepare_policy(struct fg_proxy *px, const struct fg_policy *p)
{
	struct fg_fleet *f = px->fleet;

	if (!f)
		return 0;
	tenants_free(&f->next);
	return tenants_alloc(&f->next, p);
}

void fg_fleet_cancel_policy(struct fg_proxy *px)
{
	if (px->fleet)
		tenants_free(&px->fleet->next);
}

void fg_fleet_apply_policy(struct fg_proxy *px, const struct fg_policy *p)
{
	struct fg_fleet *f = px->fleet;
	uint64_t now = fg_now_ns();

	if (!f || !f->next.names || f->next.n != p->n_tenants)
		return; /* not prepared for this policy */
	struct fleet_tenants was = f->cur;

	f->cur = f->next;
	memset(&f->next, 0, sizeof(f->next));
	/* those that stay (matched by name in the new policy's order) bring
	 * their leases, views, peaks and marks; the others (no name yet: a
	 * policy's names are never empty) start fresh */
	for (uint32_t j = 0; j < was.n; j++) {
		const struct fg_tenant *t = tenant_named(&f->cur, p, was.names[j]);
		if (!t)
			continue;
		uint32_t i = t->id;
		f->cur.ft[i] = was.ft[j];
		f->cur.views[i] = was.views[j];
		f->cur.fleet_peak[i] = was.fleet_peak[j];
		f->cur.report_mark[i] = was.report_mark[j];
		memcpy(f->cur.names[i], was.names[j], sizeof(f->cur.names[i]));
	}
	for (uint32_t i = 0; i < f->cur.n; i++)
		if (!f->cur.names[i][0])
			init_tenant(f, i, now);
	tenants_free(&was);
	/* the reload gave every bucket the contract's rate again */
	for (uint32_t i = 0; i < f->cur.n; i++) {
		struct fg_fleet_params pp = params_of(f, p, i);
		struct fg_fleet_books bk = books_of(px->gw, i);
		fg_fleet_shape(&f->cur.ft[i], &px->gw->t[i].bucket, &pp, bk.typical_cost, now);
	}
}

void fg_fleet_stop(struct fg_proxy *px)
{
	struct fg_fleet *f = px->fleet;

	if (!f)
		return;
	if (f->timer)
		fg_loop_timer_cancel(px->st->loop, f->timer);
	fg_loop_del(px->st->loop, f->efd);
	if (f->batch_out && fg_fleet_client_wait(f->client, 2 * ns_of(f->cfg.call_timeout_s)) &&
	    fg_fleet_client_take(f->client))
		f->batch_out = false;
	if (!f->batch_out && f->reachable) {
		/* hand the leases back so the others need not wait node_timeout_s */
		uint32_t n = 0;
		for (uint32_t i = 0; i < f->cur.n && n < f->batch_slots; i++) {
			if (!f->cur.ft[i].seq)
				continue;
			snprintf(f->batch.reqs[n].tenant, FG_NAME_MAX, "%s", f->cur.names[i]);
			n++;
		}
		f->batch.n = n;
		f->batch.leave = true;
		f->batch.report.send = false;
		if (n && fg_fleet_client_submit(f->client, &f->batch) &&
		    fg_fleet_client_wait(f->client, LEAVE_WAIT_NS))
			fg_fleet_client_take(f->client);
	}
	fg_fleet_client_stop(f->client); /* joins: no batch is in use after it */
	px->fleet = NULL;
	free_fleet(f);
}

/* ---- fairgatectl fleet ---------------------------------------------------------------- */

static json_t *tenant_json(struct fg_fleet *f, uint32_t i, uint64_t now)
{
	struct fg_gateway *gw = f->px->gw;
	const struct fg_policy *p = gw->policy;
	struct fg_fleet_params pp = params_of(f, p, i);
	struct fg_fleet_tenant *ft = &f->cur.ft[i];
	struct fg_bucket *b = &gw->t[i].bucket;
	json_t *nodes = json_array();

	for (uint32_t k = 0; k < f->cur.views[i].n; k++) {
		const struct fg_fleet_peer *pe = &f->cur.views[i].peers[k];
		json_array_append_new(nodes, json_pack("{s:s, s:f, s:f, s:f, s:s}", "node", pe->node,
						       "demand_units_per_s", pe->demand,
						       "rate_units_per_s", pe->rate, "age_ms", pe->age_ms,
						       "state", pe->state));
	}
	json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:i, s:s, s:I}",
			      "name", f->cur.names[i], "contract_units_per_s", pp.rate,
			      "depth_units", pp.depth, "floor_units_per_s", pp.floor,
			      "mode", fg_fleet_mode_name(fg_fleet_mode_at(ft, &pp, now)),
			      "rate_units_per_s", b->rate, "bucket_units", fg_bucket_level(b, now),
			      "hold_cap_units", b->cap > 0 ? b->cap : b->depth,
			      "demand_units_per_s", ft->demand,
			      "want_units", fg_fleet_want(ft, b, &pp, gw->t[i].typical_cost, now),
			      "live_nodes", (int)ft->live_nodes, "epoch", ft->epoch,
			      "seq", (json_int_t)ft->seq);
	if (!o) {
		json_decref(nodes);
		return NULL;
	}
	json_object_set_new(o, "last_answer_ms_ago",
			    ft->last_ok_ns ? json_real((double)(now - ft->last_ok_ns) / 1e6) : json_null());
	json_object_set_new(o, "fleet_level_units", json_real(ft->last.fleet_level));
	json_object_set_new(o, "fleet_avail_units", json_real(ft->last.fleet_avail));
	json_object_set_new(o, "fleet_rate_eff_units_per_s", json_real(ft->last.rate_eff));
	json_object_set_new(o, "fleet_demand_units_per_s", json_real(ft->last.demand_sum));
	json_object_set_new(o, "fleet_charged_units", json_real(ft->last.charged_total));
	json_object_set_new(o, "fleet_billed_units", json_real(ft->last.usage_total));
	json_object_set_new(o, "fleet_peak_units_per_s", json_real(f->cur.fleet_peak[i]));
	json_object_set_new(o, "learning", json_boolean(ft->last.learning));
	json_object_set_new(o, "store_recoveries", json_integer((json_int_t)ft->last.recoveries));
	json_object_set_new(o, "units_granted", json_real(ft->units_granted));
	json_object_set_new(o, "self_granted_units", json_real(ft->self_granted));
	json_object_set_new(o, "unreported_refill_units", json_real(ft->refill_unreported));
	json_object_set_new(o, "calls_ok", json_integer((json_int_t)ft->calls_ok));
	json_object_set_new(o, "calls_failed", json_integer((json_int_t)ft->calls_failed));
	json_object_set_new(o, "replays", json_integer((json_int_t)ft->replays));
	json_object_set_new(o, "epoch_changes", json_integer((json_int_t)ft->epoch_changes));
	json_object_set_new(o, "last_rtt_ms", json_real(ft->last_rtt_s * 1e3));
	json_object_set_new(o, "other_nodes", json_integer((json_int_t)f->cur.views[i].total));
	json_object_set_new(o, "nodes", nodes);
	return o;
}

json_t *fg_fleet_status_json(struct fg_proxy *px, char *err, size_t errlen)
{
	struct fg_fleet *f = px ? px->fleet : NULL;
	uint64_t now = fg_now_ns();
	struct fg_fleet_client_stats cs;
	char where[FG_PATH_MAX + 16];

	if (!f) {
		snprintf(err, errlen, "agent.fleet is not configured: this node's buckets hold the "
				      "whole contract");
		return NULL;
	}
	fg_fleet_client_stats(f->client, &cs);
	if (f->cfg.redis_unix[0])
		snprintf(where, sizeof(where), "%s", f->cfg.redis_unix);
	else
		snprintf(where, sizeof(where), "%s:%u", f->cfg.redis_host, f->cfg.redis_port);
	json_t *tenants = json_array();
	for (uint32_t i = 0; i < f->cur.n; i++)
		json_array_append_new(tenants, tenant_json(f, i, now));
	double ratio = f->peak > 0 ? f->sum_peaks / f->peak : 0;
	return json_pack("{s:s, s:s, s:s, s:b, s:s, s:f, s:f, s:f, s:I,"
			 " s:{s:I, s:I, s:I, s:I, s:I, s:f},"
			 " s:{s:i, s:f, s:f, s:f, s:f, s:i, s:f}, s:o}",
			 "node", f->node, "incarnation", f->inc, "store", where,
			 "reachable", f->reachable, "last_error", f->reachable ? "" : f->last_error,
			 "period_s", f->cfg.period_s, "buffer_s", f->cfg.buffer_s,
			 "node_timeout_s", f->cfg.node_timeout_s, "outages", (json_int_t)f->outages,
			 "thread", "batches", (json_int_t)cs.batches, "calls", (json_int_t)cs.calls,
			 "errors", (json_int_t)cs.call_errors, "connects", (json_int_t)cs.connects,
			 "connect_failures", (json_int_t)cs.connect_failures, "cpu_s", cs.busy_s,
			 "fleet", "live_nodes", (int)f->live_nodes, "peak_units_per_s", f->peak,
			 "last_window_units_per_s", f->last_window,
			 "sum_tenant_peaks_units_per_s", f->sum_peaks, "oversubscription", ratio,
			 "windows_closed", (int)f->windows_closed,
			 "window_s", f->px->gw->policy->agent.peak_window_s,
			 "tenants", tenants);
}

/* ---- metrics --------------------------------------------------------------------------- */

static void help(struct fg_buf *o, const char *name, const char *type, const char *text)
{
	fg_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

typedef double (*fleet_value)(struct fg_fleet *f, uint32_t i, uint64_t now);

static double v_rate(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->px->gw->t[i].bucket.rate; }
static double v_cap(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; const struct fg_bucket *b = &f->px->gw->t[i].bucket; return b->cap > 0 ? b->cap : b->depth; }
static double v_demand(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->cur.ft[i].demand; }
static double v_level(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->cur.ft[i].last.fleet_level; }
static double v_live(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->cur.ft[i].live_nodes; }
static double v_granted(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->cur.ft[i].units_granted; }
static double v_self(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->cur.ft[i].self_granted; }
static double v_peak(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return f->cur.fleet_peak[i]; }
static double v_epochs(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return (double)f->cur.ft[i].epoch_changes; }
static double v_failed(struct fg_fleet *f, uint32_t i, uint64_t now)
{ (void)now; return (double)f->cur.ft[i].calls_failed; }

static void per_tenant(struct fg_buf *o, struct fg_fleet *f, const char *name, const char *type,
		       const char *text, fleet_value fn, uint64_t now)
{
	help(o, name, type, text);
	for (uint32_t i = 0; i < f->cur.n; i++)
		fg_buf_printf(o, "%s{tenant=\"%s\"} %.17g\n", name, f->cur.names[i], fn(f, i, now));
}

void fg_fleet_metrics(struct fg_proxy *px, struct fg_buf *o)
{
	struct fg_fleet *f = px->fleet;
	struct fg_fleet_client_stats cs;
	uint64_t now = fg_now_ns();

	if (!f)
		return;
	fg_fleet_client_stats(f->client, &cs);
	help(o, "fairgate_fleet_store_up", "gauge", "1 while the fleet's store (Redis) answers the grant thread.");
	fg_buf_printf(o, "fairgate_fleet_store_up %d\n", f->reachable);
	help(o, "fairgate_fleet_calls_total", "counter", "Redis calls the grant thread made (FCALLs), by result.");
	fg_buf_printf(o, "fairgate_fleet_calls_total{result=\"ok\"} %" PRIu64 "\n",
		      cs.calls - (cs.call_errors < cs.calls ? cs.call_errors : cs.calls));
	fg_buf_printf(o, "fairgate_fleet_calls_total{result=\"error\"} %" PRIu64 "\n", cs.call_errors);
	help(o, "fairgate_fleet_batches_total", "counter", "Pipelined batches of calls, one round trip each.");
	fg_buf_printf(o, "fairgate_fleet_batches_total %" PRIu64 "\n", cs.batches);
	help(o, "fairgate_fleet_connects_total", "counter", "Connections made to the store, by result.");
	fg_buf_printf(o, "fairgate_fleet_connects_total{result=\"ok\"} %" PRIu64 "\n",
		      cs.connects - cs.connect_failures);
	fg_buf_printf(o, "fairgate_fleet_connects_total{result=\"failed\"} %" PRIu64 "\n",
		      cs.connect_failures);
	help(o, "fairgate_fleet_thread_cpu_seconds_total", "counter", "CPU time of the grant thread.");
	fg_buf_printf(o, "fairgate_fleet_thread_cpu_seconds_total %.9g\n", cs.busy_s);
	help(o, "fairgate_fleet_live_nodes", "gauge", "Nodes that reported to the fleet within agent.fleet.node_timeout_s.");
	fg_buf_printf(o, "fairgate_fleet_live_nodes %u\n", f->live_nodes);
	help(o, "fairgate_fleet_peak_units_per_second", "gauge",
	     "Highest units/s the whole fleet billed in one peak window (agent.peak_window_s).");
	fg_buf_printf(o, "fairgate_fleet_peak_units_per_second %.17g\n", f->peak);
	help(o, "fairgate_fleet_sum_tenant_peaks_units_per_second", "gauge",
	     "Sum over tenants of each one's fleet-wide peak units/s.");
	fg_buf_printf(o, "fairgate_fleet_sum_tenant_peaks_units_per_second %.17g\n", f->sum_peaks);
	help(o, "fairgate_fleet_oversubscription_ratio", "gauge",
	     "Sum of tenant peaks / fleet peak, fleet-wide (0 before the first closed window).");
	fg_buf_printf(o, "fairgate_fleet_oversubscription_ratio %.17g\n",
		      f->peak > 0 ? f->sum_peaks / f->peak : 0);
	help(o, "fairgate_fleet_tenant_mode", "gauge",
	     "1 for the mode this node's bucket runs in: lease, fallback (store silent 2 periods), floor, unheard.");
	for (uint32_t i = 0; i < f->cur.n; i++) {
		struct fg_fleet_params pp = params_of(f, px->gw->policy, i);
		fg_buf_printf(o, "fairgate_fleet_tenant_mode{tenant=\"%s\",mode=\"%s\"} 1\n", f->cur.names[i],
			      fg_fleet_mode_name(fg_fleet_mode_at(&f->cur.ft[i], &pp, now)));
	}
	per_tenant(o, f, "fairgate_fleet_tenant_rate_units_per_second", "gauge",
		   "The rate this node's bucket refills at (its lease, or a fallback).", v_rate, now);
	per_tenant(o, f, "fairgate_fleet_tenant_hold_cap_units", "gauge",
		   "Where this node's refill stops (what its rate is worth over period + buffer).", v_cap, now);
	per_tenant(o, f, "fairgate_fleet_tenant_demand_units_per_second", "gauge",
		   "This node's demand (used + refused), as it reports it.", v_demand, now);
	per_tenant(o, f, "fairgate_fleet_tenant_fleet_level_units", "gauge",
		   "The fleet bucket's level at this node's last answer.", v_level, now);
	per_tenant(o, f, "fairgate_fleet_tenant_live_nodes", "gauge",
		   "Nodes holding a record for the tenant at this node's last answer.", v_live, now);
	per_tenant(o, f, "fairgate_fleet_tenant_granted_units_total", "counter",
		   "Units the fleet granted this node at once.", v_granted, now);
	per_tenant(o, f, "fairgate_fleet_tenant_self_granted_units_total", "counter",
		   "Units this node refilled outside a lease (store silent); charged when it answers again.",
		   v_self, now);
	per_tenant(o, f, "fairgate_fleet_tenant_peak_units_per_second", "gauge",
		   "The tenant's fleet-wide peak units/s in one peak window.", v_peak, now);
	per_tenant(o, f, "fairgate_fleet_tenant_epoch_changes_total", "counter",
		   "Times the store's bucket for the tenant was new to this node (store lost or recreated).",
		   v_epochs, now);
	per_tenant(o, f, "fairgate_fleet_tenant_calls_failed_total", "counter",
		   "Calls for the tenant that got no answer (resent unchanged).", v_failed, now);
}
