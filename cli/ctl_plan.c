/* ctl_plan.c — `fairgatectl plan`: the cost model's derivations for a policy,
 * printed the way the seed works them out, or as JSON (the same keys),
 * with the price of an output token by the context it decodes against.
 * Optional: one request's price (--in/--out, with --n, --prompts and --cached), a tenant
 * load (--rps with --in/--out) and a context length (--context). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl_calibration.h"
#include "cli/ctl_commands.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "policy/tpot_reserve.h"

struct plan_args {
	const char *policy, *tenants, *ctl;
	bool json, calibrated;
	double rps, in, out, n, prompts, cached, context;
	bool have_request, have_load, have_context;
};

static int parse_number(const char *flag, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !isfinite(v) || v < 0) {
		fprintf(stderr, "fairgatectl plan: %s wants a non-negative number, got '%s'\n", flag, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct plan_args *a)
{
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, 'p' }, { "json", no_argument, NULL, 'j' },
		{ "rps", required_argument, NULL, 'r' },    { "in", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },    { "context", required_argument, NULL, 'c' },
		{ "n", required_argument, NULL, 'n' },      { "cached", required_argument, NULL, 'k' },
		{ "tenants", required_argument, NULL, 't' }, { "prompts", required_argument, NULL, 'P' },
		{ "calibrated", no_argument, NULL, 'C' },    { "ctl", required_argument, NULL, 'S' },
		{ 0 }
	};
	int opt, load_flags = 0;

	memset(a, 0, sizeof(*a));
	optind = 0; /* argv here starts after "plan" */
	while ((opt = getopt_long(argc + 1, argv - 1, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': a->policy = optarg; break;
		case 't': a->tenants = optarg; break;
		case 'j': a->json = true; break;
		case 'C': a->calibrated = true; break;
		case 'S': a->ctl = optarg; break;
		case 'r': if (parse_number("--rps", optarg, &a->rps)) return -1; load_flags |= 1; break;
		case 'i': if (parse_number("--in", optarg, &a->in)) return -1; load_flags |= 2; break;
		case 'o': if (parse_number("--out", optarg, &a->out)) return -1; load_flags |= 4; break;
		case 'c': if (parse_number("--context", optarg, &a->context)) return -1; a->have_context = true; break;
		case 'n': if (parse_number("--n", optarg, &a->n)) return -1; load_flags |= 8; break;
		case 'k': if (parse_number("--cached", optarg, &a->cached)) return -1; load_flags |= 16; break;
		case 'P': if (parse_number("--prompts", optarg, &a->prompts)) return -1; load_flags |= 32; break;
		default: return -1;
		}
	}
	if (optind != argc + 1) {
		fprintf(stderr, "fairgatectl plan: unexpected argument '%s'\n", argv[optind - 1]);
		return -1;
	}
	if (!a->policy) {
		fprintf(stderr, "fairgatectl plan: --policy FILE is required\n");
		return -1;
	}
	if ((load_flags & 1) && (load_flags & 6) != 6) {
		fprintf(stderr, "fairgatectl plan: --rps, --in and --out go together\n");
		return -1;
	}
	if ((load_flags & 1) && (load_flags & 56)) {
		fprintf(stderr, "fairgatectl plan: --n, --prompts and --cached price one request; a load (--rps) is n = 1, one prompt, uncached\n");
		return -1;
	}
	if (load_flags && (load_flags & 6) != 6) {
		fprintf(stderr, "fairgatectl plan: --in and --out go together (and --n, --prompts, --cached need them)\n");
		return -1;
	}
	if (!(load_flags & 8))
		a->n = 1;
	if (a->n < 1 || a->n != floor(a->n)) {
		fprintf(stderr, "fairgatectl plan: --n wants a whole number of choices, at least 1\n");
		return -1;
	}
	if (!(load_flags & 32))
		a->prompts = 1;
	if (a->prompts < 1 || a->prompts != floor(a->prompts)) {
		fprintf(stderr, "fairgatectl plan: --prompts wants a whole number of prompts, at least 1\n");
		return -1;
	}
	if (a->cached > a->in) {
		fprintf(stderr, "fairgatectl plan: --cached %g is more than the %g prompt tokens (--in)\n",
			a->cached, a->in);
		return -1;
	}
	a->have_request = (load_flags & 6) == 6;
	a->have_load = load_flags & 1;
	return 0;
}

