/* ctl_status.c — `fairgatectl status`: the running agent's mode, listeners,
 * kernel enforcement, connections, the scheduler (queue, KV, engine window,
 * overload, engine metrics, peaks and the oversubscription ratio), and every
 * tenant's state (bucket, reserved units, queued, in flight, KV, admitted /
 * rejected / timed out, peak units/s, units billed per output token), asked over the control socket (--ctl,
 * FAIRGATE_CTL, else /run/fairgate/ctl.sock). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl_commands.h"
#include "cli/ctl_calibration.h"
#include "cli/ctl_show.h"

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
	       fg_show_str(sc, "metering"),
	       strcmp(fg_show_str(sc, "output_pricing"), "flat") ? "by context" : "flat",
	       fg_show_str(sc, "engine_scheduling"), fg_show_num(sc, "queued"),
	       fg_show_num(sc, "backlog_s"), fg_show_num(kv, "reserved_tokens"), fg_show_num(kv, "reservable_tokens"),
	       fg_show_num(ew, "pending_requests"), fg_show_num(ew, "pending_tokens"), fg_show_num(ew, "budget_tokens"));
	const json_t *tp = json_object_get(sc, "tpot");
	if (tp)
		printf("TPOT reservation: target %.1f ms; batch %.0f sequences, %.0f tokens of context reserved "
		       "(%.0f the TPOT tiers', %.0f kept for them) of %.0f; modeled step %.2f ms\n",
		       fg_show_num(tp, "target_ms"), fg_show_num(tp, "sequences"),
		       fg_show_num(tp, "context_tokens"), fg_show_num(tp, "holders_tokens"),
		       fg_show_num(tp, "reserve_tokens"), fg_show_num(tp, "cap_tokens"),
		       fg_show_num(tp, "modeled_step_ms"));
	if (fg_show_num(ov, "level") >= 0)
		printf("overload: the kernel sheds new connections of tier(s) %s\n", shed);
	else
		printf("overload: none\n");
	if (json_is_true(json_object_get(en, "metrics_up")))
		printf("engine metrics: %.0f waiting, %.0f running, KV %.0f%%; %.0f preemptions since start\n",
		       fg_show_num(en, "waiting"), fg_show_num(en, "running"), 100 * fg_show_num(en, "kv_usage"),
		       fg_show_num(en, "preemptions"));
	else
		printf("engine metrics: unreachable (%.0f failed scrapes); %.0f preemptions since start\n",
		       fg_show_num(en, "scrape_failures"), fg_show_num(en, "preemptions"));
	if (fg_show_num(pk, "windows_closed") > 0)
		printf("peaks (%.0f s windows): node %.0f units/s, sum of tenant peaks %.0f units/s, "
		       "oversubscription %.2f\n",
		       fg_show_num(pk, "window_s"), fg_show_num(pk, "node_peak_units_per_s"),
		       fg_show_num(pk, "sum_tenant_peaks_units_per_s"), fg_show_num(pk, "oversubscription"));
	else
		printf("peaks (%.0f s windows): none closed yet, oversubscription not measured\n",
		       fg_show_num(pk, "window_s"));
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
		printf(" off: %s\n", json_object_get(g, "note") ? fg_show_str(g, "note") : "no interfaces in the policy");
	else
		putchar('\n');
	json_array_foreach(ifaces, i, f) {
		if (json_is_true(json_object_get(f, "attached")))
			printf("  on %s (%s)\n", fg_show_str(f, "name"), fg_show_str(f, "mode"));
		else
			printf("  off on %s: %s\n", fg_show_str(f, "name"), fg_show_str(f, "error"));
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
	printf("policy watch: on; %.0f changes applied, %.0f refused", fg_show_num(w, "applied"), fg_show_num(w, "refused"));
	if (json_object_get(w, "last_result"))
		printf("; last, %.0fs ago: %s", fg_show_num(w, "last_change_age_s"), fg_show_str(w, "last_result"));
	putchar('\n');
}

static void print_human(const json_t *r)
{
	const json_t *req = json_object_get(r, "requests");

	const char *metrics = fg_show_str(r, "metrics_listen");

	printf("fairgated: %s mode, listening on %s, engine %s, metrics %s%s, up %.0fs\n",
	       fg_show_str(r, "mode"), fg_show_str(r, "listen"), fg_show_str(r, "engine"),
	       strcmp(metrics, "off") ? "on " : "", metrics, fg_show_num(r, "uptime_s"));
	if (json_is_true(json_object_get(r, "kernel_enforcement")))
		printf("kernel enforcement: on\n");
	else
		printf("kernel enforcement: off (proxy and metering only)%s%s\n",
		       json_object_get(r, "kernel_off_reason") ? ": " : "",
		       json_object_get(r, "kernel_off_reason") ? fg_show_str(r, "kernel_off_reason") : "");
	print_gate(json_object_get(r, "gate"));
	print_watch(json_object_get(r, "policy_watch"));
	const json_t *ix = json_object_get(r, "source_index");
	if (ix)
		printf("source index: %s, %.0f learned + %.0f CIDRs%s, %.0f rebuilds (%.0f failed, %.0f redone)\n",
		       json_is_true(json_object_get(ix, "valid")) ? "valid" : "not valid (gate asks the maps)",
		       fg_show_num(ix, "learned"), fg_show_num(ix, "cidrs"),
		       json_is_true(json_object_get(ix, "cidrs_by_trie")) ? " (CIDRs by the trie: too many prefix lengths)" : "",
		       fg_show_num(ix, "rebuilds"), fg_show_num(ix, "failed"), fg_show_num(ix, "redone"));
	printf("connections: %.0f clients; engine %.0f busy, %.0f idle\n", fg_show_num(r, "client_connections"),
	       fg_show_num(r, "engine_busy"), fg_show_num(r, "engine_idle"));
	printf("requests: %.0f admitted, %.0f rejected, %.0f settled, %.0f unauthenticated, %.0f malformed\n",
	       fg_show_num(req, "admitted"), fg_show_num(req, "rejected"), fg_show_num(req, "settled"),
	       fg_show_num(req, "unauthenticated"), fg_show_num(req, "malformed"));
	printf("decisions: %.0f, mean %.1f us\n", fg_show_num(json_object_get(r, "decisions"), "count"),
	       fg_show_num(json_object_get(r, "decisions"), "mean_us"));
	print_scheduling(json_object_get(r, "scheduling"));
	fg_show_calibration(json_object_get(r, "calibration"));
	printf("\n%-16s %-12s %-7s %11s %11s %9s %6s %6s %15s %9s %9s %9s %10s %9s %s\n", "TENANT", "TIER",
	       "CACHE", "BUCKET", "OF", "RESERVED", "QUEUED", "INFL", "KV RESERVED/CAP", "ADMITTED",
	       "REJECTED", "TIMEOUTS", "PEAK U/S", "U/OUT TOK", "DENY");
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(r, "tenants"), i, t) {
		char deny[64] = "-", kv[40], per_out[24] = "-";
		/* units billed per output token: 3.09 at the reference context,
		 * more for a tenant that decodes against long ones */
		if (fg_show_num(t, "output_tokens_billed") > 0)
			snprintf(per_out, sizeof(per_out), "%.2f",
				 fg_show_num(t, "output_units_billed") / fg_show_num(t, "output_tokens_billed"));
		if (json_is_true(json_object_get(t, "deny_window_open")))
			snprintf(deny, sizeof(deny), "%.0fms %s %s", fg_show_num(t, "deny_remaining_ms"),
				 fg_show_str(t, "deny_verdict"), fg_show_str(t, "deny_source"));
		if (fg_show_num(t, "kv_cap_tokens") > 0)
			snprintf(kv, sizeof(kv), "%.0f/%.0f", fg_show_num(t, "kv_reserved_tokens"),
				 fg_show_num(t, "kv_cap_tokens"));
		else
			snprintf(kv, sizeof(kv), "%.0f/-", fg_show_num(t, "kv_reserved_tokens"));
		printf("%-16s %-12s %-7s %11.0f %11.0f %9.0f %6.0f %6.0f %15s %9.0f %9.0f %9.0f %10.0f %9s %s\n",
		       fg_show_str(t, "name"), fg_show_str(t, "tier"), fg_show_str(t, "cache"), fg_show_num(t, "bucket_units"),
		       fg_show_num(t, "burst_units"), fg_show_num(t, "reserved_units"), fg_show_num(t, "queued"),
		       fg_show_num(t, "inflight"), kv, fg_show_num(t, "admitted"), fg_show_num(t, "rejected"),
		       fg_show_num(t, "timed_out"), fg_show_num(t, "peak_units_per_s"), per_out, deny);
	}
}

int fg_cmd_status(int argc, char **argv)
{
	return fg_show_command(argc, argv, "status", print_human);
}
