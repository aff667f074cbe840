/* id_set.h — a set of small integer ids (tenant ids) that lists its
 * members: adding is O(1) and idempotent, visiting costs the members, not
 * the ids there could be. The gateway marks the tenants a request moved
 * (policy/gateway.h, fg_gateway.moved); agent.fleet's tick keeps the
 * tenants it must still look at (agent/fleet/fleet.c). */
#ifndef FAIRGATE_ID_SET_H
#define FAIRGATE_ID_SET_H

#include <stdbool.h>
#include <stdint.h>

struct fg_idset {
	uint32_t *ids;   /* the members, n of them, in the order added */
	uint8_t *in;     /* by id: a member */
	uint32_t n, slots;
};

/* Empty, room for ids 0..slots-1 (at least one). -1 when out of memory
 * (and nothing held). */
int fg_idset_init(struct fg_idset *s, uint32_t slots);
void fg_idset_free(struct fg_idset *s);
/* Every id below n (at most slots) a member, in id order. */
void fg_idset_fill(struct fg_idset *s, uint32_t n);
/* Empty again, in O(members). */
void fg_idset_clear(struct fg_idset *s);

/* True if id was added (false: already a member, or out of range). */
static inline bool fg_idset_add(struct fg_idset *s, uint32_t id)
{
	if (id >= s->slots || s->in[id])
		return false;
	s->in[id] = 1;
	s->ids[s->n++] = id;
	return true;
}

static inline bool fg_idset_has(const struct fg_idset *s, uint32_t id)
{
	return id < s->slots && s->in[id];
}

/* Keep the members keep() says yes to, in their order: one pass, so a
 * caller visits and prunes together (keep must not add to s). */
typedef bool (*fg_idset_keep_fn)(uint32_t id, void *ctx);
void fg_idset_filter(struct fg_idset *s, fg_idset_keep_fn keep, void *ctx);

#endif
