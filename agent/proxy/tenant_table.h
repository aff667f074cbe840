/* tenant_table.h — the proxy's tenant table: who a key or name is (key index,
 * salts, tier settings the rewrite needs), what happened to its requests
 * (outcome counters, billed and refunded units), and publishing its state to
 * the kernel after every decision.
 *
 * Bucket, reservations, typical cost, deny windows, queues, KV and the engine
 * window are NOT here: they live once, in policy/gateway (struct fg_gateway,
 * tenant index = t->id), which the proxy drives. This file reads them to
 * publish.
 *
 * Tenants are matched across policy reloads by name: a surviving tenant keeps
 * its counters; a removed one stays alive, off the lookup tables, until the
 * last request that references it ends. */
#ifndef FAIRGATE_QUOTA_H
#define FAIRGATE_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include "agent/agent.h"
#include "agent/proxy/salt.h"
#include "lib/list.h"
#include "policy/gateway.h"

enum fg_outcome {
	FG_OUT_OK = 0,           /* answered by the engine, settled on usage */
	FG_OUT_RATE_LIMITED,     /* 429: the bucket does not hold it yet */
	FG_OUT_NEVER_FITS,       /* 4xx, x-should-retry: false: above the bucket depth */
	FG_OUT_BAD_REQUEST,      /* malformed JSON / parameters, oversized body */
	FG_OUT_CLIENT_GONE,      /* client left mid-request: billed what it got */
	FG_OUT_ENGINE_ERROR,     /* engine failed or timed out: refunded, 502/503/504 */
	FG_OUT_ENGINE_REJECTED,  /* engine answered 4xx: refunded */
	FG_OUT_UNMETERED,        /* not an inference call, passed through */
	FG_OUT_QUEUE_TIMEOUT,    /* 429: waited past the tier's max_queue_s, refunded */
	FG_OUT_CONTEXT_EXCEEDED, /* 400: above the tier's max_context, or no long-context pool */
	FG_OUT_KV_NEVER,         /* 400: alone above the tenant's KV cap or the node pool */
	FG_OUT_TENANT_GONE,      /* 403: the tenant left the policy while its request waited */
	FG_OUT_CLIENT_STALLED,   /* the client left its relay buffer full past idle_s: ended, billed what ran */
	FG_OUT_REQUEST_TIMEOUT,  /* past agent.timeouts.request_s: ended, billed what ran */
	FG_OUT_INFLIGHT_LIMITED, /* 429: the tenant has agent.limits.max_inflight_per_tenant in flight */
	FG_OUT_N
};
extern const char *const fg_outcome_names[FG_OUT_N];
/* Outcomes that are refusals (counted as "rejected"). */
bool fg_outcome_is_refusal(enum fg_outcome o);

struct fg_tenant_rt {
	char name[FG_NAME_MAX];
	uint32_t id;              /* index in the current policy (= BPF map key, gateway slot) */
	uint32_t tier;
	bool live;                /* in the current policy */
	uint32_t refs;            /* requests holding this struct */
	struct fg_tenant_rt *next_retired;

	bool salted;
	char salt[FG_SALT_MAX + 1];
	int priority;

	uint64_t deny_published_ns; /* the quota window this agent wrote to the kernel; 0 none */
	struct fg_link deny_link;   /* in the table's `denied` while deny_published_ns != 0 */
	uint64_t outcomes[FG_OUT_N];
	uint64_t rejected;        /* sum of refusal outcomes */
	uint64_t settled;         /* admitted requests that ended (any way) */
	uint64_t long_context;    /* admitted to the long-context pool */
	double units_billed;      /* settled charges */
	double units_refunded;    /* reserved then given back */
	uint64_t written_off;     /* in flight when a previous fairgated died */
	double units_written_off; /* what they had reserved: billed as reserved */
};

struct fg_key_slot {
	uint8_t hash[32];
	struct fg_tenant_rt *t;
};

struct fg_tenant_table {
	uint32_t n;
	struct fg_tenant_rt **by_id;  /* n entries, policy order */
	struct fg_key_slot *keys;     /* open addressing, key_mask + 1 slots */
	uint32_t key_mask;
	struct fg_tenant_rt **names;  /* by name, open addressing, name_mask + 1
				       * slots: a tenant header is a lookup, not a
				       * scan of 65,536 names */
	uint32_t name_mask;
	struct fg_tenant_rt *retired;
	struct fg_salt_secret secret;
	bool have_secret;
	struct fg_gateway *gw;        /* the proxy's; read to publish */
	/* live tenants with a quota window published: what fg_tenants_tick
	 * visits, so its cost follows the windows open, not the tenants */
	struct fg_link denied;
};

int fg_tenants_init(struct fg_tenant_table *q, struct fg_gateway *gw, const char *secret_path, char *err,
		  size_t errlen);
void fg_tenants_free(struct fg_tenant_table *q);

/* Build the tables for policy p (already validated). Existing tenants keep
 * their counters. 0, or -1 (out of memory) with q unchanged. */
int fg_tenants_apply(struct fg_tenant_table *q, const struct fg_policy *p);

struct fg_tenant_rt *fg_tenants_by_key(const struct fg_tenant_table *q, const uint8_t hash[32]);
struct fg_tenant_rt *fg_tenants_by_name(const struct fg_tenant_table *q, const char *name);

void fg_tenant_ref(struct fg_tenant_rt *t);
void fg_tenant_unref(struct fg_tenant_table *q, struct fg_tenant_rt *t);

/* Count one outcome (refusal, or the end of an admitted request). */
void fg_tenants_count(struct fg_tenant_rt *t, enum fg_outcome o);
/* Billed outside a request's settlement (the engine's /tokenize count
 * before admission, fg_gw_tokenizer_ran). */
void fg_tenants_charged(struct fg_tenant_rt *t, double units);

/* An admitted request ended: `reserved` units were held, `billed` charged. */
void fg_tenants_ended(struct fg_tenant_rt *t, double reserved, double billed, enum fg_outcome o);
/* Publish the tenant's gateway state (bucket, reservations, queue, KV) and
 * open/close the quota deny window. No-op for retired tenants. */
void fg_tenants_publish(struct fg_agent_state *st, struct fg_tenant_table *q, struct fg_tenant_rt *t,
		      uint64_t now_ns);
/* At start, before the first publish: the books a previous fairgated left
 * in the pinned tenants map come back (counters, billed and refunded
 * units), what it had in flight is written off as billed (it reserved it
 * from the bucket, which comes back as it was), and a quota window it
 * opened becomes this agent's to close or extend. Returns the tenants
 * restored. */
uint32_t fg_tenants_restore(struct fg_agent_state *st, struct fg_tenant_table *q);
/* Periodic: close windows whose tenants have refilled. Visits the tenants
 * with a window published only (the `denied` list), not every tenant. */
void fg_tenants_tick(struct fg_agent_state *st, struct fg_tenant_table *q, uint64_t now_ns);

#endif
