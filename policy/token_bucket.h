/* token_bucket.h — a tenant's quota as a token bucket measured in units.
 *
 * Rate is the tenant's contract (units/s), depth is burst_s x rate. The
 * admission path reserves a request's estimated cost up front, so concurrent
 * requests cannot overshoot; when the request ends the reservation is settled
 * against the metered cost, refunding or charging the difference. A charge
 * larger than what is left drives the level negative: that debt is repaid by
 * refill before the next request fits.
 *
 * Pure: no clock of its own, every call takes now_ns (CLOCK_MONOTONIC).
 */
#ifndef FAIRGATE_TOKEN_BUCKET_H
#define FAIRGATE_TOKEN_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

#define FG_BUCKET_NEVER UINT64_MAX

struct fg_bucket {
	double rate;       /* units per second */
	double depth;      /* units */
	double level;      /* units available at stamp_ns; < 0 is debt */
	uint64_t stamp_ns; /* when level was last brought up to date */
	/* Refill stops here when 0 < cap < depth (0: at depth). A node under
	 * agent.fleet keeps what its lease is worth, not the whole contract;
	 * grants and refunds still count up to depth, which stays the
	 * contract's, so "can ever fit" does not change. */
	double cap;
};

/* A new bucket starts full. */
void fg_bucket_init(struct fg_bucket *b, double rate, double depth, uint64_t now_ns);

/* New contract for an existing bucket (policy reload): the level is kept,
 * clamped to the new depth. */
void fg_bucket_reshape(struct fg_bucket *b, double rate, double depth, uint64_t now_ns);

/* Refill up to now_ns and return the level. */
double fg_bucket_level(struct fg_bucket *b, uint64_t now_ns);

/* True when `cost` could be reserved from a full bucket. */
bool fg_bucket_can_ever_fit(const struct fg_bucket *b, double cost);

/* Nanoseconds until the level covers `cost`: 0 if it does now,
 * FG_BUCKET_NEVER if it never will (cost above depth, or no refill). */
uint64_t fg_bucket_wait_ns(struct fg_bucket *b, double cost, uint64_t now_ns);

/* Take `cost` if the level covers it; false leaves the bucket unchanged. */
bool fg_bucket_reserve(struct fg_bucket *b, double cost, uint64_t now_ns);

/* End of a request that reserved `reserved` and is billed `actual`:
 * level += reserved - actual, never above depth. A refund is actual = 0. */
void fg_bucket_settle(struct fg_bucket *b, double reserved, double actual, uint64_t now_ns);

#endif
