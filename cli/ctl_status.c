/* ctl_status.c — `fairgatectl status`: the running agent's mode, listeners,
 * kernel enforcement, connections, the scheduler (queue, KV, engine window,
 * overload, engine metrics, peaks and the oversubscription ratio), and every
 * tenant's state (bucket, reserved units, queued, in flight, KV, admitted /
 * rejected / timed out, peak units/s, units billed per output token), asked over the control socket (--ctl,
 * FAIRGATE_CTL, else /run/fairgate/ctl.sock). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
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

static void print_scheduling(const json_t *sc)
{
	const json_t *kv = json_object_get(sc, "kv"), *ew = json_object_get(sc, "engine_window");
	const json_t *ov = json_object_get(sc, "overload"), *pk = json_object_get(sc, "peaks");
	const json_t *en = json_object_get(sc, "engine");
	char shed[256] = "";
	size_t n = 0, i;
	json_t *v;

	if (!sc)
		return;
	json_array_foreach(json_object_get(ov, "shed_tiers"), i, v)
		if (n < sizeof(shed))
			n += (size_t)snprintf(shed + n, sizeof(shed) - n, "%s%s", n ? ", " : "",
					      json_string_value(v));
	printf("scheduling: metering %s (output priced %s), engine %s; %.0f queued (%.2f s of replica time); "
	       "KV reserved %.0f of %.0f tokens; engine window %.0f requests, %.0f of %.0f prefill tokens\n",
	       str(sc, "metering"),
	       strcmp(str(sc, "output_pricing"), "flat") ? "by context" : "flat",
	       str(sc, "engine_scheduling"), num(sc, "queued"),
	       num(sc, "backlog_s"), num(kv, "reserved_tokens"), num(kv, "reservable_tokens"),
	       num(ew, "pending_requests"), num(ew, "pending_tokens"), num(ew, "budget_tokens"));
	if (num(ov, "level") >= 0)
		printf("overload: the kernel sheds new connections of tier(s) %s\n", shed);
	else
		printf("overload: none\n");
	if (json_is_true(json_object_get(en, "metrics_up")))
		printf("engine metrics: %.0f waiting, %.0f running, KV %.0f%%; %.0f preemptions since start\n",
		       num(en, "waiting"), num(en, "running"), 100 * num(en, "kv_usage"),
		       num(en, "preemptions"));
	else
		printf("engine metrics: unreachable (%.0f failed scrapes); %.0f preemptions since start\n",
		       num(en, "scrape_failures"), num(en, "preemptions"));
	if (num(pk, "windows_closed") > 0)
		printf("peaks (%.0f s windows): node %.0f units/s, sum of tenant peaks %.0f units/s, "
		       "oversubscription %.2f\n",
		       num(pk, "window_s"), num(pk, "node_peak_units_per_s"),
		       num(pk, "sum_tenant_peaks_units_per_s"), num(pk, "oversubscription"));
	else
		printf("peaks (%.0f s windows): none closed yet, oversubscription not measured\n",
		       num(pk, "window_s"));
}

/* gate (XDP): on eth0 (native); off on eth9: no such interface */
static void print_gate(const json_t *g)
{
	const json_t *ifaces = json_object_get(g, "interfaces");
	size_t i;
	json_t *f;

	if (!g)
		return;
	printf("gate (XDP)%s:", json_is_true(json_object_get(g, "auto")) ? " [interfaces: auto]" : "");
	if (!json_array_size(ifaces))
		printf(" off: %s\n", json_object_get(g, "note") ? str(g, "note") : "no interfaces in the policy");
	else
		putchar('\n');
	json_array_foreach(ifaces, i, f) {
		if (json_is_true(json_object_get(f, "attached")))
			printf("  on %s (%s)\n", str(f, "name"), str(f, "mode"));
		else
			printf("  off on %s: %s\n", str(f, "name"), str(f, "error"));
	}
}

static void print_watch(const json_t *w)
{
	if (!w)
		return;
	if (!json_is_true(json_object_get(w, "on"))) {
		printf("policy watch: off (changes take `fairgatectl policy apply`)\n");
		return;
	}
	printf("policy watch: on; %.0f changes applied, %.0f refused", num(w, "applied"), num(w, "refused"));
	if (json_object_get(w, "last_result"))
		printf("; last, %.0fs ago: %s", num(w, "last_change_age_s"), str(w, "last_result"));
	putchar('\n');
}

