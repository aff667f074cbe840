/* ctl_tenant.c — `fairgatectl tenant list|show|deny|allow`.
 *
 * list and show read the pinned maps directly (pin dir from --pin-dir,
 * FAIRGATE_PIN_DIR, else /sys/fs/bpf/fairgate), so they work while
 * fairgated is down; deny and allow change state through the control
 * socket (--ctl, FAIRGATE_CTL, else /run/fairgate/ctl.sock) so the agent
 * that owns the maps stays the only writer. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <jansson.h>

#include "cli/ctl_commands.h"
#include "cli/ctl_show.h"
#include "lib/event_loop.h"
#include "maps/kernel_maps.h"

struct tenant_opts {
	int json;
	const char *pin_dir;
	const char *ctl;
	const char *mode;
	const char *dur;
	const char *name;
};

/* One run of getopt over the options, from optind on; -1 on a bad one. */
static int take_options(int argc, char **argv, struct tenant_opts *o, const char *usage)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pin-dir", required_argument, NULL, 'd' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "mode", required_argument, NULL, 'm' },
		{ "for", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int opt;

	while ((opt = getopt_long(argc + 1, argv - 1, "+h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j': o->json = 1; break;
		case 'd': o->pin_dir = optarg; break;
		case 'c': o->ctl = optarg; break;
		case 'm': o->mode = optarg; break;
		case 'f': o->dur = optarg; break;
		case 'h': printf("usage: fairgatectl %s\n", usage); exit(0);
		default: fprintf(stderr, "usage: fairgatectl %s\n", usage); return -1;
		}
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct tenant_opts *o, int want_name,
		      const char *usage)
{
	memset(o, 0, sizeof(*o));
	o->pin_dir = getenv("FAIRGATE_PIN_DIR") ? getenv("FAIRGATE_PIN_DIR") : FG_PIN_DIR;
	/* argv[0] is the first word after the subcommand: getopt skips it. */
	optind = 0;
	if (take_options(argc, argv, o, usage))
		return -1;
	/* Options may come before or after NAME. */
	if (want_name) {
		if (optind < argc + 1)
			o->name = argv[optind++ - 1];
		if (take_options(argc, argv, o, usage))
			return -1;
		if (!o->name) {
			fprintf(stderr, "usage: fairgatectl %s\n", usage);
			return -1;
		}
	}
	if (optind != argc + 1) {
		fprintf(stderr, "fairgatectl: unexpected argument '%s'\nusage: fairgatectl %s\n",
			argv[optind - 1], usage);
		return -1;
	}
	return 0;
}

/* "90s", "5m", "1h", "1h30m", "250ms", "2d", or plain seconds. */
static int parse_duration(const char *s, double *out)
{
	double total = 0;
	const char *p = s;

	if (!*p)
		return -1;
	while (*p) {
		char *end;
		double v = strtod(p, &end);
		double unit;

		if (end == p || !isfinite(v) || v < 0)
			return -1;
		p = end;
		if (!strncmp(p, "ms", 2)) { unit = 1e-3; p += 2; }
		else if (*p == 's') { unit = 1; p++; }
		else if (*p == 'm') { unit = 60; p++; }
		else if (*p == 'h') { unit = 3600; p++; }
		else if (*p == 'd') { unit = 86400; p++; }
		else if (!*p && p == end && total == 0) { unit = 1; }
		else return -1;
		total += v * unit;
	}
	if (!(total > 0))
		return -1;
	*out = total;
	return 0;
}

static void format_duration(double s, char *buf, size_t len)
{
	long t = (long)ceil(s);

	if (t >= 3600)
		snprintf(buf, len, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
	else if (t >= 60)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%lds", t);
}

/* The verdict in force now and the seconds left in the window. */
static int verdict_now(const struct fg_tenant_state *t, uint64_t now, double *left_s)
{
	*left_s = 0;
	if (t->deny_until_ns <= now ||
	    (t->verdict != FG_VERDICT_DELAY && t->verdict != FG_VERDICT_SHED))
		return FG_VERDICT_ALLOW;
	*left_s = (double)(t->deny_until_ns - now) / 1e9;
	return (int)t->verdict;
}

static const char *deny_source_name(uint32_t s)
{
	return s == FG_DENY_OPERATOR ? "operator" : s == FG_DENY_QUOTA ? "quota" : "none";
}

static json_t *tenant_json(const struct fg_maps *m, uint32_t id, uint64_t now)
{
	const struct fg_tenant_state *t = &m->tenants[id];
	struct fg_tenant_quota snap, *q = &snap;
	struct fg_tenant_counters c = { 0 };
	double left;
	int v = verdict_now(t, now, &left);

	fg_quota_snapshot(&t->quota, &snap);
	fg_maps_tenant_counters(m, id, &c);
	return json_pack("{s:s, s:i, s:s, s:i, s:s, s:f, s:s, "
			 "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
			 "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:I, s:I, s:b}}",
			 "name", t->name, "id", (int)id, "tier", t->tier, "tier_rank", (int)t->tier_rank,
			 "verdict", fg_verdict_name(v), "deny_remaining_s", left, "deny_source",
			 v == FG_VERDICT_ALLOW ? "none" : deny_source_name(t->deny_source),
			 "counters",
			 "syn_passed", (json_int_t)c.syn_passed, "syn_delayed", (json_int_t)c.syn_delayed,
			 "syn_shed", (json_int_t)c.syn_shed, "allowance_used",
			 (json_int_t)c.allowance_used, "overload_shed", (json_int_t)c.overload_shed,
			 "steer_refused", (json_int_t)c.steer_refused, "shed_dropped",
			 (json_int_t)c.shed_dropped,
			 "quota",
			 "bucket_units", (json_int_t)q->bucket_units, "rate_units_per_s",
			 (json_int_t)q->rate_units_per_s, "burst_units", (json_int_t)q->burst_units,
			 "reserved_units", (json_int_t)q->reserved_units, "kv_resident_tokens",
			 (json_int_t)q->kv_resident_tokens, "kv_cap_tokens",
			 (json_int_t)q->kv_cap_tokens, "inflight", (int)q->inflight, "queued",
			 (int)q->queued, "admitted", (json_int_t)q->admitted, "rejected",
			 (json_int_t)q->rejected, "published", q->updated_ns != 0);
}

static int open_maps(struct fg_maps *m, const struct tenant_opts *o)
{
	char err[512];

	if (fg_maps_open_pinned(m, o->pin_dir, err, sizeof(err))) {
		fprintf(stderr, "fairgatectl: %s\n", err);
		return -1;
	}
	return 0;
}

static int print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));

	json_decref(j);
	if (!s)
		return 1;
	puts(s);
	free(s);
	return 0;
}