/* The request of --in/--out/--n/--prompts/--cached with `out` output tokens:
 * `prompts` prompts (a completions prompt array) summing to --in, n choices
 * each. */
static double request_units(const struct fg_cost_model *cm, const struct plan_args *a, double out)
{
	return fg_request_units_batch(cm, a->in, a->cached, out, a->prompts, a->prompts * a->n);
}

/* The contexts the per-token table shows, ascending: the reference, the
 * sizes tiers are usually cut at, and --context. */
#define TABLE_MAX 6
static const double table_contexts[] = { 8192, 32768, 131072 };

static uint32_t table_rows(const struct fg_cost_model *cm, const struct plan_args *a,
			   double rows[TABLE_MAX])
{
	uint32_t n = 0;

	rows[n++] = cm->ref_context;
	for (size_t i = 0; i < sizeof(table_contexts) / sizeof(table_contexts[0]); i++)
		if (table_contexts[i] != cm->ref_context)
			rows[n++] = table_contexts[i];
	if (a->have_context) {
		bool seen = false;
		for (uint32_t i = 0; i < n; i++)
			seen |= rows[i] == a->context;
		if (!seen)
			rows[n++] = a->context;
	}
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && rows[j - 1] > rows[j]; j--) {
			double t = rows[j];
			rows[j] = rows[j - 1];
			rows[j - 1] = t;
		}
	return n;
}

static const char *pricing_name(const struct fg_cost_model *cm)
{
	return cm->output_pricing == FG_OUTPUT_FLAT ? "flat" : "context";
}

/* A tenant load's output tokens as the model prices them: one per request
 * under flat pricing, else the request's decode steps (its first token
 * comes with the prefill) at their mean price. */
struct load_output {
	double tokens, weight;
};
static struct load_output load_output(const struct fg_cost_model *cm, const struct plan_args *a)
{
	struct load_output lo = { a->out, cm->output_weight };

	if (cm->output_pricing == FG_OUTPUT_CONTEXT) {
		lo.tokens = a->out > 1 ? a->out - 1 : 0;
		lo.weight = lo.tokens > 0 ? fg_output_units(cm, a->in, a->out, 1) / lo.tokens : 0;
	}
	return lo;
}

/* Each TPOT tier's reservation: the batch its target allows at the
 * reference context, and the decode throughput that forgoes. */
static void print_tpot(const struct fg_policy *p, const struct fg_cost_model *cm)
{
	for (uint32_t i = 0; i < p->n_tiers; i++) {
		const struct fg_tier *t = &p->tiers[i];
		if (!(t->tpot_p99_ms > 0))
			continue;
		struct fg_tpot_price pr = fg_tpot_price(cm, t->tpot_p99_ms / 1e3);
		printf("TPOT reservation (tier %s, p99 %g ms): decode batch <= %u at %u tokens of context, "
		       "step %.1f ms\n", t->name, t->tpot_p99_ms, pr.batch, cm->ref_context,
		       pr.step_s * 1e3);
		printf("  throughput    = %u / %.1f ms = %.0f tokens/s against %u / %.1f ms = %.0f tokens/s\n",
		       pr.batch, pr.step_s * 1e3, pr.tokens_per_s, pr.ref_batch, pr.ref_step_s * 1e3,
		       pr.ref_tokens_per_s);
		printf("  forgone       = %.1f%% of the replica = $%.0f per month (dedicated replica $%.0f)\n",
		       pr.forgone_share * 100, pr.usd_per_month, cm->dedicated_usd_per_month);
	}
}