static void print_human(const json_t *r)
{
	const json_t *req = json_object_get(r, "requests");

	const char *metrics = str(r, "metrics_listen");

	printf("fairgated: %s mode, listening on %s, engine %s, metrics %s%s, up %.0fs\n",
	       str(r, "mode"), str(r, "listen"), str(r, "engine"),
	       strcmp(metrics, "off") ? "on " : "", metrics, num(r, "uptime_s"));
	if (json_is_true(json_object_get(r, "kernel_enforcement")))
		printf("kernel enforcement: on\n");
	else
		printf("kernel enforcement: off (proxy and metering only)%s%s\n",
		       json_object_get(r, "kernel_off_reason") ? ": " : "",
		       json_object_get(r, "kernel_off_reason") ? str(r, "kernel_off_reason") : "");
	print_gate(json_object_get(r, "gate"));
	print_watch(json_object_get(r, "policy_watch"));
	const json_t *ix = json_object_get(r, "source_index");
	if (ix)
		printf("source index: %s, %.0f learned + %.0f CIDRs%s, %.0f rebuilds (%.0f failed, %.0f redone)\n",
		       json_is_true(json_object_get(ix, "valid")) ? "valid" : "not valid (gate asks the maps)",
		       num(ix, "learned"), num(ix, "cidrs"),
		       json_is_true(json_object_get(ix, "cidrs_by_trie")) ? " (CIDRs by the trie: too many prefix lengths)" : "",
		       num(ix, "rebuilds"), num(ix, "failed"), num(ix, "redone"));
	printf("connections: %.0f clients; engine %.0f busy, %.0f idle\n", num(r, "client_connections"),
	       num(r, "engine_busy"), num(r, "engine_idle"));
	printf("requests: %.0f admitted, %.0f rejected, %.0f settled, %.0f unauthenticated, %.0f malformed\n",
	       num(req, "admitted"), num(req, "rejected"), num(req, "settled"),
	       num(req, "unauthenticated"), num(req, "malformed"));
	printf("decisions: %.0f, mean %.1f us\n", num(json_object_get(r, "decisions"), "count"),
	       num(json_object_get(r, "decisions"), "mean_us"));
	print_scheduling(json_object_get(r, "scheduling"));
	printf("\n%-16s %-12s %-7s %11s %11s %9s %6s %6s %15s %9s %9s %9s %10s %9s %s\n", "TENANT", "TIER",
	       "CACHE", "BUCKET", "OF", "RESERVED", "QUEUED", "INFL", "KV RESERVED/CAP", "ADMITTED",
	       "REJECTED", "TIMEOUTS", "PEAK U/S", "U/OUT TOK", "DENY");
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(r, "tenants"), i, t) {
		char deny[32] = "-", kv[40], per_out[24] = "-";
		/* units billed per output token: 3.09 at the reference context,
		 * more for a tenant that decodes against long ones */
		if (num(t, "output_tokens_billed") > 0)
			snprintf(per_out, sizeof(per_out), "%.2f",
				 num(t, "output_units_billed") / num(t, "output_tokens_billed"));
		if (json_is_true(json_object_get(t, "deny_window_open")))
			snprintf(deny, sizeof(deny), "%.0fms", num(t, "deny_remaining_ms"));
		if (num(t, "kv_cap_tokens") > 0)
			snprintf(kv, sizeof(kv), "%.0f/%.0f", num(t, "kv_reserved_tokens"),
				 num(t, "kv_cap_tokens"));
		else
			snprintf(kv, sizeof(kv), "%.0f/-", num(t, "kv_reserved_tokens"));
		printf("%-16s %-12s %-7s %11.0f %11.0f %9.0f %6.0f %6.0f %15s %9.0f %9.0f %9.0f %10.0f %9s %s\n",
		       str(t, "name"), str(t, "tier"), str(t, "cache"), num(t, "bucket_units"),
		       num(t, "burst_units"), num(t, "reserved_units"), num(t, "queued"),
		       num(t, "inflight"), kv, num(t, "admitted"), num(t, "rejected"),
		       num(t, "timed_out"), num(t, "peak_units_per_s"), per_out, deny);
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