int fg_cmd_tenant_list(int argc, char **argv)
{
	struct tenant_opts o;
	struct fg_maps m;
	uint64_t now = fg_now_ns();

	if (parse_opts(argc, argv, &o, 0, "tenant list [--json] [--pin-dir DIR]"))
		return 2;
	if (open_maps(&m, &o))
		return 1;
	if (o.json) {
		json_t *list = json_array();

		for (uint32_t i = 0; i < FG_MAP_MAX_TENANTS; i++)
			if (m.tenants[i].flags & FG_TENANT_ACTIVE)
				json_array_append_new(list, tenant_json(&m, i, now));
		fg_maps_close(&m);
		return print_json(json_pack("{s:o}", "tenants", list));
	}
	printf("%-20s %-10s %-7s %-9s %10s %10s %10s %10s %12s %10s %21s %8s %7s\n", "TENANT",
	       "TIER", "VERDICT", "LEFT", "PASSED", "DELAYED", "SHED", "ALLOWANCE", "BUCKET",
	       "RATE/s", "KV RESIDENT/CAP", "INFLIGHT", "QUEUED");
	for (uint32_t i = 0; i < FG_MAP_MAX_TENANTS; i++) {
		const struct fg_tenant_state *t = &m.tenants[i];
		struct fg_tenant_counters c = { 0 };
		struct fg_tenant_quota q;
		char left_s[32] = "-", kv[48];
		double left;
		int v;

		if (!(t->flags & FG_TENANT_ACTIVE))
			continue;
		v = verdict_now(t, now, &left);
		if (v != FG_VERDICT_ALLOW)
			format_duration(left, left_s, sizeof(left_s));
		fg_maps_tenant_counters(&m, i, &c);
		fg_quota_snapshot(&t->quota, &q);
		snprintf(kv, sizeof(kv), "%llu/%llu", (unsigned long long)q.kv_resident_tokens,
			 (unsigned long long)q.kv_cap_tokens);
		printf("%-20.32s %-10.32s %-7s %-9s %10llu %10llu %10llu %10llu %12lld %10llu %21s %8u %7u\n",
		       t->name, t->tier, fg_verdict_name(v), left_s,
		       (unsigned long long)c.syn_passed, (unsigned long long)c.syn_delayed,
		       (unsigned long long)c.syn_shed, (unsigned long long)c.allowance_used,
		       (long long)q.bucket_units, (unsigned long long)q.rate_units_per_s,
		       kv, q.inflight, q.queued);
	}
	fg_maps_close(&m);
	return 0;
}

