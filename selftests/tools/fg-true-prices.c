/* fg-true-prices — the prices of the hardware fairgate-sim really is (its
 * truth flags), by policy/cost_model.c's formulas: what calibration should
 * converge to. Tests compare the agent's measured prices with these.
 *
 *   fg-true-prices POLICY PREFILL_MFU DECODE_MBU STEP_OVERHEAD_MS SEQ_OVERHEAD_US
 *
 * prints {"output_weight", "prompt_token_us", "decode_step_ms",
 * "output_units_at_0", "output_units_per_1k_context"} at the policy's
 * reference batch and context, and the step's terms as policy/calibration.c
 * fits them: {"step_fixed_ms", "step_per_seq_us", "step_per_context_ns"}. */
#include <stdio.h>
#include <stdlib.h>

#include "policy/cost_model.h"
#include "policy/policy.h"

int main(int argc, char **argv)
{
	static struct fg_policy p;
	struct fg_policy_error err = { 0 };
	struct fg_cost_model cm;
	char *end[4];

	if (argc != 6) {
		fprintf(stderr, "usage: fg-true-prices POLICY PREFILL_MFU DECODE_MBU "
				"STEP_OVERHEAD_MS SEQ_OVERHEAD_US\n");
		return 2;
	}
	if (fg_policy_parse_file(argv[1], &p, &err)) {
		fprintf(stderr, "%s:%u:%u: %s\n", argv[1], err.line, err.col, err.message);
		return 1;
	}
	double mfu = strtod(argv[2], &end[0]), mbu = strtod(argv[3], &end[1]);
	double step_ms = strtod(argv[4], &end[2]), seq_us = strtod(argv[5], &end[3]);
	for (int i = 0; i < 4; i++)
		if (*end[i] || end[i] == argv[i + 2]) {
			fprintf(stderr, "'%s' is not a number\n", argv[i + 2]);
			return 2;
		}
	if (!(mfu > 0 && mfu <= 1 && mbu > 0 && mbu <= 1 && step_ms >= 0 && seq_us >= 0)) {
		fprintf(stderr, "efficiencies in (0, 1], overheads >= 0\n");
		return 2;
	}
	p.replica.prefill_mfu = mfu;
	p.replica.decode_mbu = mbu;
	fg_cost_model_init_policy(&cm, &p);
	cm.step_overhead_s = step_ms * 1e-3;
	cm.seq_overhead_s = seq_us * 1e-6;
	fg_cost_model_derive(&cm);
	printf("{\"output_weight\": %.9g, \"prompt_token_us\": %.9g, \"decode_step_ms\": %.9g, "
	       "\"output_units_at_0\": %.9g, \"output_units_per_1k_context\": %.9g, "
	       "\"step_fixed_ms\": %.9g, \"step_per_seq_us\": %.9g, \"step_per_context_ns\": %.9g}\n",
	       cm.output_weight, cm.prompt_token_s * 1e6, cm.decode_step_s * 1e3,
	       cm.output_weights_share_s / cm.prompt_token_s,
	       cm.output_s_per_context * 1e3 / cm.prompt_token_s,
	       fg_decode_step_batch_s(&cm, 0, 0) * 1e3, cm.seq_overhead_s * 1e6,
	       cm.output_s_per_context * 1e9);
	return 0;
}
