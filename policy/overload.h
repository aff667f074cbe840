/* overload.h — when to shed whole tiers at the kernel.
 *
 * A new request of a tier is pointless to accept when the queue ahead of it
 * is already longer than the tier may wait (max_queue_s): it would time out
 * and be refused anyway, after costing the node a connection, a parse and a
 * queue slot. So the level published to `gate` is the highest tier rank
 * (lowest weight first) whose max_queue_s the current backlog exceeds, with
 * hysteresis so the level does not flap: a level is cleared only once the
 * backlog is back under half the threshold that set it.
 */
#ifndef FAIRGATE_OVERLOAD_H
#define FAIRGATE_OVERLOAD_H

#include "policy.h"

/* Rank of each tier, 0 = shed first: ascending weight, ties by position. */
void fg_tier_ranks(const struct fg_policy *p, int ranks[FG_MAX_TIERS]);

/* The level to publish (-1 = none) given the backlog in seconds of replica
 * time and the level in force now. */
int fg_overload_level(const struct fg_policy *p, double backlog_s, int current_level);

#endif
