/* admission.h — the per-request verdict and the deny-window rule.
 *
 * A request priced at `cost` units is admitted when the tenant's bucket
 * covers it (the cost is reserved right away), told to retry after the
 * bucket's refill time for that cost (429) when it does not yet, or refused
 * for good (4xx, x-should-retry: false) when even a full bucket could not
 * hold it. Refusals never touch the bucket.
 *
 * Retry-After is the time until the client's turn: the bucket's refill for
 * this request after the refill already promised to every client of the
 * tenant told to retry before it (fg_retry_turn_ns), so 300 clients refused
 * at once are told 300 different times, one request's refill apart, instead
 * of all coming back together to be refused again. A random stretch of up to
 * FG_RETRY_SPREAD of one request's refill (or of the wait, if shorter)
 * spreads those who would still meet. It stays small: while a client is
 * late for its turn the refill is there for anyone, and the tenant's other
 * clients would take it (a stretch of up to a whole refill had 40% of the
 * clients refused again on their turn, e2e fq_retry).
 *
 * Deny window: when the bucket cannot cover the tenant's typical request
 * (an EWMA of its recent costs) and will not for at least FG_DENY_MIN_NS, the
 * kernel is told to hold the tenant's new connections until the refill time;
 * the window closes as soon as the bucket covers a typical request again.
 * Admission stays the truth: the window only saves the node from a flood
 * that would be refused anyway.
 */
#ifndef FAIRGATE_ADMISSION_H
#define FAIRGATE_ADMISSION_H

#include <stdint.h>
#include "token_bucket.h"

/* Shorter windows than this are not worth a delayed SYN (>= 1 s retry). */
#define FG_DENY_MIN_NS 250000000ull
#define FG_TYPICAL_ALPHA 0.125

enum fg_admit_verdict {
	FG_ADMIT = 0,
	FG_RETRY_LATER,   /* 429 + Retry-After */
	FG_NEVER_FITS,    /* 4xx, x-should-retry: false */
};

struct fg_decision {
	enum fg_admit_verdict verdict;
	double cost;       /* units reserved (admit) or that would be (refusals) */
	uint64_t wait_ns;  /* refill time for `cost` (retry later) */
};

struct fg_decision fg_admission_decide(struct fg_bucket *b, double cost, uint64_t now_ns);

/* Retry-After is stretched at random by up to this fraction (of one
 * request's refill for rate limits, of the wait for queue timeouts). */
#define FG_RETRY_SPREAD 0.1

/* Nanoseconds until the client's turn for a request of `cost` the bucket
 * cannot cover yet. *turn_ns (per tenant, 0 at first) is when the bucket
 * will have refilled for every client told to retry so far: the turn is
 * after that plus this request's own refill, never before the bucket alone
 * would cover it, and becomes the new *turn_ns. `draw` in [0, 1) adds the
 * jitter, which *turn_ns does not include.
 * Unlike the bucket, the turns are a promise nobody holds: a client that
 * never returns leaves its refill in the bucket for the next one. */
uint64_t fg_retry_turn_ns(struct fg_bucket *b, double cost, uint64_t now_ns, uint64_t *turn_ns,
			  double draw);
/* A queue timeout is told to come back after about as long as it waited,
 * stretched by draw x FG_RETRY_SPREAD, so those that timed out together
 * return apart. */
uint64_t fg_retry_spread_ns(uint64_t waited_ns, double draw);

/* Retry-After in whole seconds, rounded up, at least 1; and milliseconds. */
uint64_t fg_retry_after_s(uint64_t wait_ns);
uint64_t fg_retry_after_ms(uint64_t wait_ns);

/* Fold one admitted request's cost into the tenant's typical cost
 * (typical <= 0 means none seen yet). */
double fg_typical_cost_update(double typical, double cost);

/* deny_until_ns for the kernel: 0 = no window, else when it ends. With
 * `open` (a window is in force) it is kept to the refill time however little
 * is left: FG_DENY_MIN_NS decides only whether to open one, and a window
 * closed early would hand the last of the wait back to 429s. */
uint64_t fg_deny_until_ns(struct fg_bucket *b, double typical_cost, uint64_t now_ns, int open);

#endif
