/* metrics.c — Prometheus text exposition (format 0.0.4) on
 * agent.metrics_listen: a tiny HTTP/1.x responder on the agent's loop that
 * renders the proxy's counters and the gateway's state (buckets, queues,
 * KV, engine window, peaks, overload) on each scrape. One response per
 * connection (scrapers reconnect), read and write bounded, each connection
 * within a deadline; when every slot is taken the oldest connection that has
 * not sent its request yet makes room, so idle connections cannot blind
 * the scrapes; with agent.metrics_token_file only its bearer token is
 * answered. */
#include <errno.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/http/engine_scrape.h"
#include "agent/fleet/fleet.h"
#include "agent/kernel/kernel.h"
#include "agent/proxy/identity.h"
#include "agent/proxy/proxy_internal.h"
#include "agent/proxy/workers.h"

#define MAX_REQUEST 8192
#define MAX_SCRAPERS 64
/* a whole scrape, connect to last byte: Prometheus' default scrape_timeout */
#define SCRAPE_DEADLINE_NS (10ull * 1000000000ull)

static const double decision_bounds_s[FG_DECISION_BUCKETS] = {
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
	5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 1e-1,
};

struct scrape {
	struct fg_link link;
	struct fg_proxy *px;
	int fd;
	struct fg_buf in, out;
	uint64_t timer;           /* the deadline */
	bool asked;               /* its request is in: never evicted */
};

static int n_scrapers;
static struct fg_link scrapers = { &scrapers, &scrapers };

static const double tokenize_bounds_s[FG_DECISION_BUCKETS] = {
	1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
	5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

void fg_metrics_observe_tokenize(struct fg_metrics *m, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < FG_DECISION_BUCKETS && s > tokenize_bounds_s[i])
		i++;
	m->tokenize_hist[i]++;
	m->tokenize_count++;
	m->tokenize_sum_s += s;
}

void fg_metrics_observe_decision(struct fg_metrics *m, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < FG_DECISION_BUCKETS && s > decision_bounds_s[i])
		i++;
	m->decision_hist[i]++;
	m->decision_count++;
	m->decision_sum_s += s;
}

/* Label values: backslash, quote and newline escaped. */
static void label(struct fg_buf *o, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fg_buf_printf(o, "\\%c", *v);
		else if (*v == '\n')
			fg_buf_printf(o, "\\n");
		else
			fg_buf_append(o, v, 1);
	}
}

