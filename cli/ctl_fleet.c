/* ctl_fleet.c — `fairgatectl fleet`: this node's view of the fleet bucket
 * (agent.fleet): the store and the grant thread, the fleet's peaks and
 * oversubscription ratio, and per tenant the mode, lease, hold cap,
 * demand, the fleet bucket's level and the other nodes' demand and rates,
 * asked over the control socket (--ctl, FAIRGATE_CTL, else
 * /run/fairgate/ctl.sock). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/ctl_commands.h"
#include "cli/ctl_show.h"

static void print_human(const json_t *r)
{
	const json_t *th = json_object_get(r, "thread"), *fl = json_object_get(r, "fleet");
	bool up = json_is_true(json_object_get(r, "reachable"));

	printf("fleet: node %s (incarnation %s), store %s: %s\n", fg_show_str(r, "node"),
	       fg_show_str(r, "incarnation"), fg_show_str(r, "store"), up ? "answers" : "does not answer");
	if (!up)
		printf("  last error: %s\n", fg_show_str(r, "last_error"));
	printf("period %.2g s, buffer %.2g s, a silent node is presumed gone after %.0f s; %.0f outages seen\n",
	       fg_show_num(r, "period_s"), fg_show_num(r, "buffer_s"), fg_show_num(r, "node_timeout_s"), fg_show_num(r, "outages"));
	printf("grant thread: %.0f batches, %.0f calls (%.0f errors), %.0f connects (%.0f failed), %.3f s CPU\n",
	       fg_show_num(th, "batches"), fg_show_num(th, "calls"), fg_show_num(th, "errors"), fg_show_num(th, "connects"),
	       fg_show_num(th, "connect_failures"), fg_show_num(th, "cpu_s"));
	if (fg_show_num(fl, "windows_closed") > 0)
		printf("fleet: %.0f live nodes; peak %.0f units/s, sum of tenant peaks %.0f units/s, "
		       "oversubscription %.2f (%.0f s windows, %.0f closed)\n",
		       fg_show_num(fl, "live_nodes"), fg_show_num(fl, "peak_units_per_s"),
		       fg_show_num(fl, "sum_tenant_peaks_units_per_s"), fg_show_num(fl, "oversubscription"),
		       fg_show_num(fl, "window_s"), fg_show_num(fl, "windows_closed"));
	else
		printf("fleet: %.0f live nodes; no peak window closed yet (%.0f s windows)\n",
		       fg_show_num(fl, "live_nodes"), fg_show_num(fl, "window_s"));
	printf("\n%-16s %10s %-8s %10s %10s %10s %10s %11s %6s %10s %s\n", "TENANT", "CONTRACT", "MODE",
	       "RATE", "BUCKET", "HOLD CAP", "DEMAND", "FLEET LEVEL", "NODES", "FLEET PEAK", "OTHER NODES");
	size_t i, k;
	json_t *t, *n;
	json_array_foreach(json_object_get(r, "tenants"), i, t) {
		char others[512] = "";
		size_t o = 0;
		json_array_foreach(json_object_get(t, "nodes"), k, n)
			if (o < sizeof(others))
				o += (size_t)snprintf(others + o, sizeof(others) - o, "%s%s %s %.0f/%.0f",
						      o ? ", " : "", fg_show_str(n, "node"), fg_show_str(n, "state"),
						      fg_show_num(n, "demand_units_per_s"), fg_show_num(n, "rate_units_per_s"));
		printf("%-16s %10.0f %-8s %10.1f %10.0f %10.0f %10.1f %11.0f %6.0f %10.0f %s\n",
		       fg_show_str(t, "name"), fg_show_num(t, "contract_units_per_s"), fg_show_str(t, "mode"),
		       fg_show_num(t, "rate_units_per_s"), fg_show_num(t, "bucket_units"), fg_show_num(t, "hold_cap_units"),
		       fg_show_num(t, "demand_units_per_s"), fg_show_num(t, "fleet_level_units"), fg_show_num(t, "live_nodes"),
		       fg_show_num(t, "fleet_peak_units_per_s"), o ? others : "-");
	}
	printf("\n(OTHER NODES: name, state, demand/rate in units/s)\n");
}

int fg_cmd_fleet(int argc, char **argv)
{
	return fg_show_command(argc, argv, "fleet", print_human);
}
