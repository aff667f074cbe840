/* kv_ledger.h — resident-KV reservations per tenant and per node.
 *
 * KV is a separate resource from compute: one 128K-token request holds 20%
 * of a replica's pool while its compute quota looks fine. Each request
 * reserves n x (prompt + reserved output) tokens until it ends; a tenant may
 * hold at most its tier's kv_cap_tokens, and the node's total stays under
 * kv_pool_tokens x headroom, so the engine never has to preempt one tenant's
 * sequences to make room for another's long contexts.
 *
 * A TPOT reservation (tpot_reserve.h) protects some tenants: `reserve`
 * tokens of the node's pool are kept for them, and other tenants fit only
 * in what is left after what the protected could still take
 * (reserve - protected_reserved), so the protected never wait for, or are
 * preempted by, others' memory.
 */
#ifndef FAIRGATE_KV_LEDGER_H
#define FAIRGATE_KV_LEDGER_H

#include <stdbool.h>
#include <stdint.h>
#include "policy.h"

/* Per-tenant books are arrays of `slots` ids, sized to the policy. */
struct fg_kv_ledger {
	uint64_t node_cap;
	uint64_t node_reserved;
	uint32_t slots;
	uint64_t *cap;                     /* 0 = no per-tenant cap */
	uint64_t *reserved;
	uint64_t reserve;                  /* kept for the protected (0 = none) */
	uint64_t protected_reserved;       /* what the protected hold */
	bool *protect;
};

enum fg_kv_verdict {
	FG_KV_OK = 0,
	FG_KV_WAIT,          /* fits later, when the tenant's own requests finish */
	FG_KV_WAIT_NODE,     /* within the tenant's cap; waits for the node's pool */
	FG_KV_NEVER_TENANT,  /* larger than the tenant's cap on its own */
	FG_KV_NEVER_NODE,    /* larger than the node's reservable pool */
};

/* KV tokens a request holds: n sequences of prompt + reserved output. */
uint64_t fg_kv_tokens(uint64_t prompt_tokens, uint64_t max_output_tokens, uint32_t n);

/* Books for tenant ids 0..n_tenants-1 (at least one). Returns -1 (holding
 * nothing) when out of memory. */
int fg_kv_init(struct fg_kv_ledger *l, uint64_t pool_tokens, double headroom, uint32_t n_tenants);
void fg_kv_free(struct fg_kv_ledger *l);
void fg_kv_set_cap(struct fg_kv_ledger *l, uint32_t tenant, uint64_t cap_tokens);
/* The most of the node's pool `tenant` may ever hold (0 = no node cap):
 * the reservable pool, less the reserve unless it is protected. */
uint64_t fg_kv_node_cap_for(const struct fg_kv_ledger *l, uint32_t tenant);
enum fg_kv_verdict fg_kv_check(const struct fg_kv_ledger *l, uint32_t tenant, uint64_t tokens);
/* Reserve if fg_kv_check says OK; returns the verdict. */
enum fg_kv_verdict fg_kv_reserve(struct fg_kv_ledger *l, uint32_t tenant, uint64_t tokens);
void fg_kv_release(struct fg_kv_ledger *l, uint32_t tenant, uint64_t tokens);
/* The protected tenants and their reserve (any number of times; what the
 * protected hold is recounted from the per-tenant books). */
void fg_kv_set_protected(struct fg_kv_ledger *l, uint32_t tenant, bool protect);
void fg_kv_set_reserve(struct fg_kv_ledger *l, uint64_t tokens);
void fg_kv_recount_protected(struct fg_kv_ledger *l);

#endif
