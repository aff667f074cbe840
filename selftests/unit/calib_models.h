/* calib_models.h — for the calibration tests (test_calibration.c,
 * test_calib_hist.c): the seed replica as the policy assumes it and as it
 * "really" is. Include after <cmocka.h> and <math.h>. */
#ifndef FAIRGATE_TEST_CALIB_MODELS_H
#define FAIRGATE_TEST_CALIB_MODELS_H

#include "selftests/unit/assert_near.h"
#include "policy/cost_model.h"
#include "policy/policy.h"

#define SEC 1000000000ull

/* The seed replica as the policy assumes it, and as it "really" is:
 * prefill MFU 0.38, decode MBU 0.62, 3 ms a step, 20 us a sequence. */
static inline void models(struct fg_cost_model *assumed, struct fg_cost_model *truth)
{
	static struct fg_policy policy;

	fg_policy_defaults(&policy);
	fg_cost_model_init(assumed, &policy.replica);
	struct fg_replica r = policy.replica;
	r.prefill_mfu = 0.38;
	r.decode_mbu = 0.62;
	fg_cost_model_init(truth, &r);
	truth->step_overhead_s = 3e-3;
	truth->seq_overhead_s = 20e-6;
	fg_cost_model_derive(truth);
}

#endif
