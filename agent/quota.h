/* quota.h — the controller: per-tenant runtime state (bucket, reservations,
 * in-flight, counters, salt), the admission and settlement steps that
 * wrap policy/admission + policy/pricing, and publishing that state (and
 * deny windows) to the kernel after every decision.
 *
 * Tenants are matched across policy reloads by name: a surviving tenant keeps
 * its bucket level (reshaped to the new contract) and counters; a removed one
 * stays alive, off the lookup tables, until its last request settles. */
#ifndef FAIRGATE_QUOTA_H
#define FAIRGATE_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include "agent/agent.h"
#include "agent/salt.h"
#include "policy/admission.h"
#include "policy/pricing.h"

enum fg_outcome {
	FG_OUT_OK = 0,           /* answered by the engine, settled on usage */
	FG_OUT_RATE_LIMITED,     /* 429 */
	FG_OUT_NEVER_FITS,       /* 4xx, x-should-retry: false */
	FG_OUT_BAD_REQUEST,      /* malformed JSON / parameters, oversized body */
	FG_OUT_CLIENT_GONE,      /* client left mid-request: billed what it got */
	FG_OUT_ENGINE_ERROR,     /* engine failed or timed out: refunded, 502/503/504 */
	FG_OUT_ENGINE_REJECTED,  /* engine answered 4xx: refunded */
	FG_OUT_UNMETERED,        /* not an inference call, passed through */
	FG_OUT_N
};
extern const char *const fg_outcome_names[FG_OUT_N];

struct fg_tenant_rt {
	char name[FG_NAME_MAX];
	uint32_t id;              /* index in the current policy (= BPF map key) */
	uint32_t tier;
	bool live;                /* in the current policy */
	uint32_t refs;            /* requests holding this struct */
	struct fg_tenant_rt *next_retired;

	bool salted;
	char salt[FG_SALT_MAX + 1];
	int priority;
	uint32_t default_max_tokens;

	struct fg_bucket bucket;
	double typical_cost;      /* EWMA of admitted reservations */
	double reserved_units;    /* reserved, not yet settled */
	uint32_t inflight;
	uint64_t deny_until_ns;   /* the quota window this agent published; 0 none */

	uint64_t admitted, rejected, settled;
	uint64_t outcomes[FG_OUT_N];
	double units_billed;      /* settled charges */
	double units_refunded;    /* reserved then given back */
};

struct fg_key_slot {
	uint8_t hash[32];
	struct fg_tenant_rt *t;
};

struct fg_quota {
	uint32_t n;
	struct fg_tenant_rt **by_id;  /* n entries, policy order */
	struct fg_key_slot *keys;     /* open addressing, key_mask + 1 slots */
	uint32_t key_mask;
	struct fg_tenant_rt *retired;
	struct fg_calibration cal;
	struct fg_salt_secret secret;
	bool have_secret;
	enum fg_metering metering;
};

int fg_quota_init(struct fg_quota *q, const char *secret_path, char *err, size_t errlen);
void fg_quota_free(struct fg_quota *q);

/* Build the tables for policy p (already validated). Existing tenants keep
 * their state. 0, or -1 (out of memory) with q unchanged. */
int fg_quota_apply(struct fg_quota *q, const struct fg_policy *p, const struct fg_cost_model *cm,
		   uint64_t now_ns);

struct fg_tenant_rt *fg_quota_by_key(const struct fg_quota *q, const uint8_t hash[32]);
struct fg_tenant_rt *fg_quota_by_name(const struct fg_quota *q, const char *name);

void fg_tenant_ref(struct fg_tenant_rt *t);
void fg_tenant_unref(struct fg_quota *q, struct fg_tenant_rt *t);

/* Admission for a request priced `price`: on FG_ADMIT the cost is reserved
 * and in-flight counted. Publishes the tenant's state. */
struct fg_decision fg_quota_admit(struct fg_agent_state *st, struct fg_quota *q,
				  struct fg_tenant_rt *t, const struct fg_price *price,
				  uint64_t now_ns);
/* A refusal that never reached the bucket (bad request...): counted only. */
void fg_quota_count(struct fg_tenant_rt *t, enum fg_outcome o);
/* End of an admitted request: bill `billed` units against the reservation
 * (0 = full refund). Publishes. */
void fg_quota_settle(struct fg_agent_state *st, struct fg_quota *q, struct fg_tenant_rt *t,
		     double reserved, double billed, enum fg_outcome o, uint64_t now_ns);
/* Publish bucket state and open/close the quota deny window. */
void fg_quota_publish(struct fg_agent_state *st, struct fg_tenant_rt *t, uint64_t now_ns);
/* Periodic: close windows whose tenants have refilled. */
void fg_quota_tick(struct fg_agent_state *st, struct fg_quota *q, uint64_t now_ns);

#endif
