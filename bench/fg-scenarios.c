/* fg-scenarios.c — print the seed's scenarios (sim/scenario_catalog.c) as
 * the README's table. Virtual time: deterministic, takes about a second. */
#include <stdio.h>
#include <stdlib.h>

#include "sim/scenario_report.h"

int main(void)
{
	struct scn_report *r = calloc(1, sizeof(*r));

	if (!r || scn_report_run(r)) {
		fprintf(stderr, "fg-scenarios: run failed (out of memory)\n");
		free(r);
		return 1;
	}
	scn_report_print_markdown(r, stdout);
	free(r);
	return 0;
}
