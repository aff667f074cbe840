/* ctl_policy.c — `fairgatectl policy check FILE [--tenants FILE] [--json]`:
 * parse and validate a policy (its tenants in a second file with --tenants)
 * without touching the running agent. Exit 0 with a one-line summary, or
 * the error line ("FILE:LINE:COL: message", FILE the one the line is in)
 * and exit 2. With --json, the same as one JSON object on stdout in both
 * cases. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/ctl_commands.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "policy/policy_addr.h"
#include "policy/tpot_reserve.h"

static const char *const cache_names[] = { [FG_CACHE_SALTED] = "salted",
					   [FG_CACHE_SHARED] = "shared" };

static double units_sold(const struct fg_policy *p)
{
	double sum = 0;

	for (uint32_t i = 0; i < p->n_tenants; i++)
		sum += p->tenants[i].units_per_s;
	return sum;
}

static json_t *tenant_json(const struct fg_policy *p, const struct fg_tenant *t,
			   const struct fg_cost_model *cm)
{
	json_t *sources = json_array();
	char net[FG_CIDR_STRLEN];

	for (uint32_t i = 0; i < t->n_sources; i++) {
		fg_cidr_format(&t->sources[i], net, sizeof(net));
		json_array_append_new(sources, json_string(net));
	}
	return json_pack("{s:I, s:s, s:s, s:f, s:f, s:f, s:I, s:o, s:s}",
			 "id", (json_int_t)t->id, "name", t->name, "tier", p->tiers[t->tier].name,
			 "units_per_s", t->units_per_s,
			 "replicas", t->units_per_s / cm->replica_units_per_s,
			 "burst_s", t->burst_s, "keys", (json_int_t)t->n_keys,
			 "sources", sources, "cache", cache_names[t->cache]);
}

static json_t *tier_json(const struct fg_tier *t)
{
	json_t *o = json_pack("{s:s, s:f, s:I, s:I, s:f, s:f, s:I, s:I}", "name", t->name,
			      "weight", t->weight, "max_context", (json_int_t)t->max_context,
			      "kv_cap_tokens", (json_int_t)t->kv_cap_tokens, "burst_s", t->burst_s,
			      "max_queue_s", t->max_queue_s, "priority", (json_int_t)t->priority,
			      "default_max_tokens", (json_int_t)t->default_max_tokens);
	if (o && t->tpot_p99_ms > 0)
		json_object_set_new(o, "tpot_p99_ms", json_real(t->tpot_p99_ms));
	return o;
}

static void print_ok_json(const char *file, const struct fg_policy *p,
			  const struct fg_cost_model *cm)
{
	json_t *tiers = json_array(), *tenants = json_array();

	for (uint32_t i = 0; i < p->n_tiers; i++)
		json_array_append_new(tiers, tier_json(&p->tiers[i]));
	for (uint32_t i = 0; i < p->n_tenants; i++)
		json_array_append_new(tenants, tenant_json(p, &p->tenants[i], cm));
	json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:f, s:f, s:f, s:o, s:o}", "file", file,
			      "ok", 1, "n_tiers", (json_int_t)p->n_tiers,
			      "n_tenants", (json_int_t)p->n_tenants,
			      "replica_units_per_s", cm->replica_units_per_s,
			      "units_per_s_sold", units_sold(p),
			      "replicas_sold", units_sold(p) / cm->replica_units_per_s,
			      "tiers", tiers, "tenants", tenants);
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
}

/* What each TPOT tier's target means on this replica, and a reservation
 * the target cannot hold in full. */
static void print_tpot_hints(const struct fg_policy *p, const struct fg_cost_model *cm)
{
	struct fg_tpot_reserve r = { 0 };

	fg_tpot_configure(&r, cm, p);
	for (uint32_t i = 0; i < p->n_tiers; i++) {
		const struct fg_tier *t = &p->tiers[i];
		if (!(t->tpot_p99_ms > 0))
			continue;
		uint32_t n = 0;
		for (uint32_t k = 0; k < p->n_tenants; k++)
			n += p->tenants[k].tier == i;
		struct fg_tpot_price pr = fg_tpot_price(cm, t->tpot_p99_ms / 1e3);
		printf("  tier %s: tpot_p99_ms %g: decode batch of at most %u sequences at %u tokens of context "
		       "(%.1f ms a step on the policy's cost model; %u tenant%s)\n",
		       t->name, t->tpot_p99_ms, pr.batch, cm->ref_context, pr.step_s * 1e3, n,
		       n == 1 ? "" : "s");
		if (n && t->tpot_p99_ms / 1e3 > r.target_s)
			printf("  hint: tier %s's target is held at the tighter %g ms of another TPOT tier "
			       "(one replica, one batch)\n", t->name, r.target_s * 1e3);
	}
	if (fg_tpot_active(&r) && r.reserve_tokens >= r.cap_tokens)
		printf("  hint: the TPOT tiers' tenants may hold more KV (their kv_cap_tokens) than the %llu "
		       "tokens of context a step holds within %g ms: the whole batch is theirs, others wait "
		       "for an empty engine; lower their kv_cap_tokens\n",
		       (unsigned long long)r.cap_tokens, r.target_s * 1e3);
}

static void print_error_json(const struct fg_policy_error *err, const char *line)
{
	json_t *o = json_pack("{s:s, s:b, s:{s:I, s:I, s:s}, s:s}", "file", err->file, "ok", 0,
			      "error", "line", (json_int_t)err->line, "col", (json_int_t)err->col,
			      "message", err->message, "text", line);
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: fairgatectl policy check FILE [--tenants FILE] [--json]\n"
		   "  Validate a policy file (its tenants in the --tenants file); exit 0 if valid,\n"
		   "  2 with FILE:LINE:COL: message if not.\n");
}

int fg_cmd_policy_check(int argc, char **argv)
{
	const char *file = NULL, *tenants = NULL;
	bool json = false;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--tenants")) {
			if (++i == argc) {
				fprintf(stderr, "fairgatectl: --tenants needs a FILE\n");
				usage(stderr);
				return 2;
			}
			tenants = argv[i];
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "fairgatectl: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		} else if (file) {
			fprintf(stderr, "fairgatectl: policy check takes one FILE\n");
			usage(stderr);
			return 2;
		} else {
			file = argv[i];
		}
	}
	if (!file) {
		usage(stderr);
		return 2;
	}

	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char line[700];
	if (!p) {
		perror("fairgatectl");
		return 1;
	}
	if (fg_policy_parse_files(file, tenants, p, &err)) {
		fg_policy_error_format(&err, line, sizeof(line));
		if (json)
			print_error_json(&err, line);
		else
			fprintf(stderr, "%s\n", line);
		fg_policy_free(p);
		return 2;
	}

	struct fg_cost_model cm;
	fg_cost_model_init(&cm, &p->replica);
	if (json)
		print_ok_json(file, p, &cm);
	else
		printf("%s: ok - %u tier%s, %u tenant%s, %.2f replicas sold (%.0f units/s) of a replica budget of %.0f units/s\n",
		       file, p->n_tiers, p->n_tiers == 1 ? "" : "s", p->n_tenants,
		       p->n_tenants == 1 ? "" : "s", units_sold(p) / cm.replica_units_per_s,
		       units_sold(p), cm.replica_units_per_s);
	if (!json)
		print_tpot_hints(p, &cm);
	fg_policy_free(p);
	return 0;
}