static void add_sources(const struct fg_maps *m, uint32_t id, json_t *out)
{
	json_t *stat = json_array(), *learned = json_array();
	struct fg_lpm_key lk, lnext;
	struct fg_src_key sk, snext;
	int more;

	for (more = !bpf_map_get_next_key(m->src_tenant_fd, NULL, &lk); more; lk = lnext) {
		struct fg_src_static v;
		char addr[64], cidr[80];
		struct fg_src_key k;
		int v4 = lk.prefixlen >= 96 && lk.addr[10] == 0xff && lk.addr[11] == 0xff &&
			 !lk.addr[0] && !lk.addr[9];

		more = !bpf_map_get_next_key(m->src_tenant_fd, &lk, &lnext);
		if (bpf_map_lookup_elem(m->src_tenant_fd, &lk, &v) || v.tenant_id != id)
			continue;
		memcpy(k.addr, lk.addr, sizeof(k.addr));
		fg_src_key_format(&k, addr, sizeof(addr));
		snprintf(cidr, sizeof(cidr), "%s/%u", addr, v4 ? lk.prefixlen - 96 : lk.prefixlen);
		json_array_append_new(stat, json_string(cidr));
	}
	for (more = !bpf_map_get_next_key(m->src_learned_fd, NULL, &sk); more; sk = snext) {
		struct fg_src_learned v;
		char addr[64];

		more = !bpf_map_get_next_key(m->src_learned_fd, &sk, &snext);
		if (bpf_map_lookup_elem(m->src_learned_fd, &sk, &v) || v.tenant_id != id)
			continue;
		fg_src_key_format(&sk, addr, sizeof(addr));
		json_array_append_new(learned, json_pack("{s:s, s:b}", "addr", addr, "shared",
							 (v.flags & FG_SRC_SHARED) != 0));
	}
	json_object_set_new(out, "static_sources", stat);
	json_object_set_new(out, "learned_sources", learned);
}

