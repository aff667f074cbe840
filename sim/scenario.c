/* scenario.c — the virtual-time loop behind scenario.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/gateway.h"
#include "sim/scenario.h"

#define NS_PER_S 1e9

struct scn_req {
	struct fg_gw_request gw;  /* first: the gateway hands back this pointer */
	uint32_t tenant;
	double arrival;
	uint32_t index;
	struct sim_seq *seq;
	bool done;
};

struct arrival {
	double t;
	uint32_t load;
};

struct run {
	const struct scn_config *cfg;
	struct scn_result *out;
	struct fg_gateway *gw;
	struct fg_cost_model cm;
	struct sim_engine *engine;
	struct scn_req *reqs;
	uint32_t n_reqs;
	double *ttft[16];
	uint32_t n_ttft[16];
	double tpot_sum[16];
	uint32_t tpot_n[16];
	uint32_t *prompt_buf;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void scn_config_defaults(struct scn_config *cfg, const struct fg_policy *p)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->policy = p;
	cfg->gateway = true;
	cfg->kv_isolation = true;
	cfg->metering = p->agent.metering;
	cfg->output_pricing = p->agent.output_pricing;
	cfg->duration_s = 60;
	cfg->drain_s = 120;
	sim_engine_config_defaults(&cfg->engine, p->replica.kv_pool_tokens);
}

static uint64_t ns(double s)
{
	return (uint64_t)(s * NS_PER_S);
}

