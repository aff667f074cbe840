/* scenario_report.c — the catalog's scenarios, run and tabulated. */
#include <stdlib.h>

#include "sim/scenario_catalog.h"
#include "sim/scenario_report.h"

int scn_report_run(struct scn_report *r)
{
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct scn_config cfg;
	int rc = 0;

	if (!p)
		return -1;
	scn_fair_share(p, &cfg, FG_METER_REPLICA_TIME);
	rc |= scn_run(&cfg, &r->fair_replica);
	scn_fair_share(p, &cfg, FG_METER_RAW_TOKENS);
	rc |= scn_run(&cfg, &r->fair_raw);
	scn_fair_share(p, &cfg, FG_METER_REPLICA_TIME);
	cfg.gateway = false;
	rc |= scn_run(&cfg, &r->fair_direct);

	scn_context_share(p, &cfg, FG_OUTPUT_CONTEXT);
	rc |= scn_run(&cfg, &r->ctx_priced);
	scn_context_share(p, &cfg, FG_OUTPUT_FLAT);
	rc |= scn_run(&cfg, &r->ctx_flat);
	scn_kv_bound_share(p, &cfg);
	rc |= scn_run(&cfg, &r->kv_bound);

	scn_long_context(p, &cfg, true);
	rc |= scn_run(&cfg, &r->long_kv_on);
	scn_long_context(p, &cfg, false);
	rc |= scn_run(&cfg, &r->long_kv_off);
	scn_long_context(p, &cfg, true);
	cfg.loads[0].rate = 0; /* the chat tenant alone: its unloaded decode */
	rc |= scn_run(&cfg, &r->long_chat_alone);

	scn_burst(p, &cfg, 0, true);
	rc |= scn_run(&cfg, &r->burst_alone);
	scn_burst(p, &cfg, 300, true);
	rc |= scn_run(&cfg, &r->burst_gateway);
	scn_burst(p, &cfg, 300, false);
	rc |= scn_run(&cfg, &r->burst_direct);
	fg_policy_free(p);
	return rc ? -1 : 0;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

void scn_report_print_markdown(const struct scn_report *r, FILE *out)
{
	fprintf(out, "| scenario | setup | result |\n|---|---|---|\n");
	fprintf(out, "| fair share, replica-time metering | equal contracts (0.5 replica each), "
		     "both over quota; A prompt-heavy (2,000 in / 10 out), B long outputs (100 in / 1,000 out) "
		     "| A %.1f%% / B %.1f%% of replica time |\n",
		100 * scn_share(&r->fair_replica, 0), 100 * scn_share(&r->fair_replica, 1));
	fprintf(out, "| fair share, raw-token metering | same contracts in tokens/s | "
		     "A %.1f%% / B %.1f%%: B takes %.2fx A's replica time |\n",
		100 * scn_share(&r->fair_raw, 0), 100 * scn_share(&r->fair_raw, 1),
		ratio(scn_share(&r->fair_raw, 1), scn_share(&r->fair_raw, 0)));
	fprintf(out, "| fair share, no gateway | same load straight into the engine | "
		     "A %.1f%% / B %.1f%%, p99 TTFT %.0f s |\n",
		100 * scn_share(&r->fair_direct, 0), 100 * scn_share(&r->fair_direct, 1),
		r->fair_direct.t[0].ttft_p99_s);
	fprintf(out, "| fair queue, output priced by context | equal contracts above the replica, "
		     "equal outputs (200 tokens); L 16,000-token prompts, S 1,000 | "
		     "L %.1f%% / S %.1f%% of replica time |\n",
		100 * scn_share(&r->ctx_priced, 0), 100 * scn_share(&r->ctx_priced, 1));
	fprintf(out, "| fair queue, output priced flat | same load, every output token at 3.09 units | "
		     "L %.1f%% / S %.1f%%: L takes %.2fx S's replica time |\n",
		100 * scn_share(&r->ctx_flat, 0), 100 * scn_share(&r->ctx_flat, 1),
		ratio(scn_share(&r->ctx_flat, 0), scn_share(&r->ctx_flat, 1)));
	fprintf(out, "| fair queue, the node's KV binding | same load priced by context, "
		     "1,000-token outputs, tier KV caps above the node's pool | "
		     "L %.1f%% / S %.1f%% of replica time |\n",
		100 * scn_share(&r->kv_bound, 0), 100 * scn_share(&r->kv_bound, 1));
	fprintf(out, "| long contexts, KV caps on | tenant L sends 120K-token prompts (0.5/s), "
		     "chat tenant C 1,000 in / 200 out at 4/s | C: %llu preemptions, TPOT %.1f ms "
		     "(alone: %.1f ms); L: %llu preemptions |\n",
		(unsigned long long)r->long_kv_on.t[1].preemptions, 1e3 * r->long_kv_on.t[1].tpot_mean_s,
		1e3 * r->long_chat_alone.t[1].tpot_mean_s,
		(unsigned long long)r->long_kv_on.t[0].preemptions);
	fprintf(out, "| long contexts, no KV isolation | same load | C: %llu preemptions, TPOT %.1f ms "
		     "(%.1fx slower); L: %llu preemptions |\n",
		(unsigned long long)r->long_kv_off.t[1].preemptions, 1e3 * r->long_kv_off.t[1].tpot_mean_s,
		ratio(r->long_kv_off.t[1].tpot_mean_s, r->long_kv_on.t[1].tpot_mean_s),
		(unsigned long long)r->long_kv_off.t[0].preemptions);
	fprintf(out, "| burst, through the gateway | victim V 500 in / 50 out at 2/s; "
		     "300-request burst (2,000 in / 200 out) at t=10 s | V p99 TTFT %.0f ms "
		     "(alone %.0f ms): +%.2f of one engine step (%.0f ms) |\n",
		1e3 * r->burst_gateway.t[0].ttft_p99_s, 1e3 * r->burst_alone.t[0].ttft_p99_s,
		ratio(r->burst_gateway.t[0].ttft_p99_s - r->burst_alone.t[0].ttft_p99_s,
		      r->burst_gateway.step_work_s),
		1e3 * r->burst_gateway.step_work_s);
	fprintf(out, "| burst, no gateway | same load straight into the engine (FCFS) | "
		     "V p99 TTFT %.1f s |\n", r->burst_direct.t[0].ttft_p99_s);
}