int fg_cmd_tenant_show(int argc, char **argv)
{
	struct tenant_opts o;
	struct fg_maps m;
	json_t *j;
	int id;

	if (parse_opts(argc, argv, &o, 1, "tenant show NAME [--json] [--pin-dir DIR]"))
		return 2;
	if (open_maps(&m, &o))
		return 1;
	id = fg_maps_tenant_id(&m, o.name);
	if (id < 0) {
		fprintf(stderr, "fairgatectl: no tenant named '%s' in the maps at %s\n", o.name,
			o.pin_dir);
		fg_maps_close(&m);
		return 1;
	}
	j = tenant_json(&m, (uint32_t)id, fg_now_ns());
	add_sources(&m, (uint32_t)id, j);
	fg_maps_close(&m);
	if (o.json)
		return print_json(j);

	json_t *c = json_object_get(j, "counters"), *q = json_object_get(j, "quota");
	char left[32] = "";
	double left_s = json_real_value(json_object_get(j, "deny_remaining_s"));
	const char *verdict = json_string_value(json_object_get(j, "verdict"));

	if (strcmp(verdict, "allow")) {
		format_duration(left_s, left, sizeof(left));
		printf("tenant %s (id %d, tier %s): %s for %s more (by %s)\n", o.name, id,
		       json_string_value(json_object_get(j, "tier")), verdict, left,
		       json_string_value(json_object_get(j, "deny_source")));
	} else {
		printf("tenant %s (id %d, tier %s): allow\n", o.name, id,
		       json_string_value(json_object_get(j, "tier")));
	}
	printf("  SYNs        passed %lld, delayed %lld, shed %lld (overload %lld), allowance used %lld\n",
	       json_integer_value(json_object_get(c, "syn_passed")),
	       json_integer_value(json_object_get(c, "syn_delayed")),
	       json_integer_value(json_object_get(c, "syn_shed")),
	       json_integer_value(json_object_get(c, "overload_shed")),
	       json_integer_value(json_object_get(c, "allowance_used")));
	if (json_integer_value(json_object_get(c, "shed_dropped")))
		printf("              shed past the RST budget (dropped) %lld\n",
		       json_integer_value(json_object_get(c, "shed_dropped")));
	printf("  bucket      %lld of %lld units, refill %lld/s, reserved %lld%s\n",
	       json_integer_value(json_object_get(q, "bucket_units")),
	       json_integer_value(json_object_get(q, "burst_units")),
	       json_integer_value(json_object_get(q, "rate_units_per_s")),
	       json_integer_value(json_object_get(q, "reserved_units")),
	       json_is_true(json_object_get(q, "published")) ? "" : " (policy figures; not published yet)");
	printf("  KV          %lld of %lld tokens resident\n",
	       json_integer_value(json_object_get(q, "kv_resident_tokens")),
	       json_integer_value(json_object_get(q, "kv_cap_tokens")));
	printf("  requests    %lld in flight, %lld queued, %lld admitted, %lld rejected\n",
	       json_integer_value(json_object_get(q, "inflight")),
	       json_integer_value(json_object_get(q, "queued")),
	       json_integer_value(json_object_get(q, "admitted")),
	       json_integer_value(json_object_get(q, "rejected")));
	printf("  sources     ");
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(j, "static_sources"), i, v)
		printf("%s%s", i ? ", " : "", json_string_value(v));
	printf("%s\n", json_array_size(json_object_get(j, "static_sources")) ? "" : "(none)");
	printf("  learned     ");
	json_array_foreach(json_object_get(j, "learned_sources"), i, v)
		printf("%s%s%s", i ? ", " : "", json_string_value(json_object_get(v, "addr")),
		       json_is_true(json_object_get(v, "shared")) ? " (shared)" : "");
	printf("%s\n", json_array_size(json_object_get(j, "learned_sources")) ? "" : "(none)");
	json_decref(j);
	return 0;
}

static int call(const struct tenant_opts *o, json_t *req, json_t **reply)
{
	*reply = fg_show_ask(o->ctl, req, "fairgated refused");
	return *reply ? 0 : 1;
}

int fg_cmd_tenant_deny(int argc, char **argv)
{
	static const char usage[] =
		"tenant deny NAME --mode delay|shed --for DURATION [--json] [--ctl PATH]";
	struct tenant_opts o;
	json_t *reply;
	double for_s;

	if (parse_opts(argc, argv, &o, 1, usage))
		return 2;
	if (!o.mode || (strcmp(o.mode, "delay") && strcmp(o.mode, "shed"))) {
		fprintf(stderr, "fairgatectl: --mode must be delay or shed\nusage: fairgatectl %s\n",
			usage);
		return 2;
	}
	if (!o.dur || parse_duration(o.dur, &for_s)) {
		fprintf(stderr, "fairgatectl: --for needs a duration like 90s, 5m or 1h%s%s%s\n",
			o.dur ? " (got '" : "", o.dur ? o.dur : "", o.dur ? "')" : "");
		return 2;
	}
	if (call(&o, json_pack("{s:s, s:s, s:s, s:f}", "cmd", "tenant_deny", "tenant", o.name,
			       "mode", o.mode, "for_s", for_s), &reply))
		return 1;
	if (o.json)
		return print_json(reply);
	char d[32];
	format_duration(for_s, d, sizeof(d));
	printf("tenant %s: %s for %s\n", o.name, o.mode, d);
	json_decref(reply);
	return 0;
}

int fg_cmd_tenant_allow(int argc, char **argv)
{
	struct tenant_opts o;
	json_t *reply;

	if (parse_opts(argc, argv, &o, 1, "tenant allow NAME [--json] [--ctl PATH]"))
		return 2;
	if (call(&o, json_pack("{s:s, s:s}", "cmd", "tenant_allow", "tenant", o.name), &reply))
		return 1;
	if (o.json)
		return print_json(reply);
	printf("tenant %s: allow (was %s)\n", o.name,
	       json_string_value(json_object_get(reply, "was")) ?: "?");
	json_decref(reply);
	return 0;
}
