/* ctl_proxy.c — control-socket handlers for status, tenant detail and
 * policy hot reload; the commands are listed in ctl_commands.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ctl/ctl_agent.h"
#include "agent/ctl/ctl_commands.h"
#include "agent/ctl/ctl_server.h"
#include "agent/http/engine_scrape.h"
#include "agent/kernel/kernel.h"
#include "agent/policy_apply.h"
#include "lib/event_loop.h"
#include "agent/proxy/proxy.h"
#include "agent/proxy/proxy_internal.h"
#include "policy/overload.h"

static const char *deny_source_name(int source)
{
	return source == FG_DENY_QUOTA ? "quota" : source == FG_DENY_OPERATOR ? "operator"
		     : source == FG_DENY_NONE ? "none" : "unknown";
}

/* The deny window gate enforces (the pinned map's, whoever opened it: this
 * agent, the one before it, the operator); without kernel enforcement,
 * the one the quota controller would have published. */
static void deny_json(struct fg_agent_state *st, struct fg_tenant_rt *t, uint64_t now, json_t *o)
{
	uint64_t until = 0;
	int source = FG_DENY_NONE, verdict = FG_VERDICT_ALLOW;

	if (st->kernel) {
		verdict = fg_kernel_get_deny_from(st, t->id, &until, &source);
	} else if (t->deny_published_ns > now) {
		verdict = FG_VERDICT_DELAY;
		until = t->deny_published_ns;
		source = FG_DENY_QUOTA;
	}
	bool open = verdict != FG_VERDICT_ALLOW && until > now;
	json_object_set_new(o, "deny_window_open", json_boolean(open));
	json_object_set_new(o, "deny_remaining_ms",
			    json_integer(open ? (json_int_t)((until - now) / 1000000) : 0));
	json_object_set_new(o, "deny_source", json_string(open ? deny_source_name(source) : "none"));
	json_object_set_new(o, "deny_verdict",
			    json_string(!open ? "allow" : verdict == FG_VERDICT_SHED ? "shed" : "delay"));
}

static json_t *tenant_json(struct fg_agent_state *st, const struct fg_policy *p,
			   struct fg_gateway *gw, struct fg_tenant_rt *t, uint64_t now)
{
	struct fg_gw_tenant *g = &gw->t[t->id];
	const struct fg_fq_tenant *f = &gw->fq.t[t->id];
	json_t *outcomes = json_object();

	for (int k = 0; k < FG_OUT_N; k++)
		json_object_set_new(outcomes, fg_outcome_names[k], json_integer((json_int_t)t->outcomes[k]));
	json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:f, s:f, s:f, s:f, s:i, s:i, s:I, s:I, s:I,"
			      " s:f, s:f, s:f, s:I, s:f, s:o}",
			      "name", t->name, "id", (int)t->id,
			      "tier", t->tier < p->n_tiers ? p->tiers[t->tier].name : "",
			      "cache", t->salted ? "salted" : "shared",
			      "units_per_s", g->bucket.rate, "burst_units", g->bucket.depth,
			      "bucket_units", fg_bucket_level(&g->bucket, now),
			      "reserved_units", g->reserved_units,
			      "inflight", (int)(g->inflight - f->queued), "queued", (int)f->queued,
			      "admitted", (json_int_t)g->admitted, "rejected", (json_int_t)t->rejected,
			      "settled", (json_int_t)t->settled,
			      "units_billed", t->units_billed, "units_refunded", t->units_refunded,
			      "typical_request_units", g->typical_cost,
			      "written_off", (json_int_t)t->written_off,
			      "units_written_off", t->units_written_off,
			      "outcomes", outcomes);
	if (!o)
		return NULL;
	deny_json(st, t, now, o);
	json_object_set_new(o, "kv_reserved_tokens", json_integer((json_int_t)gw->kv.reserved[t->id]));
	json_object_set_new(o, "kv_cap_tokens", json_integer((json_int_t)gw->kv.cap[t->id]));
	json_object_set_new(o, "weight", json_real(f->weight));
	json_object_set_new(o, "virtual_service_units", json_real(f->vtc));
	json_object_set_new(o, "served_units", json_real(f->served_units));
	json_object_set_new(o, "peak_units_per_s", json_real(gw->peaks.peak[t->id]));
	json_object_set_new(o, "timed_out", json_integer((json_int_t)g->timed_out));
	json_object_set_new(o, "output_tokens_billed", json_real(g->billed_output_tokens));
	json_object_set_new(o, "output_units_billed", json_real(g->billed_output_units));
	json_object_set_new(o, "long_context", json_integer((json_int_t)t->long_context));
	json_t *cal = json_object();
	for (int k = 0; k < FG_CAL_SLOTS; k++) {
		const struct fg_cal_slot *sl = &g->cal.s[k];
		if (sl->model && sl->samples && sl->model <= gw->models.n)
			json_object_set_new(cal, gw->models.name[sl->model - 1],
					    json_real(fg_chars_per_token(&g->cal, sl->model,
									 p->replica.model.chars_per_token)));
	}
	json_object_set_new(o, "chars_per_token", cal);
	json_object_set_new(o, "exact_counts", json_integer((json_int_t)g->exact_counts));
	json_object_set_new(o, "cut_off", json_integer((json_int_t)g->cut_off));
	json_object_set_new(o, "usage_clamped", json_integer((json_int_t)g->usage_clamped));
	return o;
}

