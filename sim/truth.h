/* truth.h — the hardware fairgate-sim really is, apart from the policy the
 * gateway reads.
 *
 * By default the simulated replica is exactly the policy's `replica` block
 * (its prefill MFU and decode MBU, no overheads), so the gateway's cost
 * model checks its own arithmetic. A truth makes the gateway's assumptions
 * wrong by a known amount: the efficiencies the hardware really reaches,
 * and the costs the cost model does not have at all, a fixed overhead per
 * engine step (kernel launches, scheduling, sampling) and one per sequence
 * in the step (its slice of the batch's bookkeeping). A step then takes
 *
 *   step_s = step_overhead + seq_overhead * scheduled_sequences
 *          + prefill_tokens * prompt_token_s(true MFU)
 *          + (any decoding sequence ? fg_decode_step_s(true MBU, sum of contexts) : 0)
 *
 * and each sequence in it is charged its share (engine.h: the attribution).
 *
 * From flags (--true-prefill-mfu, --true-decode-mbu, --true-step-overhead-ms,
 * --true-seq-overhead-us) or a YAML file (--truth FILE) with those keys,
 * bare or under a top-level `truth:`, e.g.
 *
 *   truth:
 *     prefill_mfu: 0.38
 *     decode_mbu: 0.62
 *     step_overhead_ms: 3
 *     seq_overhead_us: 20
 */
#ifndef FAIRGATE_SIM_TRUTH_H
#define FAIRGATE_SIM_TRUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/cost_model.h"
#include "policy/policy.h"

struct sim_truth {
	double prefill_mfu;      /* 0 = the policy's */
	double decode_mbu;       /* 0 = the policy's */
	double step_overhead_s;
	double seq_overhead_s;
};

/* Keys of a truth file and their flags' spelling; -1 if `key` is none. */
int sim_truth_set(struct sim_truth *t, const char *key, double value, char *why, size_t len);

/* Read a truth file over *t (keys it does not name are left as they are).
 * 0, or -1 with "FILE:LINE:COL: why" in err. */
int sim_truth_load(const char *path, struct sim_truth *t, char *err, size_t errlen);

/* The true hardware as a cost model: the policy's replica with the true
 * efficiencies (the same formulas, policy/cost_model.c). */
void sim_truth_hardware(const struct sim_truth *t, const struct fg_replica *policy,
			struct fg_cost_model *out);

/* True when the truth is the policy's own model. */
bool sim_truth_is_policy(const struct sim_truth *t);

#endif
