/* admission.h — the per-request verdict and the deny-window rule.
 *
 * A request priced at `cost` units is admitted when the tenant's bucket
 * covers it (the cost is reserved right away), told to retry after the
 * bucket's refill time for that cost (429) when it does not yet, or refused
 * for good (4xx, x-should-retry: false) when even a full bucket could not
 * hold it. Refusals never touch the bucket.
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