static json_t *tenants_array(struct fg_agent_state *st, const char *only)
{
	struct fg_proxy *px = st->proxy;
	json_t *a = json_array();
	uint64_t now = fg_now_ns();

	for (uint32_t i = 0; i < px->tenants.n; i++)
		if (!only || !strcmp(px->tenants.by_id[i]->name, only))
			json_array_append_new(a, tenant_json(st, st->policy, px->gw, px->tenants.by_id[i], now));
	return a;
}

/* The gateway's node-wide state: queue, KV, engine window, peaks, overload,
 * and what the engine's own metrics say. */
static json_t *scheduling_json(struct fg_proxy *px)
{
	const struct fg_gateway *gw = px->gw;
	const struct fg_policy *p = gw->policy;
	int ranks[FG_MAX_TIERS];
	json_t *shed = json_array();

	fg_tier_ranks(p, ranks);
	for (uint32_t i = 0; i < p->n_tiers; i++)
		if (ranks[i] <= px->overload_level)
			json_array_append_new(shed, json_string(p->tiers[i].name));
	json_t *engine = json_pack("{s:b, s:I, s:I}", "metrics_up", px->engine_metrics_known,
				   "preemptions", (json_int_t)px->engine_preemptions,
				   "scrape_failures",
				   (json_int_t)(px->scrape ? fg_engine_scrape_failures(px->scrape) : 0));
	if (px->engine_metrics_known) {
		json_object_set_new(engine, "waiting", json_real(px->engine_waiting));
		json_object_set_new(engine, "running", json_real(px->engine_running));
		json_object_set_new(engine, "kv_usage", json_real(px->engine_kv_usage));
	}
	json_t *sc = json_pack("{s:s, s:s, s:s, s:i, s:f, s:{s:I, s:I}, s:{s:i, s:I, s:f, s:i, s:i, s:i, s:I},"
			 " s:{s:i, s:o},"
			 " s:{s:f, s:f, s:f, s:f, s:i}, s:o}",
			 "metering", p->agent.metering == FG_METER_RAW_TOKENS ? "raw_tokens"
				     : p->agent.metering == FG_METER_REQUESTS ? "requests" : "replica_time",
			 "output_pricing", p->agent.output_pricing == FG_OUTPUT_FLAT ? "flat" : "context",
			 "engine_scheduling",
			 p->agent.engine_scheduling == FG_ENGINE_PRIORITY ? "priority" : "fcfs",
			 "queued", (int)fg_fq_total_queued(&gw->fq),
			 "backlog_s", fg_gw_backlog_s(gw),
			 "kv", "reserved_tokens", (json_int_t)gw->kv.node_reserved,
			 "reservable_tokens", (json_int_t)gw->kv.node_cap,
			 "engine_window", "pending_requests", (int)gw->ew.pending_requests,
			 "pending_tokens", (json_int_t)gw->ew.pending_tokens,
			 "budget_tokens", fg_ew_budget_tokens(&gw->ew),
			 "waiting_limit", (int)fg_ew_waiting_limit(&gw->ew),
			 "engine_extra_waiting", (int)gw->ew.engine_extra,
			 "unconfirmed", (int)fg_ew_unconfirmed(&gw->ew),
			 "started_by_engine_counts", (json_int_t)gw->ew.started_by_engine,
			 "overload", "level", px->overload_level, "shed_tiers", shed,
			 "peaks", "window_s", (double)gw->peaks.window_ns / 1e9,
			 "node_peak_units_per_s", gw->peaks.peak_node,
			 "sum_tenant_peaks_units_per_s", fg_peak_sum_tenants(&gw->peaks),
			 "oversubscription", fg_peak_oversubscription(&gw->peaks),
			 "windows_closed", (int)gw->peaks.windows_closed,
			 "engine", engine);
	const struct fg_tpot_reserve *t = &gw->tpot;
	if (sc && fg_tpot_active(t))
		json_object_set_new(sc, "tpot", json_pack(
			"{s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:s}", "target_ms", t->target_s * 1e3,
			"cap_tokens", (json_int_t)t->cap_tokens,
			"reserve_tokens", (json_int_t)t->reserve_tokens,
			"sequences", (json_int_t)t->sequences,
			"context_tokens", (json_int_t)gw->kv.node_reserved,
			"holders_tokens", (json_int_t)gw->kv.protected_reserved,
			"modeled_step_ms", 1e3 * fg_batch_step_s(&gw->step_cm, t->sequences,
								 (double)gw->kv.node_reserved,
								 (double)gw->ew.pending_tokens),
			"step_model", px->calib && px->calib->step_measured ? "measured" : "assumed"));
	return sc;
}