static json_t *tpot_json(const struct fg_policy *p, const struct fg_cost_model *cm)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < p->n_tiers; i++) {
		const struct fg_tier *t = &p->tiers[i];
		if (!(t->tpot_p99_ms > 0))
			continue;
		struct fg_tpot_price pr = fg_tpot_price(cm, t->tpot_p99_ms / 1e3);
		json_array_append_new(a, json_pack("{s:s, s:f, s:I, s:f, s:f, s:f, s:f, s:f}",
						   "tier", t->name, "tpot_p99_ms", t->tpot_p99_ms,
						   "max_batch", (json_int_t)pr.batch,
						   "step_ms", pr.step_s * 1e3,
						   "tokens_per_s", pr.tokens_per_s,
						   "reference_tokens_per_s", pr.ref_tokens_per_s,
						   "forgone_share", pr.forgone_share,
						   "usd_per_month", pr.usd_per_month));
	}
	return a;
}

static void print_json(const struct fg_policy *p, const struct fg_cost_model *cm,
		       const struct plan_args *a, json_t *cal)
{
	json_t *o = json_object();
	double rows[TABLE_MAX];
	uint32_t n_rows = table_rows(cm, a, rows);
	char key[32];

	json_object_set_new(o, "prompt_token_us", json_real(cm->prompt_token_s * 1e6));
	json_object_set_new(o, "decode_step_ms", json_real(cm->decode_step_s * 1e3));
	json_object_set_new(o, "output_token_us", json_real(cm->output_token_s * 1e6));
	json_object_set_new(o, "output_weight", json_real(cm->output_weight));
	json_object_set_new(o, "replica_units_per_s", json_real(cm->replica_units_per_s));
	json_object_set_new(o, "kv_bytes_per_token", json_real(cm->kv_bytes_per_token));
	json_object_set_new(o, "kv_pool_tokens", json_real(cm->kv_pool_tokens));
	json_object_set_new(o, "dedicated_usd_per_month", json_real(cm->dedicated_usd_per_month));
	json_object_set_new(o, "cached_prompt_weight", json_real(cm->cached_prompt_weight));
	json_object_set_new(o, "output_pricing", json_string(pricing_name(cm)));
	json_object_set_new(o, "output_token_weights_us", json_real(cm->output_weights_share_s * 1e6));
	json_object_set_new(o, "output_token_ns_per_context_token",
			    json_real(cm->output_s_per_context * 1e9));
	json_t *us = json_object(), *units = json_object();
	for (uint32_t i = 0; i < n_rows; i++) {
		snprintf(key, sizeof(key), "%.0f", rows[i]);
		json_object_set_new(us, key, json_real(fg_output_token_s(cm, rows[i]) * 1e6));
		json_object_set_new(units, key,
				    json_real(fg_output_token_s(cm, rows[i]) / cm->prompt_token_s));
	}
	json_object_set_new(o, "output_token_us_at_context", us);
	json_object_set_new(o, "output_weight_at_context", units);
	if (a->have_request) {
		json_object_set_new(o, "request_units",
				    json_real(request_units(cm, a, a->out)));
		json_object_set_new(o, "request_output_units",
				    json_real(request_units(cm, a, a->out) - request_units(cm, a, 0)));
	}
	if (a->have_load) {
		struct fg_load_cost l = fg_load_cost(cm, a->rps, a->in, a->out);
		json_object_set_new(o, "tenant_units_per_s", json_real(l.units_per_s));
		json_object_set_new(o, "tenant_replicas", json_real(l.replicas));
	}
	if (a->have_context) {
		struct fg_context_cost c = fg_context_cost(cm, a->context);
		json_object_set_new(o, "context_kv_bytes", json_real(c.kv_bytes));
		json_object_set_new(o, "context_kv_gib", json_real(c.kv_gib));
		json_object_set_new(o, "context_kv_bytes_per_gpu", json_real(c.kv_bytes_per_gpu));
		json_object_set_new(o, "context_pool_share", json_real(c.pool_share));
		json_object_set_new(o, "context_output_token_us",
				    json_real(fg_output_token_s(cm, a->context) * 1e6));
		json_object_set_new(o, "context_output_weight",
				    json_real(fg_output_token_s(cm, a->context) / cm->prompt_token_s));
	}
	if (cal)
		json_object_set(o, "calibration", cal);
	json_t *tpot = tpot_json(p, cm);
	if (json_array_size(tpot))
		json_object_set_new(o, "tpot_reservations", tpot);
	else
		json_decref(tpot);
	json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	fputc('\n', stdout);
	json_decref(o);
}

