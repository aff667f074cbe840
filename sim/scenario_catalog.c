/* scenario_catalog.c — builders for the seed's scenarios; see the header. */
#include <stdlib.h>
#include <string.h>

#include "sim/scenario_catalog.h"

static uint32_t add_tier(struct fg_policy *p, const char *name, double weight, uint64_t max_ctx,
			 uint64_t kv_cap)
{
	struct fg_tier *t = &p->tiers[p->n_tiers];
	memset(t, 0, sizeof(*t));
	strncpy(t->name, name, sizeof(t->name) - 1);
	t->weight = weight;
	t->max_context = max_ctx;
	t->kv_cap_tokens = kv_cap;
	t->burst_s = 60;
	t->max_queue_s = 30;
	t->default_max_tokens = 256;
	return p->n_tiers++;
}

static uint32_t add_tenant(struct fg_policy *p, const char *name, uint32_t tier, double units_per_s)
{
	struct fg_tenant *t = fg_policy_add_tenant(p);
	if (!t)
		abort(); /* a handful of tenants: out of memory at the start */
	strncpy(t->name, name, sizeof(t->name) - 1);
	t->tier = tier;
	t->units_per_s = units_per_s;
	t->burst_s = p->tiers[tier].burst_s;
	return t->id;
}

static void add_load(struct scn_config *cfg, uint32_t tenant, double rate, uint32_t burst,
		     double start_s, uint32_t prompt, uint32_t max_tokens)
{
	struct scn_load *l = &cfg->loads[cfg->n_loads++];
	memset(l, 0, sizeof(*l));
	l->tenant = tenant;
	l->rate = rate;
	l->burst = burst;
	l->start_s = start_s;
	l->stop_s = 1e9;
	l->prompt_tokens = prompt;
	l->max_tokens = max_tokens;
}

void scn_fair_share(struct fg_policy *p, struct scn_config *cfg, enum fg_metering metering)
{
	fg_policy_release(p);
	fg_policy_defaults(p);
	uint32_t std = add_tier(p, "standard", 1, 32768, 262144);
	/* Equal contracts of half a replica each: 9,116 units/s of replica time,
	 * or, under raw_tokens, the same number of tokens per second (what a
	 * token-based quota would sell as "half the replica"). */
	struct fg_cost_model cm;
	fg_cost_model_init(&cm, &p->replica);
	double contract = 0.5 * cm.replica_units_per_s;
	add_tenant(p, "prompty", std, contract);
	add_tenant(p, "chatty", std, contract);
	scn_config_defaults(cfg, p);
	cfg->metering = metering;
	cfg->duration_s = 600;
	cfg->drain_s = 60;
	/* Each asks for more than its contract under either meter: 9 req/s of
	 * ~2,030 units (2,010 tokens), and 12 req/s of ~2,185 units (1,100
	 * tokens, the output decoded at ~600 tokens of context) — the
	 * long-output tenant's raw-token contract covers 8.3 req/s, 18,100
	 * units/s of replica time, twice what it paid for. */
	add_load(cfg, 0, 9, 0, 0, 2000, 10);
	add_load(cfg, 1, 12, 0, 0, 100, 1000);
}

void scn_context_share(struct fg_policy *p, struct scn_config *cfg,
		       enum fg_output_pricing pricing)
{
	fg_policy_release(p);
	fg_policy_defaults(p);
	uint32_t std = add_tier(p, "standard", 1, 32768, 262144);
	/* quotas no bucket reaches: what each gets is the fair queue's doing */
	add_tenant(p, "longctx", std, 1e6);
	add_tenant(p, "shortctx", std, 1e6);
	scn_config_defaults(cfg, p);
	cfg->output_pricing = pricing;
	cfg->duration_s = 240;
	cfg->drain_s = 60;
	/* Priced by context a request costs 16,000 + 199 x 16.26 = 19,236
	 * units (0) and 1,000 + 199 x 2.55 = 1,506 (1); flat, 16,619 and
	 * 1,619. Both queues stay full (requests time out in them), so the
	 * fair queue alone decides; outputs are short enough that the KV
	 * ledger never binds (scn_kv_bound_share is the case where it does). */
	add_load(cfg, 0, 1.5, 0, 0, 16000, 200);
	add_load(cfg, 1, 12, 0, 0, 1000, 200);
}

void scn_kv_bound_share(struct fg_policy *p, struct scn_config *cfg)
{
	scn_context_share(p, cfg, FG_OUTPUT_CONTEXT);
	/* 1,000-token outputs reserve 17,000 and 2,000 tokens of KV a request,
	 * and the tier's cap is above the node's pool, so what the node can
	 * reserve binds before the fair queue's turn: a head waiting for the
	 * node's KV must hold the others, or the small requests take what
	 * frees up and the large ones wait for ever. */
	p->tiers[0].kv_cap_tokens = 2 * p->replica.kv_pool_tokens;
	for (uint32_t i = 0; i < cfg->n_loads; i++)
		cfg->loads[i].max_tokens = 1000;
}

void scn_long_context(struct fg_policy *p, struct scn_config *cfg, bool kv_isolation)
{
	fg_policy_release(p);
	fg_policy_defaults(p);
	p->agent.long_context_threshold = 0; /* this replica is the long-context pool */
	/* one 128K context at a time per long-context tenant */
	uint32_t lng = add_tier(p, "long-context", 1, 131072, 131072);
	uint32_t std = add_tier(p, "standard", 1, 32768, 131072);
	add_tenant(p, "longdoc", lng, 1e6);
	add_tenant(p, "chat", std, 1e6);
	scn_config_defaults(cfg, p);
	cfg->kv_isolation = kv_isolation;
	cfg->duration_s = 120;
	cfg->drain_s = 120;
	add_load(cfg, 0, 0.5, 0, 0, 120000, 1000);
	add_load(cfg, 1, 4, 0, 0, 1000, 200);
}

void scn_burst(struct fg_policy *p, struct scn_config *cfg, uint32_t burst, bool gateway)
{
	fg_policy_release(p);
	fg_policy_defaults(p);
	uint32_t std = add_tier(p, "standard", 1, 32768, 262144);
	add_tenant(p, "steady", std, 1e6);
	add_tenant(p, "bursty", std, 1e6);
	scn_config_defaults(cfg, p);
	cfg->gateway = gateway;
	cfg->duration_s = 60;
	cfg->drain_s = 300;
	add_load(cfg, 0, 2, 0, 0, 500, 50);
	if (burst)
		add_load(cfg, 1, 0, burst, 10, 2000, 200);
}
