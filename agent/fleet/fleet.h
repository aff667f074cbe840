/* fleet.h — agent.fleet inside fairgated: the glue between the gateway's
 * buckets (policy/gateway, on the agent's loop) and the grant thread
 * (agent/fleet/fleet_client.c), following the rules in policy/fleet_grant.h.
 *
 * A timer on the loop observes the tenants' buckets, shapes them (the
 * lease's rate, the hold cap), and hands the calls that are due to the
 * grant thread as one batch; the thread's answers come back through an
 * eventfd and go into the buckets. The timer visits the tenants in use:
 * one that is quiet (policy/fleet_grant.h, fg_fleet_quiet: idle declared,
 * at its floor, its bucket full) is left until the gateway says a request
 * moved its books (fg_gateway.moved), so at 65,536 tenants the tick costs
 * what the few in use cost. Nothing here is on the request path:
 * admission reads only the local bucket. Also the `fleet` control command
 * (fairgatectl fleet) and the fleet's Prometheus lines. */
#ifndef FAIRGATE_FLEET_H
#define FAIRGATE_FLEET_H

#include <jansson.h>
#include <stddef.h>
#include "lib/buf.h"
#include "policy/policy.h"

struct fg_proxy;

/* With agent.fleet: start the grant thread, make the first calls (waiting
 * up to two call timeouts for them: a node that cannot reach the store
 * starts at its tenants' floors), shape every bucket. Without: 0, nothing.
 * -1 with err (an unreadable password file, no thread). */
int fg_fleet_start(struct fg_proxy *px, char *err, size_t errlen);
/* A reload in two steps, as the gateway's: prepare takes the memory for
 * the new policy's tenants (-1 if it cannot: nothing changed), then either
 * cancel, or, after fg_gw_reload_commit, apply: leases follow tenants by
 * name; the buckets are shaped again (the reload set them to the contract). */
int fg_fleet_prepare_policy(struct fg_proxy *px, const struct fg_policy *p);
void fg_fleet_cancel_policy(struct fg_proxy *px);
void fg_fleet_apply_policy(struct fg_proxy *px, const struct fg_policy *p);
/* Hand the leases back (bounded: one second), stop the thread. */
void fg_fleet_stop(struct fg_proxy *px);
/* The fleet's metrics, appended to the exposition (nothing without a fleet). */
void fg_fleet_metrics(struct fg_proxy *px, struct fg_buf *o);
/* `fairgatectl fleet`'s reply: the store, the grant thread, the fleet's
 * peaks and every tenant's lease; NULL with err when there is no fleet. */
json_t *fg_fleet_status_json(struct fg_proxy *px, char *err, size_t errlen);

#endif
