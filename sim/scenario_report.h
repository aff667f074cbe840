/* scenario_report.h — run the catalog's scenarios and report them, for the
 * README table (fg-scenarios) and the assertions (test_scenarios). */
#ifndef FAIRGATE_SIM_SCENARIO_REPORT_H
#define FAIRGATE_SIM_SCENARIO_REPORT_H

#include <stdio.h>
#include "sim/scenario.h"

struct scn_report {
	/* fair share: equal contracts, prompt-heavy (0) vs long outputs (1) */
	struct scn_result fair_replica, fair_raw, fair_direct;
	/* equal outputs, the fair queue deciding: 16K-token (0) vs 1K-token
	 * prompts (1), output priced by context and flat */
	struct scn_result ctx_priced, ctx_flat;
	/* the same, 1,000-token outputs, the node's KV binding */
	struct scn_result kv_bound;
	/* long contexts: 120K-token tenant (0) vs chat (1) */
	struct scn_result long_kv_on, long_kv_off, long_chat_alone;
	/* burst: steady victim (0) vs 300-request burst (1) */
	struct scn_result burst_alone, burst_gateway, burst_direct;
};

int scn_report_run(struct scn_report *r);
void scn_report_print_markdown(const struct scn_report *r, FILE *out);

#endif
