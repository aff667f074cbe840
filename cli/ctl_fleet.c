/* ctl_fleet.c — `fairgatectl fleet`: this node's view of the fleet bucket
 * (agent.fleet): the store and the grant thread, the fleet's peaks and
 * oversubscription ratio, and per tenant the mode, lease, hold cap,
 * demand, the fleet bucket's level and the other nodes' demand and rates,
 * asked over the control socket (--ctl, FAIRGATE_CTL, else
 * /run/fairgate/ctl.sock). */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/ctl_commands.h"
#include "lib/ctl_protocol.h"

static double num(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "?";
}

static void print_human(const json_t *r)
{
	const json_t *th = json_object_get(r, "thread"), *fl = json_object_get(r, "fleet");
	bool up = json_is_true(json_object_get(r, "reachable"));

	printf("fleet: node %s (incarnation %s), store %s: %s\n", str(r, "node"),
	       str(r, "incarnation"), str(r, "store"), up ? "answers" : "does not answer");
	if (!up)
		printf("  last error: %s\n", str(r, "last_error"));
	printf("period %.2g s, buffer %.2g s, a silent node is presumed gone after %.0f s; %.0f outages seen\n",
	       num(r, "period_s"), num(r, "buffer_s"), num(r, "node_timeout_s"), num(r, "outages"));
	printf("grant thread: %.0f batches, %.0f calls (%.0f errors), %.0f connects (%.0f failed), %.3f s CPU\n",
	       num(th, "batches"), num(th, "calls"), num(th, "errors"), num(th, "connects"),
	       num(th, "connect_failures"), num(th, "cpu_s"));
	if (num(fl, "windows_closed") > 0)
		printf("fleet: %.0f live nodes; peak %.0f units/s, sum of tenant peaks %.0f units/s, "
		       "oversubscription %.2f (%.0f s windows, %.0f closed)\n",
		       num(fl, "live_nodes"), num(fl, "peak_units_per_s"),
		       num(fl, "sum_tenant_peaks_units_per_s"), num(fl, "oversubscription"),
		       num(fl, "window_s"), num(fl, "windows_closed"));
	else
		printf("fleet: %.0f live nodes; no peak window closed yet (%.0f s windows)\n",
		       num(fl, "live_nodes"), num(fl, "window_s"));
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
						      o ? ", " : "", str(n, "node"), str(n, "state"),
						      num(n, "demand_units_per_s"), num(n, "rate_units_per_s"));
		printf("%-16s %10.0f %-8s %10.1f %10.0f %10.0f %10.1f %11.0f %6.0f %10.0f %s\n",
		       str(t, "name"), num(t, "contract_units_per_s"), str(t, "mode"),
		       num(t, "rate_units_per_s"), num(t, "bucket_units"), num(t, "hold_cap_units"),
		       num(t, "demand_units_per_s"), num(t, "fleet_level_units"), num(t, "live_nodes"),
		       num(t, "fleet_peak_units_per_s"), o ? others : "-");
	}
	printf("\n(OTHER NODES: name, state, demand/rate in units/s)\n");
}

int fg_cmd_fleet(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "ctl", required_argument, NULL, 'c' },
		{ 0 }
	};
	const char *ctl = NULL;
	int opt, json = 0;
	char err[512];

	optind = 0;
	while ((opt = getopt_long(argc + 1, argv - 1, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j': json = 1; break;
		case 'c': ctl = optarg; break;
		default:
			fprintf(stderr, "usage: fairgatectl fleet [--json] [--ctl PATH]\n");
			return 2;
		}
	}
	if (optind != argc + 1) {
		fprintf(stderr, "usage: fairgatectl fleet [--json] [--ctl PATH]\n");
		return 2;
	}
	json_t *req = json_pack("{s:s}", "cmd", "fleet");
	json_t *reply = fg_ctl_call(fg_ctl_path(ctl), req, err, sizeof(err));
	json_decref(req);
	if (!reply) {
		fprintf(stderr, "fairgatectl: %s\n", err);
		return 1;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		fprintf(stderr, "fairgatectl: %s\n", str(reply, "error"));
		json_decref(reply);
		return 1;
	}
	if (json) {
		json_object_del(reply, "ok");
		json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		print_human(reply);
	}
	json_decref(reply);
	return 0;
}
