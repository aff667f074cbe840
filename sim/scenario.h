/* scenario.h — tenants, the gateway and one simulated replica, in virtual time.
 *
 * Couples the gateway's pure logic (policy/gateway.h: buckets, fair queue,
 * KV caps, engine window) with the simulator's engine model (sim/engine.h)
 * in one deterministic event loop, so scenarios from the seed can be run in
 * seconds and asserted exactly: fair shares of replica time, preemptions
 * from long contexts, a burst's effect on another tenant's TTFT. The same
 * functions the agent runs make every decision; only the sockets are absent
 * (the end-to-end tests cover those).
 */
#ifndef FAIRGATE_SIM_SCENARIO_H
#define FAIRGATE_SIM_SCENARIO_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"
#include "sim/engine.h"

#define SCN_MAX_LOADS 8

struct scn_load {
	uint32_t tenant;         /* policy tenant id */
	double rate;             /* requests per virtual second, evenly spaced */
	uint32_t burst;          /* or: this many arriving together at start_s */
	double start_s, stop_s;
	uint32_t prompt_tokens;  /* distinct per request: no prefix sharing */
	uint32_t max_tokens;
};

struct scn_config {
	const struct fg_policy *policy;
	bool gateway;            /* false: every request straight into the engine */
	bool kv_isolation;       /* gateway reserves KV (tenant caps and node cap) */
	enum fg_metering metering;
	enum fg_output_pricing output_pricing; /* what the gateway bills output by */
	double duration_s;       /* arrivals stop; shares are measured up to here */
	double drain_s;          /* then at most this long to finish */
	uint32_t n_loads;
	struct scn_load loads[SCN_MAX_LOADS];
	struct sim_engine_config engine;
};

struct scn_tenant_result {
	uint64_t sent, admitted, rejected, refused, timed_out, completed;
	double units_in_window;   /* replica time served before duration_s, in units: each
				   * prompt at its prefill, each output token at the
				   * context it decoded against (whatever the gateway
				   * billed: this is the measure of fairness) */
	uint64_t preemptions;     /* of this tenant's sequences */
	double ttft_p50_s, ttft_p99_s, ttft_max_s;
	double tpot_mean_s;
};

struct scn_result {
	struct scn_tenant_result t[FG_MAX_TENANTS < 16 ? FG_MAX_TENANTS : 16];
	uint32_t n_tenants;
	uint64_t preemptions;
	double end_s;
	double busy_s;
	double step_work_s;      /* one full engine step: budget x prompt time + decode step */
};

void scn_config_defaults(struct scn_config *cfg, const struct fg_policy *p);
/* 0, or -1 (out of memory, bad config). */
int scn_run(const struct scn_config *cfg, struct scn_result *out);
/* A tenant's share of the replica time all tenants got in the window. */
double scn_share(const struct scn_result *r, uint32_t tenant);

#endif