/* Numbers written the way the seed writes them: 70.55e9, 1979e12, 0.50. */
static const char *sci(double v, int digits, char *buf, size_t len)
{
	int exp = 0;
	double m = v;

	if (v >= 1e6) {
		while (m >= 1000) {
			m /= 1000;
			exp += 3;
		}
		if (exp > 9)  /* keep the seed's style: 1979e12, 3.35e12 */
			while (m < 1000 && exp > 12) { m *= 1000; exp -= 3; }
		snprintf(buf, len, "%.*ge%d", digits, m, exp);
	} else {
		snprintf(buf, len, "%.*g", digits, v);
	}
	return buf;
}

static void print_human(const struct fg_policy *p, const struct fg_cost_model *cm,
			const struct plan_args *a)
{
	const struct fg_replica *r = &p->replica;
	char b1[32], b2[32], b3[32];
	double rows[TABLE_MAX];
	uint32_t n_rows = table_rows(cm, a, rows);

	printf("replica: %s, %u GPUs, prefill MFU %.2f, decode MBU %.2f, batch %u at %u tokens of context\n\n",
	       r->model.name, r->gpus, r->prefill_mfu, r->decode_mbu, r->decode_batch, r->decode_context);
	printf("prompt token  = 2 x %s / (%u x %s x %.2f) = %.2f us\n",
	       sci(r->model.params, 4, b1, sizeof(b1)), r->gpus, sci(r->peak_flops, 4, b2, sizeof(b2)),
	       r->prefill_mfu, cm->prompt_token_s * 1e6);
	printf("decode step   = (%.1f GB + %u x %u x %.0f B / %u) / %s = %.1f ms\n",
	       cm->weights_bytes_per_gpu / 1e9, r->decode_batch, r->decode_context,
	       cm->kv_bytes_per_token, r->gpus, sci(cm->hbm_effective_per_gpu, 3, b3, sizeof(b3)),
	       cm->decode_step_s * 1e3);
	printf("output token  = %.1f ms / %u = %.1f us\n", cm->decode_step_s * 1e3, r->decode_batch,
	       cm->output_token_s * 1e6);
	printf("weight        = %.1f / %.2f = %.2f prompt-token units per output token\n",
	       cm->output_token_s * 1e6, cm->prompt_token_s * 1e6, cm->output_weight);
	printf("output token at context c = %.2f ms / %u + c x %.0f B / %u / %s = %.2f us + c x %.2f ns\n",
	       fg_decode_step_s(cm, 0) * 1e3, r->decode_batch, cm->kv_bytes_per_token, r->gpus,
	       sci(cm->hbm_effective_per_gpu, 3, b3, sizeof(b3)), cm->output_weights_share_s * 1e6,
	       cm->output_s_per_context * 1e9);
	printf("  %9s  %10s  %7s\n", "context", "per token", "units");
	for (uint32_t i = 0; i < n_rows; i++) {
		double s = fg_output_token_s(cm, rows[i]);
		printf("  %9.0f  %7.1f us  %7.2f%s\n", rows[i], s * 1e6, s / cm->prompt_token_s,
		       rows[i] == cm->ref_context ? "  (reference: the weight above)" : "");
	}
	if (cm->output_pricing == FG_OUTPUT_CONTEXT)
		printf("output pricing: context: a choice's first token comes with its prefill, "
		       "its k-th is priced at prompt + k - 1\n");
	else
		printf("output pricing: flat: every output token at %.2f units\n", cm->output_weight);
	printf("replica budget = %.2f / %.2f us = %.0f units per second at a %.0f%% ceiling\n",
	       r->ceiling, cm->prompt_token_s * 1e6, cm->replica_units_per_s, r->ceiling * 100);
	printf("KV per token  = 2 x %u layers x %u kv_heads x %u x %.0f B = %.0f B\n", r->model.layers,
	       r->model.kv_heads, r->model.head_dim, r->model.kv_bytes, cm->kv_bytes_per_token);
	printf("KV pool       = %.0f tokens per replica\n", cm->kv_pool_tokens);
	printf("cached prompt token = %.2f units\n", cm->cached_prompt_weight);
	printf("dedicated replica   = %u GPUs x $%.2f x %.0f h = $%.0f per month\n", r->gpus,
	       r->usd_per_hour, FG_HOURS_PER_MONTH, cm->dedicated_usd_per_month);
	print_tpot(p, cm);
	if (a->have_request && !a->have_load) {
		double prompt = request_units(cm, a, 0), all = request_units(cm, a, a->out);
		printf("\nrequest of %g in (%g cached", a->in, a->cached);
		if (a->prompts > 1)
			printf(", over %g prompts", a->prompts);
		printf(") and %g out over %g sequence%s:\n", a->out, a->prompts * a->n,
		       a->prompts * a->n == 1 ? "" : "s");
		printf("units         = %.1f prompt + %.1f output = %.1f\n", prompt, all - prompt, all);
	}
	if (a->have_load) {
		struct fg_load_cost l = fg_load_cost(cm, a->rps, a->in, a->out);
		struct load_output lo = load_output(cm, a);
		printf("\ntenant at %g req/s, %g in / %g out:\n", a->rps, a->in, a->out);
		if (cm->output_pricing == FG_OUTPUT_CONTEXT && lo.tokens > 0)
			printf("output        = %g decode steps from %g to %g tokens of context, %.3f units each on average\n",
			       lo.tokens, a->in + 1, a->in + lo.tokens, lo.weight);
		printf("units/s       = %g x (%g + %g x %.3f) = %.0f, or %.2f replicas\n", a->rps, a->in,
		       lo.tokens, lo.weight, l.units_per_s, l.replicas);
	}
	if (a->have_context) {
		struct fg_context_cost c = fg_context_cost(cm, a->context);
		printf("\ncontext of %.0f tokens:\n", a->context);
		printf("KV            = %.0f x %.0f B = %.1f GiB, %.1f GB per GPU at TP=%u\n", a->context,
		       cm->kv_bytes_per_token, c.kv_gib, c.kv_bytes_per_gpu / 1e9, r->gpus);
		printf("share of pool = %.0f / %.0f = %.0f%%\n", a->context, cm->kv_pool_tokens,
		       c.pool_share * 100);
		double s = fg_output_token_s(cm, a->context);
		printf("output token  = %.2f us + %.0f x %.2f ns = %.1f us = %.2f units\n",
		       cm->output_weights_share_s * 1e6, a->context, cm->output_s_per_context * 1e9,
		       s * 1e6, s / cm->prompt_token_s);
	}
}

int fg_cmd_plan(int argc, char **argv)
{
	struct plan_args a;
	struct fg_policy_error err;
	struct fg_cost_model cm;
	char msg[600];

	if (parse_args(argc, argv, &a))
		return 2;
	struct fg_policy *p = calloc(1, sizeof(*p));
	if (!p) {
		perror("fairgatectl");
		return 1;
	}
	if (fg_policy_parse_files(a.policy, a.tenants, p, &err)) {
		fg_policy_error_format(&err, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		fg_policy_free(p);
		return 2;
	}
	fg_cost_model_init_policy(&cm, p);
	/* --calibrated: the running agent's measurement beside the policy's */
	json_t *cal = a.calibrated ? fg_fetch_calibration(a.ctl) : NULL;
	if (a.calibrated && !cal) {
		fg_policy_free(p);
		return 1;
	}
	if (a.json)
		print_json(p, &cm, &a, cal);
	else
		print_human(p, &cm, &a);
	if (cal && !a.json) {
		putchar('\n');
		fg_show_calibration(cal);
	}
	json_decref(cal);
	fg_policy_free(p);
	return 0;
}