static void help(struct fg_buf *o, const char *name, const char *type, const char *text)
{
	fg_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static void histogram(struct fg_buf *o, const char *name, const char *text,
		      const double *bounds, const uint64_t *hist, uint64_t count, double sum)
{
	uint64_t cum = 0;

	help(o, name, "histogram", text);
	for (int i = 0; i < FG_DECISION_BUCKETS; i++) {
		cum += hist[i];
		fg_buf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
	}
	cum += hist[FG_DECISION_BUCKETS];
	fg_buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
	fg_buf_printf(o, "%s_sum %.9g\n%s_count %llu\n", name, sum, name, (unsigned long long)count);
}

typedef double (*tenant_value)(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now);

static struct fg_gw_tenant *gwt(struct fg_gateway *gw, const struct fg_tenant_rt *t)
{
	return &gw->t[t->id];
}
static double v_billed(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)gw; (void)now; return t->units_billed; }
static double v_out_tokens(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->billed_output_tokens; }
static double v_out_units(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->billed_output_units; }
static double v_refunded(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)gw; (void)now; return t->units_refunded; }
static double v_level(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ return fg_bucket_level(&gwt(gw, t)->bucket, now); }
static double v_depth(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->bucket.depth; }
static double v_rate(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->bucket.rate; }
static double v_reserved(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->reserved_units; }
static double v_queued(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gw->fq.t[t->id].queued; }
static double v_inflight(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->inflight - v_queued(gw, t, now); }
static double v_deny(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)gw; return t->deny_published_ns > now; }
static double v_typical(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gwt(gw, t)->typical_cost; }
static double v_kv(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return (double)gw->kv.reserved[t->id]; }
static double v_kv_cap(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return (double)gw->kv.cap[t->id]; }
static double v_vtc(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gw->fq.t[t->id].vtc; }
static double v_served(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gw->fq.t[t->id].served_units; }
static double v_peak(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return gw->peaks.peak[t->id]; }
static double v_long(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)gw; (void)now; return (double)t->long_context; }
static double v_clamped(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return (double)gwt(gw, t)->usage_clamped; }
static double v_exact(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return (double)gwt(gw, t)->exact_counts; }
static double v_cut(struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{ (void)now; return (double)gwt(gw, t)->cut_off; }

struct tenant_metric {
	const char *name, *type;
	tenant_value fn;
	const char *help;
};

static const struct tenant_metric tenant_metrics[] = {
	{ "fairgate_tenant_units_total", "counter", v_billed,
	  "Units billed to the tenant at settlement (1 unit = one uncached prompt token of replica time)." },
	{ "fairgate_tenant_output_tokens_total", "counter", v_out_tokens,
	  "Completion tokens billed at settlement (at most what was reserved)." },
	{ "fairgate_tenant_output_units_total", "counter", v_out_units,
	  "Units billed for those tokens: each at the replica time of the decode step that made it, which grows with the context (agent.output_pricing: context), or at the flat weight." },
	{ "fairgate_tenant_refunded_units_total", "counter", v_refunded,
	  "Units reserved at admission and given back at settlement." },
	{ "fairgate_tenant_bucket_units", "gauge", v_level,
	  "Token bucket level in units (negative = debt)." },
	{ "fairgate_tenant_bucket_depth_units", "gauge", v_depth,
	  "Token bucket depth (burst_s x units_per_s)." },
	{ "fairgate_tenant_rate_units_per_second", "gauge", v_rate,
	  "Contracted refill rate." },
	{ "fairgate_tenant_reserved_units", "gauge", v_reserved,
	  "Units reserved by admitted requests not yet settled." },
	{ "fairgate_tenant_inflight_requests", "gauge", v_inflight,
	  "Admitted requests inside the engine." },
	{ "fairgate_tenant_queued_requests", "gauge", v_queued,
	  "Admitted requests waiting in the gateway queue." },
	{ "fairgate_tenant_deny_window_open", "gauge", v_deny,
	  "1 while the kernel holds this tenant's new connections (quota deny window)." },
	{ "fairgate_tenant_typical_request_units", "gauge", v_typical,
	  "Moving average of the tenant's request price." },
	{ "fairgate_tenant_kv_reserved_tokens", "gauge", v_kv,
	  "KV tokens reserved by the tenant's requests in the engine (n x (prompt + max output))." },
	{ "fairgate_tenant_kv_cap_tokens", "gauge", v_kv_cap,
	  "The tenant's cap on reserved KV tokens per replica (tier kv_cap_tokens; 0 = none)." },
	{ "fairgate_tenant_virtual_service_units", "gauge", v_vtc,
	  "The fair queue's virtual service counter: service received / tier weight." },
	{ "fairgate_tenant_served_units_total", "counter", v_served,
	  "Units charged to the fair queue (prompt at dispatch, output as it streams)." },
	{ "fairgate_tenant_peak_units_per_second", "gauge", v_peak,
	  "Highest units/s billed in one peak window (agent.peak_window_s)." },
	{ "fairgate_tenant_long_context_requests_total", "counter", v_long,
	  "Requests sent to the long-context pool." },
	{ "fairgate_tenant_usage_clamped_total", "counter", v_clamped,
	  "Settlements where the engine reported more prompt tokens than the request's bytes can make (billed at that bound: an engine miscount is not the tenant's debt)." },
	{ "fairgate_tenant_exact_counts_total", "counter", v_exact,
	  "Admissions decided on the engine's own prompt count (/tokenize)." },
	{ "fairgate_tenant_cut_off_total", "counter", v_cut,
	  "Streams ended at their first chunk: the engine's prompt count broke max_context or the KV cap." },
};

static void per_tenant(struct fg_buf *o, struct fg_proxy *px, const struct tenant_metric *m,
		       uint64_t now)
{
	help(o, m->name, m->type, m->help);
	for (uint32_t i = 0; i < px->tenants.n; i++) {
		struct fg_tenant_rt *t = px->tenants.by_id[i];
		fg_buf_printf(o, "%s{tenant=\"", m->name);
		label(o, t->name);
		fg_buf_printf(o, "\"} %.17g\n", m->fn(px->gw, t, now));
	}
}

static double n_unauthenticated_total(const struct fg_proxy *px)
{ return (double)(px->metrics.unauthenticated); }
static double n_metrics_unauthorized_total(const struct fg_proxy *px)
{ return (double)(px->metrics.metrics_unauthorized); }
static double n_metrics_connections_evicted_total(const struct fg_proxy *px)
{ return (double)(px->metrics.scrapers_evicted); }
static double n_client_connections_limit(const struct fg_proxy *px)
{ return (double)(px->max_connections); }
static double n_buffered_bytes(const struct fg_proxy *px)
{ return (double)(px->buffered); }
static double n_buffered_bytes_limit(const struct fg_proxy *px)
{ return (double)(px->max_buffered); }
static double n_over_budget_total(const struct fg_proxy *px)
{ return (double)(px->metrics.over_budget); }
static double n_malformed_requests_total(const struct fg_proxy *px)
{ return (double)(px->metrics.malformed); }
static double n_client_connections_total(const struct fg_proxy *px)
{ return (double)(px->metrics.connections_total); }
static double n_client_connections(const struct fg_proxy *px)
{ return (double)(px->n_clients); }
static double n_engine_connects_total(const struct fg_proxy *px)
{ return (double)(px->metrics.engine_connects); }
static double n_engine_failures_total(const struct fg_proxy *px)
{ return (double)(px->metrics.engine_failures); }
static double n_engine_retries_total(const struct fg_proxy *px)
{ return (double)(px->metrics.engine_retries); }
static double n_kernel_enforcement(const struct fg_proxy *px)
{ return (double)(px->st->kernel != NULL); }

struct node_metric {
	const char *name, *type;
	double (*get)(const struct fg_proxy *px);
	const char *help;
};

/* The node's plain numbers, one line each. */
static const struct node_metric node_metrics[] = {
	{ "fairgate_unauthenticated_total", "counter", n_unauthenticated_total,
	  "Requests refused with 401." },
	{ "fairgate_metrics_unauthorized_total", "counter", n_metrics_unauthorized_total,
	  "Scrapes refused with 401: agent.metrics_token_file's token missing or wrong." },
	{ "fairgate_metrics_connections_evicted_total", "counter", n_metrics_connections_evicted_total,
	  "Metrics connections that had not sent a request, closed to make room for a new one." },
	{ "fairgate_client_connections_limit", "gauge", n_client_connections_limit,
	  "agent.limits.max_connections, or the default derived from the fd limit." },
	{ "fairgate_buffered_bytes", "gauge", n_buffered_bytes,
	  "Bytes the agent holds for clients now, all together: request bodies, their rewritten copies, relay buffers, response copies." },
	{ "fairgate_buffered_bytes_limit", "gauge", n_buffered_bytes_limit,
	  "agent.limits.max_buffered_bytes, or the default derived from the memory limit." },
	{ "fairgate_over_budget_total", "counter", n_over_budget_total,
	  "Requests refused with 503 because their body would pass the buffered-bytes budget." },
	{ "fairgate_malformed_requests_total", "counter", n_malformed_requests_total,
	  "Requests refused before a tenant was known (bad HTTP, oversize, timeouts)." },
	{ "fairgate_client_connections_total", "counter", n_client_connections_total,
	  "Client connections accepted." },
	{ "fairgate_client_connections", "gauge", n_client_connections,
	  "Client connections open." },
	{ "fairgate_engine_connects_total", "counter", n_engine_connects_total,
	  "Connections opened to the engine." },
	{ "fairgate_engine_failures_total", "counter", n_engine_failures_total,
	  "Exchanges the engine failed (refused connection, reset, timeout, bad response)." },
	{ "fairgate_engine_retries_total", "counter", n_engine_retries_total,
	  "Requests retried once on a fresh connection after a dead pooled one." },
	{ "fairgate_kernel_enforcement", "gauge", n_kernel_enforcement,
	  "1 when the BPF datapath is active." },
};

/* agent.calibration: the same prices under the policy's model (assumed),
 * the fit of the engine's steps (measured, once valid) and what the
 * gateway charges (charged: the assumed, or under `on` the followed). */
struct model_metric {
	const char *name;
	double (*get)(const struct fg_cost_model *cm);
	const char *help;
};
static double m_weight(const struct fg_cost_model *cm) { return cm->output_weight; }
static double m_prompt(const struct fg_cost_model *cm) { return cm->prompt_token_s; }
static double m_step(const struct fg_cost_model *cm) { return cm->decode_step_s; }
static double m_budget(const struct fg_cost_model *cm) { return cm->replica_units_per_s; }
static double m_ctx(const struct fg_cost_model *cm)
{
	return cm->output_s_per_context / cm->prompt_token_s;
}
static const struct model_metric model_metrics[] = {
	{ "fairgate_calibration_output_weight", m_weight,
	  "Units of an output token at the reference batch and context, by model." },
	{ "fairgate_calibration_output_units_per_context_token", m_ctx,
	  "Units an output token costs more per token of context it decodes against." },
	{ "fairgate_calibration_prompt_token_seconds", m_prompt,
	  "Replica time of one uncached prompt token (one unit), by model." },
	{ "fairgate_calibration_decode_step_seconds", m_step,
	  "A decode step of the reference batch at the reference context, by model." },
	{ "fairgate_calibration_replica_units_per_second", m_budget,
	  "The replica budget: ceiling / prompt-token time, by model." },
};

static void calibration_metrics(struct fg_buf *o, const struct fg_proxy *px)
{
	const struct fg_pcal *pc = px->calib;
	const struct fg_calib_fit *f = &pc->fit.fit;
	static const char *const modes[] = { "advise", "off", "on" };
	const struct { const char *label; const struct fg_cost_model *cm; } models[] = {
		{ "assumed", &pc->fit.assumed },
		{ "measured", f->valid ? &f->cm : NULL },
		{ "charged", &px->gw->cm },
	};

	help(o, "fairgate_calibration_mode", "gauge", "agent.calibration (1 on the mode in force).");
	for (int i = 0; i < 3; i++)
		fg_buf_printf(o, "fairgate_calibration_mode{mode=\"%s\"} %d\n", modes[i],
			      (int)pc->mode == i);
	help(o, "fairgate_calibration_valid", "gauge",
	     "1 while the fit of the engine's steps has enough observations in its window.");
	fg_buf_printf(o, "fairgate_calibration_valid %d\n", f->valid);
	help(o, "fairgate_calibration_term_identified", "gauge",
	     "1 while the fit measures the term (within 10% and inside its box): under `on` only "
	     "identified terms move the charged prices (prompt_token, step, per_context).");
	const struct { const char *term; bool identified; } terms[] = {
		{ "prompt_token", f->prompt_identified },
		{ "step", f->step_identified },
		{ "per_context", f->context_identified },
	};
	for (size_t i = 0; i < sizeof(terms) / sizeof(terms[0]); i++)
		fg_buf_printf(o, "fairgate_calibration_term_identified{term=\"%s\"} %d\n",
			      terms[i].term, f->valid && terms[i].identified);
	help(o, "fairgate_calibration_steps_total", "counter",
	     "Engine steps the proxy saw in its streams, by whether they were observed "
	     "(unambiguous) or not.");
	fg_buf_printf(o, "fairgate_calibration_steps_total{observed=\"true\"} %llu\n",
		      (unsigned long long)pc->steps_observed);
	fg_buf_printf(o, "fairgate_calibration_steps_total{observed=\"false\"} %llu\n",
		      (unsigned long long)(pc->steps_seen - pc->steps_observed));
	help(o, "fairgate_calibration_observations_total", "counter",
	     "Observations taken into the fit's window, by source: steps seen in the streams, "
	     "and intervals of the engine's timing histograms (mean inter-token time, mean "
	     "prefill time).");
	static const char *const sources[FG_CALIB_SOURCES] = { "streams", "engine_decode",
							       "engine_prefill" };
	const struct fg_calib_hist *h = &pc->hist;
	const uint64_t taken[FG_CALIB_SOURCES] = { pc->fit.taken,
						   h->observed[FG_CALIB_SRC_ENGINE_DECODE],
						   h->observed[FG_CALIB_SRC_ENGINE_PREFILL] };
	for (int i = 0; i < FG_CALIB_SOURCES; i++)
		fg_buf_printf(o, "fairgate_calibration_observations_total{source=\"%s\"} %llu\n",
			      sources[i], (unsigned long long)taken[i]);
	help(o, "fairgate_calibration_observations_used", "gauge",
	     "Observations the current fit used, by source.");
	for (int i = 0; i < FG_CALIB_SOURCES; i++)
		fg_buf_printf(o, "fairgate_calibration_observations_used{source=\"%s\"} %u\n",
			      sources[i], f->used[i]);
	help(o, "fairgate_calibration_engine_resets_total", "counter",
	     "Times the engine's counters went back between scrapes (a restart): that interval "
	     "was dropped.");
	fg_buf_printf(o, "fairgate_calibration_engine_resets_total %llu\n",
		      (unsigned long long)h->resets);
	help(o, "fairgate_calibration_sharp_changes_total", "counter",
	     "Times the measured output weight moved 20% from the last one reported (each logged once).");
	fg_buf_printf(o, "fairgate_calibration_sharp_changes_total %llu\n",
		      (unsigned long long)pc->sharp_changes);
	help(o, "fairgate_calibration_inter_token_seconds", "gauge",
	     "Mean time between a sequence's tokens between the last two engine scrapes: the "
	     "engine's own (vllm:inter_token_latency_seconds) and the steps the proxy saw.");
	if (pc->engine_itl_s > 0) {
		fg_buf_printf(o, "fairgate_calibration_inter_token_seconds{source=\"engine\"} %.17g\n",
			      pc->engine_itl_s);
		fg_buf_printf(o, "fairgate_calibration_inter_token_seconds{source=\"proxy\"} %.17g\n",
			      pc->proxy_itl_s);
	}
	for (size_t k = 0; k < sizeof(model_metrics) / sizeof(*model_metrics); k++) {
		help(o, model_metrics[k].name, "gauge", model_metrics[k].help);
		for (int i = 0; i < 3; i++)
			if (models[i].cm)
				fg_buf_printf(o, "%s{model=\"%s\"} %.17g\n", model_metrics[k].name,
					      models[i].label, model_metrics[k].get(models[i].cm));
	}
}

static void node_value(struct fg_buf *o, const char *name, const char *type, const char *text,
		       double v)
{
	help(o, name, type, text);
	fg_buf_printf(o, "%s %.17g\n", name, v);
}

char *fg_metrics_render(struct fg_proxy *px, size_t *len)
{
	struct fg_buf o = { 0 };
	struct fg_metrics *m = &px->metrics;
	uint64_t now = fg_now_ns();

	for (size_t i = 0; i < sizeof(tenant_metrics) / sizeof(*tenant_metrics); i++)
		per_tenant(&o, px, &tenant_metrics[i], now);

	help(&o, "fairgate_requests_total", "counter", "Requests by tenant and outcome.");
	for (uint32_t i = 0; i < px->tenants.n; i++) {
		struct fg_tenant_rt *t = px->tenants.by_id[i];
		for (int k = 0; k < FG_OUT_N; k++) {
			fg_buf_printf(&o, "fairgate_requests_total{tenant=\"");
			label(&o, t->name);
			fg_buf_printf(&o, "\",outcome=\"%s\"} %llu\n", fg_outcome_names[k],
				      (unsigned long long)t->outcomes[k]);
		}
	}

	histogram(&o, "fairgate_decision_seconds",
		  "Admission decision latency: parse, price, bucket, rewrite.", decision_bounds_s,
		  m->decision_hist, m->decision_count, m->decision_sum_s);

	for (size_t i = 0; i < sizeof(node_metrics) / sizeof(*node_metrics); i++) {
		help(&o, node_metrics[i].name, node_metrics[i].type, node_metrics[i].help);
		fg_buf_printf(&o, "%s %.17g\n", node_metrics[i].name, node_metrics[i].get(px));
	}
	help(&o, "fairgate_connections_refused_total", "counter",
	     "Client connections answered 503 and closed at accept, by the cap they met.");
	fg_buf_printf(&o, "fairgate_connections_refused_total{cap=\"total\"} %llu\n",
		      (unsigned long long)px->conns.refused_total);
	fg_buf_printf(&o, "fairgate_connections_refused_total{cap=\"per_source\"} %llu\n",
		      (unsigned long long)px->conns.refused_per_source);
	help(&o, "fairgate_worker_connections_total", "counter",
	     "Client connections each proxy worker accepted (agent.workers; the kernel spreads them over the workers' SO_REUSEPORT listeners).");
	for (uint32_t i = 0; i < fg_workers_count(px->workers); i++)
		fg_buf_printf(&o, "fairgate_worker_connections_total{worker=\"%u\"} %llu\n", i,
			      (unsigned long long)fg_workers_accepted(px->workers, i));
	uint64_t held, wait;
	if (fg_workers_lock_times(px->workers, 0, &held, &wait)) {
		help(&o, "fairgate_worker_lock_held_seconds_total", "counter",
		     "Time each proxy worker held the lock the workers share (agent.workers > 1): "
		     "what it runs under it is serial across workers.");
		for (uint32_t i = 0; fg_workers_lock_times(px->workers, i, &held, &wait); i++)
			fg_buf_printf(&o, "fairgate_worker_lock_held_seconds_total{worker=\"%u\"} %.6f\n", i,
				      (double)held / 1e9);
		help(&o, "fairgate_worker_lock_wait_seconds_total", "counter",
		     "Time each proxy worker waited to take the workers' shared lock.");
		for (uint32_t i = 0; fg_workers_lock_times(px->workers, i, &held, &wait); i++)
			fg_buf_printf(&o, "fairgate_worker_lock_wait_seconds_total{worker=\"%u\"} %.6f\n", i,
				      (double)wait / 1e9);
		uint64_t own, others, back;
		help(&o, "fairgate_worker_engine_sends_total", "counter",
		     "Requests each proxy worker sent to the engine after its pass, without the shared lock: "
		     "for its own connections, and for other workers' while their threads may sleep.");
		for (uint32_t i = 0; fg_workers_send_counts(px->workers, i, &own, &others, &back); i++) {
			fg_buf_printf(&o, "fairgate_worker_engine_sends_total{worker=\"%u\",for=\"own\"} %llu\n",
				      i, (unsigned long long)own);
			fg_buf_printf(&o, "fairgate_worker_engine_sends_total{worker=\"%u\",for=\"others\"} %llu\n",
				      i, (unsigned long long)others);
		}
		help(&o, "fairgate_worker_engine_sends_handed_back_total", "counter",
		     "Of the requests a worker sent for another's connections, those that did not all go at once "
		     "and went back to the owner to finish.");
		for (uint32_t i = 0; fg_workers_send_counts(px->workers, i, &own, &others, &back); i++)
			fg_buf_printf(&o, "fairgate_worker_engine_sends_handed_back_total{worker=\"%u\"} %llu\n",
				      i, (unsigned long long)back);
	}
	help(&o, "fairgate_engine_connections", "gauge", "Connections to the engine by state.");
	fg_buf_printf(&o, "fairgate_engine_connections{state=\"busy\"} %u\n", px->n_busy);
	fg_buf_printf(&o, "fairgate_engine_connections{state=\"idle\"} %u\n",
		      px->engine.n_idle + px->long_pool.n_idle);
	help(&o, "fairgate_engine_connection_moves_total", "counter",
	     "Pooled engine connections moved to the worker of the client that took them (agent.workers > 1).");
	fg_buf_printf(&o, "fairgate_engine_connection_moves_total %llu\n",
		      (unsigned long long)px->metrics.engine_moves);
	help(&o, "fairgate_heap_give_backs_total", "counter",
	     "Times the agent handed its heap's free pages back to the kernel after a burst (malloc_trim).");
	fg_buf_printf(&o, "fairgate_heap_give_backs_total %llu\n", (unsigned long long)px->heap.given);
	help(&o, "fairgate_heap_free_bytes", "gauge",
	     "Free bytes in the agent's heap (resident or given back), glibc's count.");
	fg_buf_printf(&o, "fairgate_heap_free_bytes %zu\n", fg_heap_free_bytes());
	const struct fg_gateway *gw = px->gw;
	double prior = gw->policy->replica.model.chars_per_token;
	help(&o, "fairgate_tenant_chars_per_token", "gauge",
	     "Prompt characters per token a tenant's estimates use, by model: learned from that "
	     "tenant's own usage only (every tenant starts from replica.model.chars_per_token).");
	for (uint32_t i = 0; i < px->tenants.n; i++) {
		const struct fg_tenant_rt *t = px->tenants.by_id[i];
		const struct fg_calibration *cal = &gw->t[t->id].cal;
		for (int k = 0; k < FG_CAL_SLOTS; k++) {
			const struct fg_cal_slot *sl = &cal->s[k];
			if (!sl->model || !sl->samples || sl->model > gw->models.n)
				continue;
			fg_buf_printf(&o, "fairgate_tenant_chars_per_token{tenant=\"");
			label(&o, t->name);
			fg_buf_printf(&o, "\",model=\"");
			label(&o, gw->models.name[sl->model - 1]);
			fg_buf_printf(&o, "\"} %.6g\n", fg_chars_per_token(cal, sl->model, prior));
		}
	}
	help(&o, "fairgate_refused_paths_total", "counter",
	     "Requests answered by the proxy for their target: 400 not canonical, 404 not an "
	     "endpoint it forwards, 405 not with that method.");
	for (int k = 0; k < 3; k++)
		fg_buf_printf(&o, "fairgate_refused_paths_total{status=\"%d\"} %llu\n",
			      k == 0 ? 400 : k == 1 ? 404 : 405,
			      (unsigned long long)m->refused_path[k]);
	help(&o, "fairgate_tokenize_requests_total", "counter",
	     "Exact prompt counts asked of the engine's /tokenize before admission, by outcome.");
	static const char *const tok_outcomes[3] = { "ok", "failed", "timeout" };
	for (int k = 0; k < 3; k++)
		fg_buf_printf(&o, "fairgate_tokenize_requests_total{outcome=\"%s\"} %llu\n",
			      tok_outcomes[k], (unsigned long long)m->tokenize[k]);
	histogram(&o, "fairgate_tokenize_seconds",
		  "Time admission waited for the engine's /tokenize.", tokenize_bounds_s,
		  m->tokenize_hist, m->tokenize_count, m->tokenize_sum_s);
	node_value(&o, "fairgate_queued_requests", "gauge", "Requests waiting in the gateway's queues.",
		   fg_fq_total_queued(&gw->fq));
	node_value(&o, "fairgate_queue_backlog_seconds", "gauge",
		   "Queued work in seconds of replica time at full speed (drives overload shedding).",
		   fg_gw_backlog_s(gw));
	node_value(&o, "fairgate_kv_reserved_tokens", "gauge",
		   "KV tokens reserved on the engine by all tenants.", (double)gw->kv.node_reserved);
	node_value(&o, "fairgate_kv_reservable_tokens", "gauge",
		   "kv_pool_tokens x agent.kv_headroom.", (double)gw->kv.node_cap);
	node_value(&o, "fairgate_engine_window_pending_requests", "gauge",
		   "Requests sent to the engine and not started (no first token, or not yet shown "
		   "running by the engine's counts).", gw->ew.pending_requests);
	node_value(&o, "fairgate_engine_window_pending_tokens", "gauge",
		   "Their prefill tokens (the window holds agent.engine_queue_steps x step tokens).",
		   (double)gw->ew.pending_tokens);
	node_value(&o, "fairgate_engine_window_budget_tokens", "gauge",
		   "Prefill tokens the engine may have waiting (engine_queue_steps x step tokens).",
		   fg_ew_budget_tokens(&gw->ew));
	node_value(&o, "fairgate_engine_window_waiting_limit", "gauge",
		   "Requests the engine may have waiting (engine_queue_steps x 4).",
		   fg_ew_waiting_limit(&gw->ew));
	node_value(&o, "fairgate_engine_window_extra_waiting", "gauge",
		   "Requests waiting in the engine that the window did not send (other clients, "
		   "preempted sequences); they count against the window.", gw->ew.engine_extra);
	node_value(&o, "fairgate_engine_window_started_by_counts_total", "counter",
		   "Non-streamed requests the engine's running/waiting counts showed started.",
		   (double)gw->ew.started_by_engine);
	node_value(&o, "fairgate_overload_level", "gauge",
		   "Tier rank at and below which the kernel sheds new connections (-1 = none).",
		   px->overload_level);
	node_value(&o, "fairgate_overload_changes_total", "counter",
		   "Times the published overload level changed.", (double)px->overload_changes);
	node_value(&o, "fairgate_node_peak_units_per_second", "gauge",
		   "Highest units/s the node billed in one peak window.", gw->peaks.peak_node);
	node_value(&o, "fairgate_oversubscription_ratio", "gauge",
		   "Sum of tenant peaks / node peak (0 before the first closed window).",
		   fg_peak_oversubscription(&gw->peaks));
	node_value(&o, "fairgate_engine_preemptions_total", "counter",
		   "Preemptions the engine reported (vllm:num_preemptions_total) since this agent started.",
		   (double)px->engine_preemptions);
	node_value(&o, "fairgate_engine_scrape_failures_total", "counter",
		   "Scrapes of the engine's /metrics that failed.",
		   px->scrape ? (double)fg_engine_scrape_failures(px->scrape) : 0);
	node_value(&o, "fairgate_engine_scrape_successes_total", "counter",
		   "Scrapes of the engine's /metrics that succeeded.",
		   px->scrape ? (double)fg_engine_scrape_successes(px->scrape) : 0);
	node_value(&o, "fairgate_engine_metrics_up", "gauge",
		   "1 while the engine's metrics are fresh (they cross-check the engine window).",
		   px->engine_metrics_known);
	if (px->engine_metrics_known) {
		node_value(&o, "fairgate_engine_waiting_requests", "gauge",
			   "vllm:num_requests_waiting as last scraped.", px->engine_waiting);
		node_value(&o, "fairgate_engine_running_requests", "gauge",
			   "vllm:num_requests_running as last scraped.", px->engine_running);
	}


	struct fg_src_index_stats ix;
	if (fg_kernel_source_index(px->st, &ix)) {
		node_value(&o, "fairgate_source_index_valid", "gauge",
			   "1 while gate's source index answers (else its cache and the maps do).",
			   ix.valid);
		node_value(&o, "fairgate_source_index_rebuilds_total", "counter",
			   "Source index rebuilds published.", (double)ix.rebuilds);
		node_value(&o, "fairgate_source_index_failed_total", "counter",
			   "Source index rebuilds that could not be built.", (double)ix.failed);
		node_value(&o, "fairgate_source_index_learned", "gauge",
			   "Learned sources in the last rebuild.", ix.learned);
		node_value(&o, "fairgate_source_index_cidrs", "gauge",
			   "Policy CIDRs in the last rebuild.", ix.statics);
	}

	calibration_metrics(&o, px);
	fg_fleet_metrics(px, &o);

	if (fg_buf_append(&o, "", 1)) { /* NUL for callers that print it */
		fg_buf_free(&o);
		return NULL;
	}
	*len = fg_buf_used(&o) - 1;
	return o.data;
}

/* ---- the scrape endpoint ------------------------------------------------ */

static void scrape_close(struct scrape *s)
{
	if (s->timer)
		fg_loop_timer_cancel(s->px->st->loop, s->timer);
	fg_loop_del(s->px->st->loop, s->fd);
	close(s->fd);
	fg_buf_free(&s->in);
	fg_buf_free(&s->out);
	fg_link_del(&s->link);
	n_scrapers--;
	free(s);
}

static void scrape_deadline(struct fg_loop *loop, void *ctx)
{
	struct scrape *s = ctx;
	(void)loop;

	s->timer = 0;
	scrape_close(s);
}

/* The bearer token of the request head (NUL-terminated text) equals
 * agent.metrics_token_file's, compared in constant time. */
static bool token_ok(const struct fg_proxy *px, const char *req)
{
	size_t want = strlen(px->metrics_token);

	for (const char *line = strchr(req, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
		const char *h = line + 1;
		if (strncasecmp(h, "authorization:", 14))
			continue;
		const char *v = h + 14, *end = strpbrk(v, "\r\n");
		size_t tlen = 0;
		const char *tok = fg_bearer_token(v, end ? (size_t)(end - v) : strlen(v), &tlen);
		return tok && tlen == want && !CRYPTO_memcmp(tok, px->metrics_token, want);
	}
	return false;
}

static void scrape_answer(struct scrape *s)
{
	const char *req = fg_buf_head(&s->in);
	bool get = !strncmp(req, "GET ", 4), head = !strncmp(req, "HEAD ", 5);
	const char *path = get ? req + 4 : head ? req + 5 : "";
	bool known = !strncmp(path, "/metrics", 8) && (path[8] == ' ' || path[8] == '?');

	if (!(get || head) || !known) {
		fg_buf_printf(&s->out, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
				       "Content-Length: 10\r\nConnection: close\r\n\r\nnot found\n");
		return;
	}
	if (s->px->metrics_token[0] && !token_ok(s->px, req)) {
		s->px->metrics.metrics_unauthorized++;
		fg_buf_printf(&s->out, "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n"
				       "WWW-Authenticate: Bearer\r\nContent-Length: 13\r\n"
				       "Connection: close\r\n\r\nunauthorized\n");
		return;
	}
	size_t len = 0;
	char *body = fg_metrics_render(s->px, &len);
	if (!body) {
		fg_buf_printf(&s->out, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
				       "Connection: close\r\n\r\n");
		return;
	}
	fg_buf_printf(&s->out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			       "Content-Length: %zu\r\nConnection: close\r\n\r\n", len);
	if (get)
		fg_buf_append(&s->out, body, len);
	free(body);
}

static void scrape_cb(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct scrape *s = ctx;
	(void)events;

	if (!fg_buf_used(&s->out)) {
		for (;;) {
			if (fg_buf_reserve(&s->in, 1024)) {
				scrape_close(s);
				return;
			}
			ssize_t n = recv(fd, s->in.data + s->in.len, s->in.cap - s->in.len - 1, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n <= 0 || s->in.len + (size_t)n > MAX_REQUEST) {
				scrape_close(s);
				return;
			}
			s->in.len += (size_t)n;
			s->in.data[s->in.len] = 0;
		}
		if (!strstr(fg_buf_head(&s->in), "\r\n\r\n") && !strstr(fg_buf_head(&s->in), "\n\n"))
			return;
		s->asked = true;
		scrape_answer(s);
		fg_loop_mod(loop, fd, EPOLLOUT);
	}
	while (fg_buf_used(&s->out)) {
		ssize_t n = send(fd, fg_buf_head(&s->out), fg_buf_used(&s->out), MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;
		fg_buf_consume(&s->out, (size_t)n);
	}
	scrape_close(s);
}

static void metrics_accept(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_proxy *px = ctx;
	(void)events;

	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (fg_loop_accept_failed(loop, fd, errno)) /* parks the listener on EMFILE */
				return;
			continue;
		}
		if (n_scrapers >= MAX_SCRAPERS) {
			/* the oldest that has not asked yet makes room (the list
			 * is newest first); if all are being answered, this waits */
			struct scrape *idle = NULL;
			for (struct fg_link *l = scrapers.next; l != &scrapers; l = l->next) {
				struct scrape *o = fg_container_of(l, struct scrape, link);
				if (!o->asked)
					idle = o;
			}
			if (idle) {
				px->metrics.scrapers_evicted++;
				scrape_close(idle);
			}
		}
		struct scrape *s = n_scrapers < MAX_SCRAPERS ? calloc(1, sizeof(*s)) : NULL;
		if (!s || fg_loop_add(loop, cfd, EPOLLIN | EPOLLRDHUP, scrape_cb, s)) {
			free(s);
			close(cfd);
			continue;
		}
		s->px = px;
		s->fd = cfd;
		s->timer = fg_loop_timer(loop, SCRAPE_DEADLINE_NS, scrape_deadline, s);
		fg_link_add(&scrapers, &s->link);
		n_scrapers++;
	}
}

int fg_metrics_start(struct fg_proxy *px, char *err, size_t errlen)
{
	const struct fg_hostport *hp = &px->st->policy->agent.metrics_listen;

	if (!hp->host[0] || !hp->port)
		return 0; /* metrics off */
	px->metrics.listen_fd = fg_proxy_listen(hp, false, err, errlen, "agent.metrics_listen");
	if (px->metrics.listen_fd < 0)
		return -1;
	if (fg_loop_add(px->st->loop, px->metrics.listen_fd, EPOLLIN, metrics_accept, px)) {
		snprintf(err, errlen, "agent.metrics_listen: epoll: %s", strerror(errno));
		close(px->metrics.listen_fd);
		px->metrics.listen_fd = -1;
		return -1;
	}
	return 0;
}

void fg_metrics_stop(struct fg_proxy *px)
{
	while (!fg_link_empty(&scrapers))
		scrape_close(fg_container_of(scrapers.next, struct scrape, link));
	if (px->metrics.listen_fd < 0)
		return;
	fg_loop_del(px->st->loop, px->metrics.listen_fd);
	close(px->metrics.listen_fd);
	px->metrics.listen_fd = -1;
}
