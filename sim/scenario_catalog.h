/* scenario_catalog.h — the seed's scenarios, defined once.
 *
 * Each builder fills a policy and a scenario config (the policy zeroed or
 * one a builder filled before: its tenants are released first; give it back
 * with fg_policy_free); the tests assert on the
 * results (selftests/unit/test_scenarios.c) and `fg-scenarios` prints them as
 * the README's table, so the figures and the assertions come from the same
 * runs.
 */
#ifndef FAIRGATE_SIM_SCENARIO_CATALOG_H
#define FAIRGATE_SIM_SCENARIO_CATALOG_H

#include "sim/scenario.h"

/* Two tenants with equal contracts, both asking for more than the replica
 * can serve; tenant 0 sends prompt-heavy requests, tenant 1 long outputs. */
void scn_fair_share(struct fg_policy *p, struct scn_config *cfg, enum fg_metering metering);

/* Two tenants with equal contracts larger than the replica and equal output
 * lengths (200 tokens); tenant 0 decodes against 16K-token prompts, tenant
 * 1 against 1K. Both keep the gateway's queue full, so the fair queue alone
 * divides the replica, charging output at `pricing`. */
void scn_context_share(struct fg_policy *p, struct scn_config *cfg,
		       enum fg_output_pricing pricing);

/* The same with 1,000-token outputs and tier KV caps above the node's pool,
 * so the node's reservable KV binds: the fair queue must still divide the
 * replica equally. */
void scn_kv_bound_share(struct fg_policy *p, struct scn_config *cfg);

/* Tenant 0 sends ~120K-token contexts (the seed's "one 128K request holds
 * 20% of the pool"), tenant 1 ordinary chat. kv_isolation on/off. */
void scn_long_context(struct fg_policy *p, struct scn_config *cfg, bool kv_isolation);

/* Tenant 0 is a steady victim; tenant 1 sends a burst of `burst` requests
 * at t = 10 s (0 = victim alone). gateway on/off. */
void scn_burst(struct fg_policy *p, struct scn_config *cfg, uint32_t burst, bool gateway);

#endif