/* A model's prices, as `fairgatectl plan --calibrated` and status print them. */
static json_t *model_json(const struct fg_cost_model *cm, const struct fg_cost_model *assumed,
			  const struct fg_replica *r)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
			 "prompt_token_us", cm->prompt_token_s * 1e6,
			 "decode_step_ms", cm->decode_step_s * 1e3,
			 "output_weight", cm->output_weight,
			 "output_units_at_0", cm->output_weights_share_s / cm->prompt_token_s,
			 "output_units_per_1k_context", cm->output_s_per_context * 1e3 / cm->prompt_token_s,
			 "replica_units_per_s", cm->replica_units_per_s,
			 "step_overhead_ms", cm->step_overhead_s * 1e3,
			 "seq_overhead_us", cm->seq_overhead_s * 1e6,
			 "prefill_mfu", r->prefill_mfu * fg_cost_model_prefill_mfu_ratio(cm, assumed),
			 "decode_mbu", r->decode_mbu * fg_cost_model_decode_mbu_ratio(cm, assumed),
			 "step_ms_at_batch_1", fg_decode_step_batch_s(cm, 1, cm->ref_context) * 1e3);
}

/* agent.calibration: what the engine was measured to take, next to what
 * the policy assumes and what the gateway charges. */
static json_t *calibration_json(const struct fg_proxy *px)
{
	const struct fg_pcal *pc = px->calib;
	const struct fg_calib *c = &pc->fit;
	const struct fg_calib_fit *f = &c->fit;
	const struct fg_replica *r = &px->gw->policy->replica;
	static const char *const modes[] = { "advise", "off", "on" };

	json_t *o = json_pack("{s:s, s:b, s:b, s:{s:I, s:I, s:I, s:i, s:i, s:i, s:i},"
			      " s:I, s:o, s:o}",
			      "mode", modes[pc->mode], "valid", f->valid, "bounded", f->bounded,
			      "observations", "steps_seen", (json_int_t)pc->steps_seen,
			      "steps_observed", (json_int_t)pc->steps_observed, "rejected",
			      (json_int_t)c->rejected, "in_window", (int)c->len, "used",
			      (int)f->n_steps, "prefill_steps_used", (int)f->n_prefill_steps,
			      "trimmed", (int)f->trimmed,
			      "sharp_changes", (json_int_t)pc->sharp_changes,
			      "assumed", model_json(&c->assumed, &c->assumed, r),
			      "charged", model_json(&px->gw->cm, &c->assumed, r));
	/* which sources fed the fit: the streams' steps and the engine's
	 * histogram intervals (policy/calib_hist.h) */
	const struct fg_calib_hist *h = &pc->hist;
	if (o)
		json_object_set_new(
			o, "sources",
			json_pack("{s:{s:I, s:i, s:i, s:f}, s:{s:I, s:I, s:i, s:i, s:i, s:i, s:f,"
				  " s:I, s:I, s:I, s:I, s:b, s:I}}",
				  "streams", "taken", (json_int_t)c->taken, "in_window", (int)c->len,
				  "used", (int)f->used[FG_CALIB_SRC_STREAM], "weight_share",
				  f->weight_share[0],
				  "engine", "decode_taken",
				  (json_int_t)h->observed[FG_CALIB_SRC_ENGINE_DECODE],
				  "prefill_taken",
				  (json_int_t)h->observed[FG_CALIB_SRC_ENGINE_PREFILL], "in_window",
				  (int)c->ilen, "decode_used", (int)f->used[FG_CALIB_SRC_ENGINE_DECODE],
				  "prefill_used", (int)f->used[FG_CALIB_SRC_ENGINE_PREFILL],
				  "intervals", (int)h->intervals, "weight_share", f->weight_share[1],
				  "refused", (json_int_t)h->refused, "resets", (json_int_t)h->resets,
				  "sparse", (json_int_t)h->sparse, "rejected",
				  (json_int_t)c->irejected, "apart_from_streams", pc->engine_apart,
				  "paused_intervals", (json_int_t)h->paused_intervals));
	if (o && pc->engine_itl_s > 0)
		json_object_set_new(o, "inter_token_ms",
				    json_pack("{s:f, s:f}", "engine", pc->engine_itl_s * 1e3, "proxy",
					      pc->proxy_itl_s * 1e3));
	if (o && f->valid) {
		json_object_set_new(o, "measured", model_json(&f->cm, &c->assumed, r));
		json_object_set_new(o, "fit", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:f, s:b, s:b, s:b, s:b}",
			"prompt_token_us", f->prompt_token_s * 1e6,
			"prompt_token_se_us", f->prompt_token_se_s * 1e6,
			"step_fixed_ms", f->step_fixed_s * 1e3,
			"step_fixed_se_ms", f->step_fixed_se_s * 1e3,
			"step_per_seq_us", f->step_per_seq_s * 1e6,
			"step_per_seq_se_us", f->step_per_seq_se_s * 1e6,
			"step_per_context_ns", f->step_per_context_s * 1e9,
			/* null when the data cannot tell the term at all */
			"step_per_context_se_ns", isfinite(f->step_per_context_se_s)
				? json_real(f->step_per_context_se_s * 1e9) : json_null(),
			"rms_ms", f->rms_s * 1e3,
			"prompt_identified", f->prompt_identified,
			"step_identified", f->step_identified,
			"per_seq_identified", f->per_seq_identified,
			"context_identified", f->context_identified));
	}
	return o;
}

