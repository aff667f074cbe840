/* ctl_status.c — `fairgatectl status`: the running agent's mode, listeners,
 * kernel enforcement, connections, and every tenant's quota state (bucket,
 * reserved units, in flight, admitted / rejected / settled), asked over the
 * control socket (--ctl, FAIRGATE_CTL, else /run/fairgate/ctl.sock). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/agent.h"
#include "agent/ctl_commands.h"
#include "agent/ctl_server.h"

static const char *ctl_path(const char *flag)
{
	if (flag)
		return flag;
	const char *env = getenv("FAIRGATE_CTL");
	return env && *env ? env : FG_CTL_SOCK_PATH;
}

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
	const json_t *req = json_object_get(r, "requests");

	printf("fairgated: %s mode, listening on %s, engine %s, metrics on %s, up %.0fs\n",
	       str(r, "mode"), str(r, "listen"), str(r, "engine"), str(r, "metrics_listen"),
	       num(r, "uptime_s"));
	printf("kernel enforcement: %s\n",
	       json_is_true(json_object_get(r, "kernel_enforcement")) ? "on" : "off (proxy and metering only)");
	printf("connections: %.0f clients; engine %.0f busy, %.0f idle\n", num(r, "client_connections"),
	       num(r, "engine_busy"), num(r, "engine_idle"));
	printf("requests: %.0f admitted, %.0f rejected, %.0f settled, %.0f unauthenticated, %.0f malformed\n",
	       num(req, "admitted"), num(req, "rejected"), num(req, "settled"),
	       num(req, "unauthenticated"), num(req, "malformed"));
	printf("decisions: %.0f, mean %.1f us\n\n", num(json_object_get(r, "decisions"), "count"),
	       num(json_object_get(r, "decisions"), "mean_us"));
	printf("%-20s %-10s %-7s %14s %12s %10s %8s %9s %9s %9s %s\n", "TENANT", "TIER", "CACHE",
	       "BUCKET", "OF", "RESERVED", "INFLIGHT", "ADMITTED", "REJECTED", "SETTLED", "DENY");
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(r, "tenants"), i, t) {
		char deny[32] = "-";
		if (json_is_true(json_object_get(t, "deny_window_open")))
			snprintf(deny, sizeof(deny), "%.0fms", num(t, "deny_remaining_ms"));
		printf("%-20s %-10s %-7s %14.0f %12.0f %10.0f %8.0f %9.0f %9.0f %9.0f %s\n",
		       str(t, "name"), str(t, "tier"), str(t, "cache"), num(t, "bucket_units"),
		       num(t, "burst_units"), num(t, "reserved_units"), num(t, "inflight"),
		       num(t, "admitted"), num(t, "rejected"), num(t, "settled"), deny);
	}
}

int fg_cmd_status(int argc, char **argv)
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
			fprintf(stderr, "usage: fairgatectl status [--json] [--ctl PATH]\n");
			return 2;
		}
	}
	if (optind != argc + 1) {
		fprintf(stderr, "usage: fairgatectl status [--json] [--ctl PATH]\n");
		return 2;
	}
	json_t *req = json_pack("{s:s}", "cmd", "status");
	json_t *reply = fg_ctl_call(ctl_path(ctl), req, err, sizeof(err));
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