static int cmp_arrival(const void *a, const void *b)
{
	const struct arrival *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->load < y->load ? -1 : x->load > y->load;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void send_to_engine(struct run *r, struct scn_req *q)
{
	const struct scn_load *l = NULL;
	for (uint32_t i = 0; i < r->cfg->n_loads; i++)
		if (r->cfg->loads[i].tenant == q->tenant)
			l = &r->cfg->loads[i];
	/* distinct token ids per request, so no two requests share a prefix */
	for (uint32_t i = 0; i < l->prompt_tokens; i++)
		r->prompt_buf[i] = (uint32_t)(mix(((uint64_t)q->index << 32) | i) % 128000) + 1;
	struct sim_seq_params sp = {
		.prompt = r->prompt_buf,
		.n_prompt = l->prompt_tokens,
		.max_tokens = l->max_tokens,
		.user = q,
	};
	q->seq = sim_engine_add(r->engine, &sp, q->arrival);
}

static void dispatch(struct run *r, double now)
{
	struct fg_gw_request *g;
	struct fg_gw_decision why;

	while ((g = fg_gw_expire(r->gw, ns(now), &why))) {
		struct scn_req *q = (struct scn_req *)g;
		r->out->t[q->tenant].timed_out++;
		q->done = true;
	}
	while ((g = fg_gw_dispatch(r->gw, ns(now))))
		send_to_engine(r, (struct scn_req *)g);
}

static void arrive(struct run *r, struct scn_req *q, double now)
{
	const struct scn_load *l = NULL;
	for (uint32_t i = 0; i < r->cfg->n_loads; i++)
		if (r->cfg->loads[i].tenant == q->tenant)
			l = &r->cfg->loads[i];
	struct scn_tenant_result *t = &r->out->t[q->tenant];

	t->sent++;
	if (!r->cfg->gateway) {
		t->admitted++;
		send_to_engine(r, q);
		return;
	}
	struct fg_request_shape shape = { .prompt_token_ids = l->prompt_tokens, .n = 1,
					  .max_tokens = l->max_tokens };
	struct fg_gw_decision d = fg_gw_admit(r->gw, &q->gw, q->tenant, "sim", &shape, ns(now));
	switch (d.outcome) {
	case FG_GW_QUEUED:
		t->admitted++;
		break;
	case FG_GW_RETRY_LATER:
		t->rejected++;
		q->done = true;
		break;
	case FG_GW_LONG_CONTEXT: /* no long-context pool in a one-replica scenario */
		fg_gw_abort(r->gw, &q->gw, ns(now));
		/* fall through */
	default:
		t->refused++;
		q->done = true;
		break;
	}
}

static void on_event(void *ctx, const struct sim_event *ev)
{
	struct run *r = ctx;
	struct sim_seq *s = ev->seq;
	struct scn_req *q = s->user;
	struct scn_tenant_result *t = &r->out->t[q->tenant];

	if (ev->kind == SIM_EV_PREEMPTED) {
		t->preemptions++;
		r->out->preemptions++;
		return;
	}
	/* Replica time served, as it is served: the prompt when its prefill
	 * completes (with the first token), each later token by the decode
	 * step that produced it, whose KV held prompt + n_output - 1 tokens. */
	if (ev->time <= r->cfg->duration_s) {
		if (s->n_output == 1)
			t->units_in_window += fg_request_units(&r->cm, s->n_prompt, s->cached_tokens, 0);
		else
			t->units_in_window += fg_decode_units(&r->cm, s->n_prompt + s->n_output - 1, 1);
	}
	if (s->n_output == 1 && q->tenant < 16) {
		r->ttft[q->tenant][r->n_ttft[q->tenant]++] = ev->time - q->arrival;
	}
	if (r->cfg->gateway)
		fg_gw_output(r->gw, &q->gw, s->n_output, ns(ev->time));
	if (s->finish != SIM_FINISH_NONE) {
		if (s->n_output > 1) {
			r->tpot_sum[q->tenant] += (s->last_token - s->first_token) / (s->n_output - 1);
			r->tpot_n[q->tenant]++;
		}
		t->completed++;
		if (r->cfg->gateway) {
			struct fg_usage u = { .prompt_tokens = s->n_prompt,
					      .cached_tokens = s->cached_tokens,
					      .completion_tokens = s->n_output };
			fg_gw_finish(r->gw, &q->gw, &u, ns(ev->time));
		}
		q->seq = NULL; /* the engine frees it after this callback */
		q->done = true;
	}
}

static uint32_t build_arrivals(const struct scn_config *cfg, struct arrival **out)
{
	uint32_t n = 0, cap = 1024;
	struct arrival *a = malloc(cap * sizeof(*a));

	for (uint32_t i = 0; a && i < cfg->n_loads; i++) {
		const struct scn_load *l = &cfg->loads[i];
		uint32_t count = l->burst ? l->burst
				 : (uint32_t)floor((fmin(l->stop_s, cfg->duration_s) - l->start_s) * l->rate);
		for (uint32_t k = 0; k < count; k++) {
			if (n == cap) {
				cap *= 2;
				struct arrival *b = realloc(a, cap * sizeof(*a));
				if (!b) {
					free(a);
					return (*out = NULL), 0;
				}
				a = b;
			}
			a[n].t = l->burst ? l->start_s : l->start_s + k / l->rate;
			a[n].load = i;
			n++;
		}
	}
	if (a)
		qsort(a, n, sizeof(*a), cmp_arrival);
	*out = a;
	return n;
}

int scn_run(const struct scn_config *cfg, struct scn_result *out)
{
	struct run r = { .cfg = cfg, .out = out };
	struct arrival *arr = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	out->n_tenants = cfg->policy->n_tenants < 16 ? cfg->policy->n_tenants : 16;
	fg_cost_model_init(&r.cm, &cfg->policy->replica);
	out->step_work_s = cfg->engine.max_num_batched_tokens * r.cm.prompt_token_s + r.cm.decode_step_s;

	uint32_t n = build_arrivals(cfg, &arr);
	uint32_t max_prompt = 1;
	for (uint32_t i = 0; i < cfg->n_loads; i++)
		if (cfg->loads[i].prompt_tokens > max_prompt)
			max_prompt = cfg->loads[i].prompt_tokens;
	r.reqs = calloc(n ? n : 1, sizeof(*r.reqs));
	r.prompt_buf = malloc(max_prompt * sizeof(*r.prompt_buf));
	r.gw = calloc(1, sizeof(*r.gw)); /* zeroed: fg_gw_free on any way out */
	for (uint32_t i = 0; i < 16; i++)
		r.ttft[i] = malloc((n ? n : 1) * sizeof(double));
	r.engine = sim_engine_new(&cfg->engine, &r.cm, on_event, &r);
	if (!arr || !r.reqs || !r.prompt_buf || !r.gw || !r.engine)
		goto out;
	for (uint32_t i = 0; i < 16; i++)
		if (!r.ttft[i])
			goto out;

	/* The gateway runs on a private copy so the metering override does not
	 * touch the caller's policy. */
	struct fg_policy *pol = malloc(sizeof(*pol));
	if (!pol)
		goto out;
	*pol = *cfg->policy;
	pol->agent.metering = cfg->metering;
	pol->agent.output_pricing = cfg->output_pricing;
	if (fg_gw_init(r.gw, pol, 0, 0) < 0) {
		free(pol);
		free(r.gw);
		r.gw = NULL;
		goto out;
	}
	if (!cfg->kv_isolation) {
		r.gw->kv_caps = false;
		for (uint32_t i = 0; i < r.gw->kv.slots; i++)
			fg_kv_set_cap(&r.gw->kv, i, 0);
		r.gw->kv.node_cap = 0;
	}

	double t = 0, end = cfg->duration_s + cfg->drain_s;
	uint32_t ai = 0;
	for (;;) {
		while (ai < n && arr[ai].t <= t) {
			struct scn_req *q = &r.reqs[ai];
			q->index = ai;
			q->tenant = cfg->loads[arr[ai].load].tenant;
			q->arrival = arr[ai].t;
			arrive(&r, q, t);
			ai++;
		}
		if (cfg->gateway)
			dispatch(&r, t);
		if (sim_engine_has_work(r.engine)) {
			if (sim_engine_step_begin(r.engine) < 0)
				break;
			sim_engine_step_end(r.engine);
			t = sim_engine_now(r.engine);
		} else if (ai < n) {
			t = arr[ai].t;
			sim_engine_advance_idle(r.engine, t);
		} else if (cfg->gateway && fg_gw_next_deadline(r.gw)) {
			/* waiting requests that can never be dispatched time out */
			t = (double)fg_gw_next_deadline(r.gw) / NS_PER_S;
			sim_engine_advance_idle(r.engine, t);
		} else {
			break;
		}
		if (t > end)
			break;
	}
	out->end_s = t;
	out->busy_s = sim_engine_stats(r.engine)->busy_s;
	for (uint32_t i = 0; i < out->n_tenants; i++) {
		struct scn_tenant_result *tr = &out->t[i];
		if (r.n_ttft[i]) {
			qsort(r.ttft[i], r.n_ttft[i], sizeof(double), cmp_double);
			tr->ttft_p50_s = r.ttft[i][(r.n_ttft[i] - 1) / 2];
			tr->ttft_p99_s = r.ttft[i][(uint32_t)ceil(0.99 * r.n_ttft[i]) - 1];
			tr->ttft_max_s = r.ttft[i][r.n_ttft[i] - 1];
		}
		if (r.tpot_n[i])
			tr->tpot_mean_s = r.tpot_sum[i] / r.tpot_n[i];
	}
	/* Unfinished work is dropped: abort so the gateway's books stay sane. */
	for (uint32_t i = 0; i < ai; i++)
		if (!r.reqs[i].done && cfg->gateway)
			fg_gw_abort(r.gw, &r.reqs[i].gw, ns(t));
	free(pol);
	rc = 0;
out:
	if (r.engine)
		sim_engine_free(r.engine);
	for (uint32_t i = 0; i < 16; i++)
		free(r.ttft[i]);
	free(r.prompt_buf);
	free(r.reqs);
	if (r.gw)
		fg_gw_free(r.gw);
	free(r.gw);
	free(arr);
	return rc;
}

double scn_share(const struct scn_result *r, uint32_t tenant)
{
	double total = 0;

	for (uint32_t i = 0; i < r->n_tenants; i++)
		total += r->t[i].units_in_window;
	return total > 0 && tenant < r->n_tenants ? r->t[tenant].units_in_window / total : 0;
}