/* Where the proxy really listens: transparent mode without agent.listen
 * picks an ephemeral port, which the policy cannot say. */
static const char *listen_desc(const struct fg_proxy *px, const struct fg_agent *a, char *buf,
			       size_t len)
{
	if (px->listen_fd < 0)
		return fg_hostport_format(&a->listen, buf, len);
	fg_socket_desc(px->listen_fd, buf, len);
	return buf;
}

static json_t *cmd_status(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	struct fg_proxy *px = st->proxy;
	const struct fg_agent *a = &st->policy->agent;
	char l[96], e[96], m[96];
	uint64_t admitted = 0, rejected = 0, settled = 0;
	(void)req;

	if (!px) {
		snprintf(err, errlen, "the proxy is not running");
		return NULL;
	}
	for (uint32_t i = 0; i < px->tenants.n; i++) {
		admitted += px->gw->t[px->tenants.by_id[i]->id].admitted;
		rejected += px->tenants.by_id[i]->rejected;
		settled += px->tenants.by_id[i]->settled;
	}
	/* the prior every tenant starts from; each tenant's own ratios are in
	 * its entry */
	json_t *cal = json_pack("{s:f}", "prior", st->policy->replica.model.chars_per_token);
	json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:b, s:f, s:i, s:i, s:i, s:i, s:{s:I, s:I, s:I, s:I, s:I},"
			 " s:{s:I, s:f}, s:o, s:o}",
			 "mode", a->mode == FG_MODE_TRANSPARENT ? "transparent" : "front",
			 "listen", listen_desc(px, a, l, sizeof(l)),
			 "engine", fg_hostport_format(&a->engine, e, sizeof(e)),
			 "metrics_listen", a->metrics_listen.host[0] ?
				 fg_hostport_format(&a->metrics_listen, m, sizeof(m)) : "off",
			 "kernel_enforcement", st->kernel != NULL,
			 "uptime_s", (double)(fg_now_ns() - px->started_ns) / 1e9,
			 "tenant_count", (int)px->tenants.n, "client_connections", (int)px->n_clients,
			 "engine_busy", (int)px->n_busy,
			 "engine_idle", (int)(px->engine.n_idle + px->long_pool.n_idle),
			 "requests", "admitted", (json_int_t)admitted, "rejected", (json_int_t)rejected,
			 "settled", (json_int_t)settled,
			 "unauthenticated", (json_int_t)px->metrics.unauthenticated,
			 "malformed", (json_int_t)px->metrics.malformed,
			 "decisions", "count", (json_int_t)px->metrics.decision_count, "mean_us",
			 px->metrics.decision_count
				 ? px->metrics.decision_sum_s * 1e6 / (double)px->metrics.decision_count
				 : 0.0,
			 "chars_per_token", cal, "tenants", tenants_array(st, NULL));
	if (r) {
		json_object_set_new(r, "scheduling", scheduling_json(px));
		json_object_set_new(r, "calibration", calibration_json(px));
		json_object_set_new(r, "gate", fg_ctl_gate_json(st));
		json_object_set_new(r, "policy_watch", fg_ctl_watch_json(st));
		if (st->kernel_off[0])
			json_object_set_new(r, "kernel_off_reason", json_string(st->kernel_off));
	}
	struct fg_src_index_stats ix;
	if (r && fg_kernel_source_index(st, &ix))
		json_object_set_new(r, "source_index",
				    json_pack("{s:b, s:I, s:I, s:I, s:i, s:i, s:b}", "valid", ix.valid,
					      "rebuilds", (json_int_t)ix.rebuilds, "failed",
					      (json_int_t)ix.failed, "redone", (json_int_t)ix.discarded,
					      "learned", (int)ix.learned, "cidrs", (int)ix.statics,
					      "cidrs_by_trie", ix.static_by_trie));
	return r;
}

static json_t *cmd_tenants(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(req, "tenant"));

	if (!st->proxy) {
		snprintf(err, errlen, "the proxy is not running");
		return NULL;
	}
	json_t *a = tenants_array(st, name);
	if (name && !json_array_size(a)) {
		json_decref(a);
		snprintf(err, errlen, "no tenant named '%s' in the running policy", name);
		return NULL;
	}
	return json_pack("{s:o}", "tenants", a);
}

/* The text crosses the socket, so the agent checks what fairgatectl
 * checked, against its own overrides; the transaction is policy_apply.c's. */
static json_t *cmd_policy_apply(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	const char *text = json_string_value(json_object_get(req, "policy"));
	const char *file = json_string_value(json_object_get(req, "file"));
	const char *ttext = json_string_value(json_object_get(req, "tenants"));
	const char *tfile = json_string_value(json_object_get(req, "tenants_file"));

	if (!text) {
		snprintf(err, errlen, "policy_apply needs \"policy\": the policy file's text");
		return NULL;
	}
	/* parse and apply run on the loop: what they take, it stalls */
	uint64_t t0 = fg_now_ns();
	struct fg_policy *np = fg_agent_parse_policy(&st->opts, text, strlen(text), file, ttext,
						     ttext ? strlen(ttext) : 0, tfile, err, errlen);
	if (!np)
		return NULL;
	uint64_t t1 = fg_now_ns();
	json_t *r = fg_agent_apply_policy(st, np, file, err, errlen);
	if (r) {
		uint64_t t2 = fg_now_ns();
		json_object_set_new(r, "parse_ms", json_real((double)(t1 - t0) / 1e6));
		json_object_set_new(r, "apply_ms", json_real((double)(t2 - t1) / 1e6));
		fprintf(stderr, "fairgated: policy apply held the loop %.1f ms (parse %.1f, apply %.1f)\n",
			(double)(t2 - t0) / 1e6, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
	}
	return r;
}

void fg_ctl_proxy_register(void)
{
	fg_ctl_register("status", cmd_status);
	fg_ctl_register("tenants", cmd_tenants);
	fg_ctl_register("policy_apply", cmd_policy_apply);
}
