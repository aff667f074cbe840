/* test_policy_parse.c — the policy parser: the example policy (YAML and its
 * JSON twin) resolves as documented, defaults fill what a file leaves out,
 * a table of malformed policies each fail at the expected line:column with the
 * expected message, limits hold at their edges, and truncated or mutated
 * input never crashes and always yields either a policy or a positioned error. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "policy/cost_model.h"
#include "policy/policy.h"
#include "policy/policy_addr.h"
#include "policy/policy_suggest.h"


/* Two policies alike: every field, the tenants compared by content (each
 * policy has its own tenant array). */
static void assert_same_policy(const struct fg_policy *a, const struct fg_policy *b)
{
	assert_memory_equal(a, b, offsetof(struct fg_policy, tenants));
	assert_memory_equal(&a->agent, &b->agent, sizeof(a->agent));
	if (a->n_tenants)
		assert_memory_equal(a->tenants, b->tenants, a->n_tenants * sizeof(*a->tenants));
}

static const char *root_path(const char *rel, char *buf, size_t len)
{
	const char *root = getenv("FG_ROOT");
	snprintf(buf, len, "%s/%s", root ? root : ".", rel);
	return buf;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void sha256_of(const char *s, uint8_t out[32])
{
	unsigned int n = 32;
	assert_int_equal(EVP_Digest(s, strlen(s), out, &n, EVP_sha256(), NULL), 1);
}

static int parse_str(const char *yaml, struct fg_policy *p, struct fg_policy_error *err)
{
	return fg_policy_parse_buffer(yaml, strlen(yaml), "case.yaml", p, err);
}

static void assert_parses(const char *yaml, struct fg_policy *p)
{
	struct fg_policy_error err;
	char line[700];

	if (parse_str(yaml, p, &err)) {
		fg_policy_error_format(&err, line, sizeof(line));
		fail_msg("expected to parse, got: %s", line);
	}
}

static void assert_near(double got, double want, double rel)
{
	if (fabs(got - want) > fabs(want) * rel)
		fail_msg("got %.6f, want %.6f (within %.2f%%)", got, want, rel * 100);
}

#define H64 "953d0ab8229abd463060e52204c8cb44e32297002500258c1181e18379c54626"

/* ---- the example ---- */

static void check_example(const struct fg_policy *p)
{
	struct fg_cost_model cm;
	uint8_t h[32];

	fg_cost_model_init(&cm, &p->replica);
	/* The seed's replica: 35.7 us per prompt token, 18,232 units/s at 65%. */
	assert_near(cm.prompt_token_s, 35.7e-6, 0.005);
	assert_near(cm.replica_units_per_s, 18232, 0.005);
	assert_near(cm.output_weight, 3.1, 0.02);
	assert_int_equal(p->replica.kv_pool_tokens, 646503);
	assert_int_equal(p->replica.decode_batch, 128);
	assert_int_equal(p->replica.decode_context, 1700);
	assert_true(p->replica.cached_prompt_weight == 0.1);
	assert_true(p->replica.model.params == 70.55e9);
	assert_true(p->replica.peak_flops == 1979e12);

	assert_int_equal(p->n_tiers, 3);
	assert_string_equal(p->tiers[0].name, "standard");
	assert_string_equal(p->tiers[1].name, "premium");
	assert_string_equal(p->tiers[2].name, "long-context");
	assert_int_equal(fg_policy_tier_by_name(p, "premium"), 1);
	assert_int_equal(fg_policy_tier_by_name(p, "gold"), -1);
	assert_true(p->tiers[1].weight == 2);
	assert_int_equal(p->tiers[1].max_context, 131072);
	assert_int_equal(p->tiers[0].kv_cap_tokens, 131072);
	assert_int_equal(p->tiers[1].default_max_tokens, 1024); /* default */
	assert_int_equal(p->tiers[2].default_max_tokens, 4096);

	assert_int_equal(p->n_tenants, 3);
	const struct fg_tenant *acme = fg_policy_tenant_by_name(p, "acme");
	const struct fg_tenant *globex = fg_policy_tenant_by_name(p, "globex");
	const struct fg_tenant *initech = fg_policy_tenant_by_name(p, "initech");
	assert_non_null(acme);
	assert_non_null(globex);
	assert_non_null(initech);
	assert_null(fg_policy_tenant_by_name(p, "hooli"));
	assert_int_equal(acme->id, 0);
	assert_int_equal(globex->id, 1);
	assert_int_equal(initech->id, 2);
	assert_int_equal(acme->tier, 1);
	assert_int_equal(initech->tier, 2);
	assert_true(acme->units_per_s == 9000);
	assert_true(acme->replicas == 0);
	assert_true(acme->burst_s == 30);   /* tenant override */
	assert_true(globex->burst_s == 60); /* from its tier */
	assert_true(globex->replicas == 0.25);
	assert_near(globex->units_per_s, 0.25 * 18232, 0.005);
	assert_int_equal(acme->cache, FG_CACHE_SALTED);

	/* The documented demo keys hash to the tenants that own them. */
	assert_int_equal(acme->n_keys, 2);
	sha256_of("sk-acme-demo", h);
	assert_ptr_equal(fg_policy_tenant_by_key_hash(p, h), acme);
	sha256_of("sk-acme-demo-rotated", h);
	assert_ptr_equal(fg_policy_tenant_by_key_hash(p, h), acme);
	sha256_of("sk-globex-demo", h);
	assert_ptr_equal(fg_policy_tenant_by_key_hash(p, h), globex);
	sha256_of("sk-initech-demo", h);
	assert_ptr_equal(fg_policy_tenant_by_key_hash(p, h), initech);
	sha256_of("sk-nobody", h);
	assert_null(fg_policy_tenant_by_key_hash(p, h));

	char net[FG_CIDR_STRLEN];
	assert_int_equal(acme->n_sources, 2);
	fg_cidr_format(&acme->sources[0], net, sizeof(net));
	assert_string_equal(net, "10.1.0.0/16");
	fg_cidr_format(&acme->sources[1], net, sizeof(net));
	assert_string_equal(net, "fd00:a::/48");

	const struct fg_agent *a = &p->agent;
	assert_int_equal(a->mode, FG_MODE_FRONT);
	assert_string_equal(a->listen.host, "0.0.0.0");
	assert_int_equal(a->listen.port, 8000);
	assert_string_equal(a->engine.host, "127.0.0.1");
	assert_int_equal(a->engine.port, 8001);
	assert_int_equal(a->n_protected_ports, 1);
	assert_int_equal(a->protected_ports[0], 8000);
	assert_int_equal(a->n_interfaces, 1);
	assert_string_equal(a->interfaces[0], "eth0");
	assert_int_equal(a->long_context_threshold, 32768);
	assert_string_equal(a->long_context_upstream.host, "127.0.0.1");
	assert_int_equal(a->long_context_upstream.port, 8002);
	assert_int_equal(a->n_trusted_proxies, 1);
	assert_int_equal(a->metering, FG_METER_REPLICA_TIME);
	assert_int_equal(a->output_pricing, FG_OUTPUT_CONTEXT);
	assert_int_equal(a->max_body_bytes, 8388608);
	assert_string_equal(a->salt_secret_file, "");
}

static void test_example_yaml(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char path[512];

	assert_int_equal(fg_policy_parse_file(root_path("examples/policy.yaml", path, sizeof(path)),
					      p, &err), 0);
	check_example(p);
	fg_policy_free(p);
}

/* JSON is YAML flow style: the JSON twin of the example gives the same bytes. */
static void test_example_json_matches_yaml(void **state)
{
	(void)state;
	struct fg_policy *y = calloc(1, sizeof(*y)), *j = calloc(1, sizeof(*j));
	struct fg_policy_error err;
	char path[512];

	assert_int_equal(fg_policy_parse_file(root_path("examples/policy.yaml", path, sizeof(path)),
					      y, &err), 0);
	assert_int_equal(fg_policy_parse_file(root_path("examples/policy.json", path, sizeof(path)),
					      j, &err), 0);
	check_example(j);
	assert_same_policy(y, j);
	fg_policy_free(y);
	fg_policy_free(j);
}

/* Typical machine-written JSON: tabs, no spaces after ':', exponents. */
static void test_json_compact_and_tabs(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));

	assert_parses("{\"tiers\":{\"std\":{\"weight\":1,\"max_queue_s\":0}},"
		      "\"tenants\":[{\"name\":\"a\",\"tier\":\"std\",\"units_per_s\":1.5e3,"
		      "\"sources\":[\"10.9.0.0/16\",\"2001:db8::/32\"]}],"
		      "\"agent\":{\"listen\":\"[::]:8000\",\"protected_ports\":[8000,8443]}}", p);
	assert_true(p->tenants[0].units_per_s == 1500);
	assert_string_equal(p->agent.listen.host, "::");
	assert_int_equal(p->agent.n_protected_ports, 2);
	assert_true(p->tiers[0].max_queue_s == 0);

	assert_parses("{\n\t\"tiers\": {\n\t\t\"std\": {}\n\t},\n\t\"tenants\": [\n\t\t{\n"
		      "\t\t\t\"name\": \"a\",\n\t\t\t\"tier\": \"std\",\n\t\t\t\"replicas\": 1\n"
		      "\t\t}\n\t]\n}\n", p);
	assert_int_equal(p->n_tenants, 1);
	fg_policy_free(p);
}

/* Editors on some systems start files with a UTF-8 byte-order mark. */
static void test_utf8_bom(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	static const char bad[] = "\xef\xbb\xbftiers: {std: {}}\ntenants: [x\xc3]\n";

	assert_parses("\xef\xbb\xbftiers: {std: {}}\ntenants: []\n", p);
	assert_int_equal(fg_policy_parse_buffer(bad, sizeof(bad) - 1, "bom.yaml", p, &err), -1);
	assert_int_equal(err.line, 2);
	assert_non_null(strstr(err.message, "UTF-8"));
	fg_policy_free(p);
}

/* A policy with every key of docs/design.md's "The policy file" example
 * (with a real hash for its placeholder): the key names are a contract
 * with operators' files. Its tenant range sits
 * inside a trusted-proxy range, which is allowed (longest prefix wins). */
static void test_documented_example(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));

	assert_parses(
		"replica:\n"
		"  model: {name: llama-3.3-70b, params: 70.55e9, layers: 80, kv_heads: 8, head_dim: 128,\n"
		"          weight_bytes: 1, kv_bytes: 2}\n"
		"  gpus: 4\n"
		"  gpu: {peak_flops: 1979e12, hbm_bytes_per_s: 3.35e12, usd_per_hour: 2.50}\n"
		"  efficiency: {prefill_mfu: 0.50, decode_mbu: 0.75}\n"
		"  decode: {batch: 128, context: 1700}\n"
		"  kv_pool_tokens: 646503\n"
		"  ceiling: 0.65\n"
		"  cached_prompt_weight: 0.1\n"
		"agent:\n"
		"  mode: front                     # front | transparent (sk_lookup steering)\n"
		"  listen: 0.0.0.0:8000            # front mode\n"
		"  engine: 127.0.0.1:8001          # the engine (vLLM or fairgate-sim)\n"
		"  protected_ports: [8000]         # judged by gate, steered by steer\n"
		"  interfaces: [eth0]              # where gate (XDP) attaches\n"
		"  xdp_mode: native                # native | generic\n"
		"  deny_allowance_per_s: 2\n"
		"  metrics_listen: 127.0.0.1:9464\n"
		"  trusted_proxies: [10.0.0.0/8]   # may send a tenant header instead of a key\n"
		"  long_context: {threshold: 32768, upstream: 10.0.9.1:8000}\n"
		"  engine_queue_steps: 2\n"
		"  metering: replica_time          # replica_time | raw_tokens | requests\n"
		"tiers:\n"
		"  standard: {weight: 1, max_context: 32768,  kv_cap_tokens: 131072, burst_s: 60, max_queue_s: 30, priority: 0}\n"
		"  premium:  {weight: 2, max_context: 131072, kv_cap_tokens: 262144, burst_s: 60, max_queue_s: 30, priority: 0}\n"
		"tenants:\n"
		"  - name: acme\n"
		"    tier: premium\n"
		"    units_per_s: 9000             # or replicas: 0.5\n"
		"    keys: [\"sha256:" H64 "\"]\n"
		"    sources: [10.1.0.0/16]        # optional: lets the kernel attribute connections\n"
		"    cache: salted                 # salted | shared\n", p);
	assert_int_equal(p->n_tiers, 2);
	assert_int_equal(p->n_tenants, 1);
	assert_int_equal(p->agent.long_context_threshold, 32768);
	assert_string_equal(p->agent.long_context_upstream.host, "10.0.9.1");
	assert_int_equal(p->agent.n_trusted_proxies, 1);
	fg_policy_free(p);
}

static void test_replicas_resolve_with_cost_model(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));

	assert_parses("tiers: {std: {}}\n"
		      "tenants:\n"
		      "  - {name: half, tier: std, replicas: 0.5}\n"
		      "  - {name: units, tier: std, units_per_s: 1234.5}\n", p);
	assert_near(p->tenants[0].units_per_s, 0.5 * 18232, 0.005);
	assert_true(p->tenants[0].replicas == 0.5);
	assert_true(p->tenants[1].units_per_s == 1234.5);

	/* A different replica changes what a replica is worth: half the GPUs,
	 * half the prefill throughput, half the units per replica. */
	assert_parses("replica: {gpus: 2, kv_pool_tokens: 300000}\n"
		      "tiers: {std: {kv_cap_tokens: 100000}}\n"
		      "tenants: [{name: half, tier: std, replicas: 0.5}]\n", p);
	assert_near(p->tenants[0].units_per_s, 0.25 * 18232, 0.005);
	fg_policy_free(p);
}

static void test_defaults(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p)), *d = calloc(1, sizeof(*d));

	fg_policy_defaults(d);
	assert_parses("tiers: {std: {}}\ntenants: [{name: a, tier: std, units_per_s: 10}]\n", p);
	assert_memory_equal(&p->replica, &d->replica, sizeof(d->replica));
	assert_memory_equal(&p->agent, &d->agent, sizeof(d->agent));
	assert_true(p->tiers[0].weight == 1);
	assert_int_equal(p->tiers[0].max_context, 32768);
	assert_int_equal(p->tiers[0].kv_cap_tokens, 131072);
	assert_true(p->tiers[0].burst_s == 60);
	assert_true(p->tiers[0].max_queue_s == 30);
	assert_int_equal(p->tiers[0].priority, 0);
	assert_int_equal(p->tiers[0].default_max_tokens, 1024);
	assert_true(p->tenants[0].burst_s == 60);
	assert_int_equal(p->tenants[0].cache, FG_CACHE_SALTED);
	assert_int_equal(p->tenants[0].n_keys, 0);

	/* default_max_tokens never exceeds a small tier's context. */
	assert_parses("tiers: {tiny: {max_context: 512}}\ntenants: []\n", p);
	assert_int_equal(p->tiers[0].default_max_tokens, 512);
	assert_int_equal(p->n_tenants, 0);

	/* Part of a block overrides only what it names. */
	assert_parses("replica: {gpu: {usd_per_hour: 3}, efficiency: {decode_mbu: 0.6}}\n"
		      "tiers: {std: {}}\ntenants: []\n"
		      "agent: {mode: transparent, salt_secret_file: /etc/fairgate/salt,"
		      " engine_scheduling: priority, interfaces: [veth-a, eth0.10],"
		      " timeouts: {idle_s: 5, upstream_s: 120}}\n", p);
	assert_true(p->agent.idle_timeout_s == 5);
	assert_true(p->agent.upstream_timeout_s == 120);
	assert_true(p->agent.header_timeout_s == d->agent.header_timeout_s);
	assert_true(p->replica.usd_per_hour == 3);
	assert_true(p->replica.peak_flops == d->replica.peak_flops);
	assert_true(p->replica.decode_mbu == 0.6);
	assert_true(p->replica.prefill_mfu == d->replica.prefill_mfu);
	assert_int_equal(p->agent.mode, FG_MODE_TRANSPARENT);
	assert_int_equal(p->agent.engine_scheduling, FG_ENGINE_PRIORITY);
	assert_string_equal(p->agent.salt_secret_file, "/etc/fairgate/salt");
	assert_string_equal(p->agent.interfaces[1], "eth0.10");
	assert_int_equal(p->agent.engine.port, 8001);

	/* No metrics listener, also next to transparent mode's unset listen. */
	assert_parses("tiers: {std: {}}\ntenants: []\nagent: {mode: transparent, metrics_listen: off}\n", p);
	assert_int_equal(p->agent.metrics_listen.port, 0);
	assert_string_equal(p->agent.metrics_listen.host, "");

	/* The RST budget: 200/s unless set; `off` is no budget (stored as 0). */
	assert_true(p->agent.shed_rst_per_s == 200);
	assert_parses("tiers: {std: {}}\ntenants: []\nagent: {shed_rst_per_s: 0.5}\n", p);
	assert_true(p->agent.shed_rst_per_s == 0.5);
	assert_parses("tiers: {std: {}}\ntenants: []\nagent: {shed_rst_per_s: off}\n", p);
	assert_true(p->agent.shed_rst_per_s == 0);

	/* Output priced by context unless the operator sold flat contracts. */
	assert_int_equal(p->agent.output_pricing, FG_OUTPUT_CONTEXT);
	assert_parses("tiers: {std: {}}\ntenants: []\nagent: {output_pricing: flat}\n", p);
	assert_int_equal(p->agent.output_pricing, FG_OUTPUT_FLAT);
	assert_parses("tiers: {std: {}}\ntenants: []\nagent: {output_pricing: context}\n", p);
	assert_int_equal(p->agent.output_pricing, FG_OUTPUT_CONTEXT);
	/* what admission assumes of the tokenizer, and paths let through */
	assert_true(p->replica.model.chars_per_token == 4);
	assert_int_equal(p->replica.model.message_tokens, 5);
	assert_int_equal(p->replica.model.image_tokens, 0);
	assert_true(p->agent.tokenize_timeout_s == 2);
	assert_int_equal(p->agent.n_passthrough, 0);
	assert_parses("replica:\n  model: {name: m, params: 8e9, layers: 32, kv_heads: 8, head_dim: 128,"
		      " chars_per_token: 3.5, message_tokens: 4, reply_tokens: 3, image_tokens: 576,"
		      " audio_tokens: 750}\n"
		      "tiers: {std: {kv_cap_tokens: 100000}}\ntenants: []\n"
		      "agent:\n  timeouts: {tokenize_s: 0.5}\n  passthrough:\n"
		      "    - {path: /v1/audio/transcriptions, methods: [POST], units: 400}\n"
		      "    - {path: '/pooling*', methods: [POST, GET], units: 50, auth: true}\n"
		      "    - {path: /server_info, methods: [GET], units: 0, auth: false}\n", p);
	assert_true(p->replica.model.chars_per_token == 3.5);
	assert_int_equal(p->replica.model.reply_tokens, 3);
	assert_int_equal(p->replica.model.image_tokens, 576);
	assert_int_equal(p->replica.model.audio_tokens, 750);
	assert_true(p->agent.tokenize_timeout_s == 0.5);
	assert_int_equal(p->agent.n_passthrough, 3);
	assert_string_equal(p->agent.passthrough[0].path, "/v1/audio/transcriptions");
	assert_false(p->agent.passthrough[0].prefix);
	assert_int_equal(p->agent.passthrough[0].auth, 1); /* the default */
	assert_true(p->agent.passthrough[0].units == 400);
	assert_string_equal(p->agent.passthrough[1].path, "/pooling");
	assert_true(p->agent.passthrough[1].prefix);
	assert_int_equal(p->agent.passthrough[1].methods, FG_M_POST | FG_M_GET);
	assert_int_equal(p->agent.passthrough[2].auth, 0);
	fg_policy_free(p);
	fg_policy_free(d);
}

/* ---- malformed policies: one error, positioned ---- */

#define TIERS "tiers:\n  std: {}\n"
#define T1 TIERS "tenants:\n  - {name: a, tier: std, units_per_s: 100}\n" /* 4 lines */
#define TB TIERS "tenants:\n  - name: a\n    tier: std\n    units_per_s: 1\n" /* 6 lines */

struct bad_case {
	const char *yaml;
	size_t len;   /* 0: strlen */
	unsigned line, col;
	const char *message;
};

static const struct bad_case bad_cases[] = {
	/* YAML itself */
	{ "", 0, 1, 1, "policy file is empty" },
	{ "# nothing but a comment\n", 0, 1, 1, "policy file is empty" },
	{ "tiers: [1\n", 0, 2, 1, "did not find expected ',' or ']'" },
	{ "tiers:\n\tstd: {}\ntenants: []\n", 0, 2, 1, "a tab cannot indent" },
	{ "tiers:\n  st\xff: {}\n", 0, 2, 5, "not valid UTF-8" },
	{ "tiers: {std: {}}\ntenants: [\0]\n", 29, 2, 11, "invalid character U+0000" },
	{ "tiers:\n  std: &t {}\ntenants: []\n", 0, 2, 8, "anchors (&t) are not supported" },
	{ "tiers:\n  std: *t\ntenants: []\n", 0, 2, 8, "aliases (*t) are not supported" },
	{ "tiers:\n  std: !!map {}\ntenants: []\n", 0, 2, 8, "tags (tag:yaml.org,2002:map) are not supported" },
	{ "tiers: {std: {}}\ntenants: []\n---\ntiers: {}\n", 0, 3, 1, "found a second '---'" },
	/* shape of the document */
	{ "- a\n- b\n", 0, 1, 1, "the policy must be a mapping, got a list" },
	{ "? [a]\n: b\n" TIERS "tenants: []\n", 0, 1, 3, "keys in the policy must be names, got a list" },
	{ "tiers: {std: {}}\n", 0, 1, 1, "the policy is missing required key 'tenants'" },
	{ "tiers: {std: {}}\ntennants: []\n", 0, 2, 1, "unknown key 'tennants' in the policy; did you mean 'tenants'?" },
	{ "tiers: {std: {}}\ntenants: []\ntiers: {x: {}}\n", 0, 3, 1, "duplicate key 'tiers' in the policy (first at 1:1)" },
	/* tiers */
	{ "tiers: [std]\ntenants: []\n", 0, 1, 8, "tiers must be a mapping, got a list" },
	{ "tiers: {}\ntenants: []\n", 0, 1, 8, "at least one tier" },
	{ "tiers:\n  std: {wieght: 2}\ntenants: []\n", 0, 2, 9, "unknown key 'wieght' in tiers.std; did you mean 'weight'?" },
	{ "tiers:\n  std: {weight: -1}\ntenants: []\n", 0, 2, 17, "tiers.std.weight must be in (0, 1000000], got -1" },
	{ "tiers:\n  std: {weight: yes}\ntenants: []\n", 0, 2, 17, "tiers.std.weight must be a number, got 'yes'" },
	{ "tiers:\n  std:\n    weight:\ntenants: []\n", 0, 3, 12, "tiers.std.weight has no value" },
	{ "tiers:\n  std:\n    max_context: 200000\n    kv_cap_tokens: 100000\ntenants: []\n", 0, 3, 18,
	  "max_context 200000 exceeds kv_cap_tokens 100000" },
	{ "tiers:\n  std: {kv_cap_tokens: 700000}\ntenants: []\n", 0, 2, 24, "exceeds the replica's kv_pool_tokens 646503" },
	{ "tiers:\n  'gold tier': {}\ntenants: []\n", 0, 2, 3, "may only use letters, digits" },
	{ "tiers:\n  std: {}\n  std: {}\ntenants: []\n", 0, 3, 3, "duplicate tier 'std' (first at 2:3)" },
	/* tenants */
	{ "tiers: {std: {}}\ntenants: {a: 1}\n", 0, 2, 10, "tenants must be a list, got a mapping" },
	{ "tiers: {std: {}}\ntenants:\n  - acme\n", 0, 3, 5, "tenants[0] must be a mapping, got a scalar" },
	{ TIERS "tenants:\n  - {name: a, tier: stf, units_per_s: 100}\n", 0, 4, 21, "unknown tier 'stf'; did you mean 'std'?" },
	{ TIERS "tenants:\n  - {name: a, tier: std, units_per_s: 100, replicas: 0.5}\n", 0, 4, 44,
	  "sets both units_per_s and replicas; give exactly one" },
	{ TIERS "tenants:\n  - {name: a, tier: std}\n", 0, 4, 5, "needs a quota: units_per_s or replicas" },
	{ TIERS "tenants:\n  - {name: a, tier: std, units_per_s: 0}\n", 0, 4, 39,
	  "tenants[0].units_per_s must be in (0, 1e+12], got 0" },
	{ TIERS "tenants:\n  - {tier: std, units_per_s: 1}\n", 0, 4, 5, "tenants[0] is missing required key 'name'" },
	{ TIERS "tenants:\n  - {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, tier: std, units_per_s: 1}\n", 0, 4, 12,
	  "tenants[0].name is too long: 32 bytes, at most 31" },
	{ T1 "  - {name: a, tier: std, units_per_s: 1}\n", 0, 5, 12, "duplicate tenant name 'a' (first at 4:12)" },
	{ TB "    keys: [sk-acme-demo]\n", 0, 7, 12, "never the key itself" },
	{ TB "    keys: [\"sha256:abcd\"]\n", 0, 7, 12, "must be \"sha256:\" and 64 hex digits" },
	{ TB "    keys: [\"sha256:" H64 "\", \"sha256:" H64 "\"]\n", 0, 7, 87,
	  "tenants[0].keys[1] repeats keys[0] of the same tenant" },
	{ TIERS "tenants:\n  - {name: a, tier: std, units_per_s: 1, keys: [\"sha256:" H64 "\"]}\n"
	  "  - {name: b, tier: std, units_per_s: 1, keys: [\"sha256:" H64 "\"]}\n", 0, 5, 49,
	  "tenants[1].keys[0] is already a key of tenant 'a' (at 4:49)" },
	{ TB "    cache: salty\n", 0, 7, 12, "tenants[0].cache must be salted | shared, got 'salty'; did you mean 'salted'?" },
	{ TB "    sources: [10.1.2.3/16]\n", 0, 7, 15, "host bits are set; did you mean 10.1.0.0/16?" },
	{ TB "    sources: [\"fd00::1/64\"]\n", 0, 7, 15, "host bits are set; did you mean fd00::/64?" },
	{ TB "    sources: [10.0.0.0/33]\n", 0, 7, 15, "prefix length must be a number from 0 to 32" },
	{ TB "    sources: [10.1.0/16]\n", 0, 7, 15, "'10.1.0' is not a numeric IPv4 or IPv6 address" },
	{ TB "    sources: [{a: 1}]\n", 0, 7, 15, "tenants[0].sources[0] must be a single value, got a mapping" },
	{ TIERS "tenants:\n  - {name: a, tier: std, units_per_s: 1, sources: [10.1.0.0/16]}\n"
	  "  - {name: b, tier: std, units_per_s: 1, sources: [10.1.2.0/24]}\n", 0, 5, 52,
	  "tenants[1].sources[0] (tenant 'b') 10.1.2.0/24 overlaps tenants[0].sources[0] (tenant 'a') 10.1.0.0/16" },
	{ TB "    sources: [10.1.0.0/16, 10.1.0.0/24]\n", 0, 7, 28,
	  "tenants[0].sources[1] (tenant 'a') 10.1.0.0/24 overlaps tenants[0].sources[0] (tenant 'a') 10.1.0.0/16 (at 7:15); list each range once" },
	{ T1 "agent:\n  trusted_proxies: [10.0.0.0/8, 10.9.0.0/16]\n", 0, 6, 33,
	  "agent.trusted_proxies[1] 10.9.0.0/16 overlaps agent.trusted_proxies[0] 10.0.0.0/8 (at 6:21); list each range once" },
	/* replica */
	{ T1 "replica:\n  gpus: 0\n", 0, 6, 9, "replica.gpus must be in [1, 1024], got 0" },
	{ T1 "replica:\n  gpus: 4.5\n", 0, 6, 9, "replica.gpus must be a whole number, got 4.5" },
	{ T1 "replica:\n  gpus: \"4\"\n", 0, 6, 9, "replica.gpus must be a number, got the quoted string '4'" },
	{ T1 "replica:\n  ceiling: 1.2\n", 0, 6, 12, "replica.ceiling must be in (0, 1], got 1.2" },
	{ T1 "replica:\n  ceiling: .inf\n", 0, 6, 12, "replica.ceiling must be a number, got '.inf'" },
	{ T1 "replica:\n  ceiling: 0x1\n", 0, 6, 12, "replica.ceiling must be a number, got '0x1'" },
	{ T1 "replica:\n  efficiency: {decode_mbu: 0}\n", 0, 6, 28, "replica.efficiency.decode_mbu must be in (0, 1], got 0" },
	{ T1 "replica:\n  model: {name: x, params: 70B, layers: 1, kv_heads: 1, head_dim: 1}\n", 0, 6, 28,
	  "replica.model.params must be a number, got '70B'" },
	{ T1 "replica:\n  model: {name: x}\n", 0, 6, 10, "replica.model is missing required key 'params'" },
	{ T1 "replica:\n  decode: {batch: 1000, context: 1000}\n", 0, 6, 11,
	  "batch 1000 x context 1000 = 1000000 tokens does not fit in kv_pool_tokens 646503" },
	{ T1 "replica:\n  gpu: {peak_flop: 1e15}\n", 0, 6, 9, "unknown key 'peak_flop' in replica.gpu; did you mean 'peak_flops'?" },
	/* agent */
	{ T1 "agent:\n  mode: fornt\n", 0, 6, 9, "agent.mode must be front | transparent, got 'fornt'; did you mean 'front'?" },
	{ T1 "agent:\n  enigne: 127.0.0.1:8001\n", 0, 6, 3, "unknown key 'enigne' in agent; did you mean 'engine'?" },
	{ T1 "agent:\n  listen: localhost:8000\n", 0, 6, 11, "'localhost' is not a numeric IPv4 address" },
	{ T1 "agent:\n  engine: '::1:8001'\n", 0, 6, 11, "an IPv6 address needs brackets" },
	{ T1 "agent:\n  engine: 127.0.0.1:70000\n", 0, 6, 11, "port must be a number from 1 to 65535" },
	{ T1 "agent:\n  engine: 127.0.0.1:8000\n", 0, 6, 11, "the proxy would forward to itself" },
	{ T1 "agent:\n  metrics_listen: 127.0.0.1:8000\n", 0, 6, 19, "collides with agent.listen 0.0.0.0:8000" },
	{ T1 "agent:\n  listen: off\n", 0, 6, 11, "agent.listen 'off': expected HOST:PORT" },
	{ T1 "agent:\n  shed_rst_per_s: 0\n", 0, 6, 19, "agent.shed_rst_per_s must be in (0, " },
	{ T1 "agent:\n  shed_rst_per_s: of\n", 0, 6, 19, "agent.shed_rst_per_s must be a number, got 'of'" },
	{ T1 "agent:\n  shed_rst_per_s: \"off\\0x\"\n", 0, 6, 19, "agent.shed_rst_per_s must be a number" },
	{ T1 "agent:\n  deny_allowance_per_s: off\n", 0, 6, 25, "agent.deny_allowance_per_s must be a number, got 'off'" },
	{ T1 "agent:\n  protected_ports: [8000, 8000]\n", 0, 6, 27, "agent.protected_ports[1]: port 8000 is listed twice" },
	{ T1 "agent:\n  protected_ports: 8000\n", 0, 6, 20, "agent.protected_ports must be a list, got a scalar" },
	{ T1 "agent:\n  interfaces: [averyveryverylongname0]\n", 0, 6, 16, "agent.interfaces[0] is too long: 22 bytes, at most 15" },
	{ T1 "agent:\n  xdp_mode: generc\n", 0, 6, 13, "did you mean 'generic'?" },
	{ T1 "agent:\n  output_pricing: contxt\n", 0, 6, 19, "agent.output_pricing must be context | flat, got 'contxt'; did you mean 'context'?" },
	{ T1 "agent:\n  output_pricing: per_token\n", 0, 6, 19, "agent.output_pricing must be context | flat, got 'per_token'" },
	{ T1 "agent:\n  output_pricing: [flat]\n", 0, 6, 19, "agent.output_pricing must be" },
	{ T1 "agent:\n  long_context: {upstream: 127.0.0.1:8002}\n", 0, 6, 17, "agent.long_context is missing required key 'threshold'" },
	{ T1 "agent:\n  max_body_bytes: 10\n", 0, 6, 19, "agent.max_body_bytes must be in [1024, 1073741824], got 10" },
	{ T1 "agent:\n  salt_secret_file: salt.key\n", 0, 6, 21, "agent.salt_secret_file must be an absolute path" },
	{ T1 "agent: [front]\n", 0, 5, 8, "agent must be a mapping, got a list" },
	{ T1 "agent:\n  timeouts: {header_s: 0}\n", 0, 6, 24, "agent.timeouts.header_s must be in (0, 3600], got 0" },
	{ T1 "agent:\n  timeouts: {tokenize_s: 90}\n", 0, 6, 26, "agent.timeouts.tokenize_s must be in (0, 60]" },
	/* agent.passthrough */
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [GET]}]\n", 0, 6, 17, "agent.passthrough[0] is missing required key 'units'" },
	{ T1 "agent:\n  passthrough: [{path: /v1/chat/completions, methods: [POST], units: 1}]\n", 0, 6, 24, "is an endpoint fairgate prices itself" },
	{ T1 "agent:\n  passthrough: [{path: /v1//x, methods: [POST], units: 1}]\n", 0, 6, 24, "empty path segments" },
	{ T1 "agent:\n  passthrough: [{path: '/a/../b', methods: [POST], units: 1}]\n", 0, 6, 24, "dot segments" },
	{ T1 "agent:\n  passthrough: [{path: '/a%2Fb', methods: [POST], units: 1}]\n", 0, 6, 24, "percent-encoded" },
	{ T1 "agent:\n  passthrough: [{path: '/a?x=1', methods: [POST], units: 1}]\n", 0, 6, 24, "without query" },
	{ T1 "agent:\n  passthrough: [{path: '/a*/b', methods: [POST], units: 1}]\n", 0, 6, 24, "'*' may only end a path" },
	{ T1 "agent:\n  passthrough: [{path: x, methods: [POST], units: 1}]\n", 0, 6, 24, "must start with '/'" },
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [FETCH], units: 1}]\n", 0, 6, 38, "'FETCH' is not a method" },
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [GET, GET], units: 1}]\n", 0, 6, 43, "GET is listed twice" },
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [], units: 1}]\n", 0, 6, 37, "must name at least one method" },
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [GET], units: 5, auth: false}]\n", 0, 6, 51, "nobody could be charged" },
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [GET], units: 1}, {path: /x, methods: [POST], units: 1}]\n", 0, 6, 62, "path /x is listed twice" },
	{ T1 "agent:\n  passthrough: [{path: /x, methods: [GET], units: -1}]\n", 0, 6, 51, "must be in [0, " },
	/* replica.model's tokenizer prior */
	{ TIERS "tenants: []\nreplica:\n  model: {name: m, params: 1e9, layers: 1, kv_heads: 1, head_dim: 1, chars_per_token: 40}\n", 0, 5, 87, "chars_per_token must be in [1, 16]" },
	/* agent.fleet */
	{ T1 "agent:\n  fleet: {node: a}\n", 0, 6, 10, "agent.fleet is missing required key 'redis'" },
	{ T1 "agent:\n  fleet: {redis: 10.0.0.1:6379, tls: {ca: /x}}\n", 0, 6, 38,
	  "agent.fleet.tls: TLS to Redis is not supported by this build (hiredis 0.14 has no TLS)" },
	{ T1 "agent:\n  fleet: {redis: redis}\n", 0, 6, 18, "agent.fleet.redis must be HOST:PORT" },
	{ T1 "agent:\n  fleet: {redis: 'red is:6379'}\n", 0, 6, 18, "'red is:6379' is not a host name" },
	{ T1 "agent:\n  fleet: {redis: 10.0.0.1:0}\n", 0, 6, 18, "port must be a number from 1 to 65535" },
	{ T1 "agent:\n  fleet: {redis: r:6379, period_s: 0}\n", 0, 6, 36, "agent.fleet.period_s must be in [0.05, 60], got 0" },
	{ T1 "agent:\n  fleet: {redis: r:6379, period_s: 20, node_timeout_s: 50}\n", 0, 6, 56,
	  "agent.fleet.node_timeout_s 50 must be at least 3 x period_s (60 s)" },
	{ T1 "agent:\n  fleet: {redis: r:6379, password_file: pw}\n", 0, 6, 41,
	  "agent.fleet.password_file must be an absolute path" },
	{ T1 "agent:\n  fleet: {redis: r:6379, node: 'a b'}\n", 0, 6, 32, "agent.fleet.node 'a b' may only use letters, digits" },
	{ T1 "agent:\n  fleet: {redis: r:6379, perod_s: 1}\n", 0, 6, 26, "unknown key 'perod_s' in agent.fleet; did you mean 'period_s'?" },
	{ TB "    fleet_floor_units_per_s: 2\n", 0, 7, 30,
	  "fleet_floor_units_per_s 2 exceeds the tenant's 1 units/s" },
	/* agent.limits, the engine's key, the metrics token */
	{ T1 "agent:\n  limits: {max_connections: 0}\n", 0, 6, 29,
	  "agent.limits.max_connections must be in [1, 16777216], got 0" },
	{ T1 "agent:\n  limits: {max_connections: 100, max_connections_per_source: 200}\n", 0, 6, 62,
	  "agent.limits.max_connections_per_source 200 exceeds agent.limits.max_connections 100" },
	{ T1 "agent:\n  limits: {max_buffered_bytes: 1000}\n", 0, 6, 32,
	  "agent.limits.max_buffered_bytes must be in [1048576, 8589934592], got 1000" },
	{ T1 "agent:\n  limits: {max_buffered_bytes: 2097152}\n  max_body_bytes: 4194304\n", 0, 6, 32,
	  "agent.limits.max_buffered_bytes 2097152 is below agent.max_body_bytes 4194304" },
	{ T1 "agent:\n  limits: {max_buffered_bytes: 4194304.5}\n", 0, 6, 32,
	  "agent.limits.max_buffered_bytes must be a whole number, got 4194304.5" },
	{ T1 "agent:\n  limits: {max_inflight_per_tenant: -1}\n", 0, 6, 37,
	  "agent.limits.max_inflight_per_tenant must be in [1, 1048576], got -1" },
	{ T1 "agent:\n  limits: {max_conections: 5}\n", 0, 6, 12,
	  "unknown key 'max_conections' in agent.limits; did you mean 'max_connections'?" },
	{ T1 "agent:\n  limits: [1, 2]\n", 0, 6, 11, "agent.limits must be a mapping" },
	{ T1 "agent:\n  engine_api_key_file: engine.key\n", 0, 6, 24,
	  "agent.engine_api_key_file must be an absolute path" },
	{ T1 "agent:\n  metrics_token_file: ''\n", 0, 6, 23,
	  "agent.metrics_token_file must be an absolute path" },
	{ T1 "agent:\n  metrics_listen: off\n  metrics_token_file: /run/metrics.token\n", 0, 7, 23,
	  "agent.metrics_token_file is set but agent.metrics_listen is off" },
};

static void test_malformed_table(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char line[700], prefix[64];
	unsigned failures = 0;

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		size_t len = c->len ? c->len : strlen(c->yaml);
		int rc = fg_policy_parse_buffer(c->yaml, len, "case.yaml", p, &err);
		fg_policy_error_format(&err, line, sizeof(line));
		snprintf(prefix, sizeof(prefix), "case.yaml:%u:%u: ", c->line, c->col);
		if (rc != -1 || strncmp(line, prefix, strlen(prefix)) ||
		    !strstr(err.message, c->message) || strchr(line, '\n')) {
			print_error("case %zu: want %s...%s\n          got  %s (rc %d)\n", i, prefix,
				    c->message, rc ? line : "success", rc);
			failures++;
		}
	}
	assert_true(sizeof(bad_cases) / sizeof(bad_cases[0]) >= 30);
	assert_int_equal(failures, 0);
	fg_policy_free(p);
}

/* Nesting is bounded: a deep document is an error, not a stack overflow. */
static void test_deep_nesting(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	size_t depth = 100000;
	char *buf = malloc(8 + 2 * depth);

	memcpy(buf, "tiers: ", 7);
	memset(buf + 7, '[', depth);
	memset(buf + 7 + depth, ']', depth);
	assert_int_equal(fg_policy_parse_buffer(buf, 7 + 2 * depth, "deep.yaml", p, &err), -1);
	assert_non_null(strstr(err.message, "nested deeper than"));
	assert_int_equal(err.line, 1);
	free(buf);
	fg_policy_free(p);
}

/* ---- limits ---- */

struct text {
	char *buf;
	size_t len, cap;
};

static void add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	char tmp[512];

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof(tmp));
	if (t->len + (size_t)n + 1 > t->cap) {
		t->cap = (t->cap + (size_t)n + 1) * 2;
		t->buf = realloc(t->buf, t->cap);
		assert_non_null(t->buf);
	}
	memcpy(t->buf + t->len, tmp, (size_t)n + 1);
	t->len += (size_t)n;
}

/* n tenants, each with `keys` distinct keys and `sources` distinct /32s;
 * with `full`, the limits of a whole policy instead: one key each and the
 * last FG_MAX_KEYS, the policy's FG_MAX_POLICY_SOURCES on its last tenants
 * (FG_MAX_SOURCES each), so the highest ids carry the most. */
static void big_policy_of(struct text *t, unsigned n, unsigned keys, unsigned sources, bool full)
{
	const unsigned with_sources = FG_MAX_POLICY_SOURCES / FG_MAX_SOURCES;

	add(t, "tiers: {std: {}}\ntenants:\n");
	for (unsigned i = 0; i < n; i++) {
		unsigned nk = keys, ns = sources, first = i;

		if (full) {
			nk = i == n - 1 ? FG_MAX_KEYS : 1;
			ns = i + with_sources >= n ? FG_MAX_SOURCES : 0;
			first = (i + with_sources - n) * FG_MAX_SOURCES;
		}
		add(t, "  - name: t%u\n    tier: std\n    units_per_s: 1\n", i);
		if (nk)
			add(t, "    keys:\n");
		for (unsigned k = 0; k < nk; k++)
			add(t, "      - sha256:%056x%08x\n", i, k);
		if (ns)
			add(t, "    sources:\n");
		for (unsigned s = 0; s < ns; s++) {
			unsigned a = full ? first + s : i << 8 | s;
			add(t, "      - 10.%u.%u.%u/32\n", a >> 16 & 255, a >> 8 & 255, a & 255);
		}
	}
}

static void big_policy(struct text *t, unsigned n, unsigned keys, unsigned sources)
{
	big_policy_of(t, n, keys, sources, false);
}

static void test_limits(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	struct text t = { 0 };
	char msg[64];

	/* Everything at its limit parses: 65,536 tenants, the policy's 16,384
	 * sources. */
	big_policy_of(&t, FG_MAX_TENANTS, 0, 0, true);
	if (fg_policy_parse_buffer(t.buf, t.len, "big.yaml", p, &err))
		fail_msg("full policy rejected: %u:%u: %s", err.line, err.col, err.message);
	assert_int_equal(p->n_tenants, FG_MAX_TENANTS);
	assert_int_equal(p->tenants[FG_MAX_TENANTS - 1].id, FG_MAX_TENANTS - 1);
	assert_string_equal(p->tenants[FG_MAX_TENANTS - 1].name, "t65535");
	assert_int_equal(p->tenants[FG_MAX_TENANTS - 1].n_keys, FG_MAX_KEYS);
	assert_int_equal(p->tenants[FG_MAX_TENANTS - 1].n_sources, FG_MAX_SOURCES);
	uint8_t want[32] = { 0 };
	want[26] = 0xff; /* sha256:...0000ffff00000003: key 3 of tenant 65535 */
	want[27] = 0xff;
	want[31] = 3;
	assert_ptr_equal(fg_policy_tenant_by_key_hash(p, want), &p->tenants[FG_MAX_TENANTS - 1]);

	/* One more tenant is an error at that tenant. */
	unsigned last_line = 1;
	for (size_t i = 0; i < t.len; i++)
		last_line += t.buf[i] == '\n';
	add(&t, "  - {name: extra, tier: std, units_per_s: 1}\n");
	assert_int_equal(fg_policy_parse_buffer(t.buf, t.len, "big.yaml", p, &err), -1);
	assert_int_equal(err.line, last_line);
	assert_int_equal(err.col, 5);
	snprintf(msg, sizeof(msg), "more than %d tenants", FG_MAX_TENANTS);
	assert_non_null(strstr(err.message, msg));
	assert_null(p->tenants); /* a failed parse owns nothing */
	free(t.buf);

	/* A name repeated far apart is still found (the names are hashed). */
	t = (struct text){ 0 };
	big_policy(&t, 40000, 0, 0);
	add(&t, "  - {name: t7, tier: std, units_per_s: 1}\n");
	assert_int_equal(fg_policy_parse_buffer(t.buf, t.len, "dup.yaml", p, &err), -1);
	assert_non_null(strstr(err.message, "duplicate tenant name 't7' (first at 24:11)"));
	free(t.buf);

	/* One source past the policy's FG_MAX_POLICY_SOURCES (the kernel's
	 * trie): an error at that source. */
	t = (struct text){ 0 };
	big_policy(&t, FG_MAX_POLICY_SOURCES / FG_MAX_SOURCES + 1, 0, FG_MAX_SOURCES);
	assert_int_equal(fg_policy_parse_buffer(t.buf, t.len, "src.yaml", p, &err), -1);
	snprintf(msg, sizeof(msg), "more than %d sources in all tenants", FG_MAX_POLICY_SOURCES);
	assert_non_null(strstr(err.message, msg));
	assert_int_equal(err.line, 3 + (FG_MAX_POLICY_SOURCES / FG_MAX_SOURCES) * (4 + FG_MAX_SOURCES) + 4);
	free(t.buf);

	t = (struct text){ 0 };
	big_policy(&t, 1, FG_MAX_KEYS + 1, 0);
	assert_int_equal(fg_policy_parse_buffer(t.buf, t.len, "k.yaml", p, &err), -1);
	assert_int_equal(err.line, 7 + FG_MAX_KEYS);
	assert_non_null(strstr(err.message, "tenants[0].keys has more than 8 keys"));
	free(t.buf);

	t = (struct text){ 0 };
	big_policy(&t, 1, 0, FG_MAX_SOURCES + 1);
	assert_int_equal(fg_policy_parse_buffer(t.buf, t.len, "s.yaml", p, &err), -1);
	assert_non_null(strstr(err.message, "tenants[0].sources has more than 16 entries"));
	free(t.buf);

	t = (struct text){ 0 };
	add(&t, "tenants: []\ntiers:\n");
	for (unsigned i = 0; i <= FG_MAX_TIERS; i++)
		add(&t, "  tier%u: {}\n", i);
	assert_int_equal(fg_policy_parse_buffer(t.buf, t.len, "t.yaml", p, &err), -1);
	assert_int_equal(err.line, 3 + FG_MAX_TIERS);
	assert_non_null(strstr(err.message, "more than 16 tiers"));
	free(t.buf);

	/* A 31-character name fits FG_NAME_MAX, as tested above a 32 does not. */
	assert_parses(TIERS "tenants:\n  - {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, tier: std, units_per_s: 1}\n", p);
	fg_policy_free(p);
}

/* ---- robustness: truncation and mutation ---- */

static void assert_ok_or_positioned(int rc, const struct fg_policy_error *err, size_t len,
				    const char *what, size_t at)
{
	if (rc == 0)
		return;
	assert_int_equal(rc, -1);
	if (err->line < 1 || err->col < 1 || !err->message[0] || strchr(err->message, '\n'))
		fail_msg("%s at %zu (len %zu): bad error %u:%u '%s'", what, at, len, err->line,
			 err->col, err->message);
}

static void test_truncated_example(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char path[512];
	size_t len;
	char *buf = slurp(root_path("examples/policy.yaml", path, sizeof(path)), &len);
	unsigned ok = 0;

	for (size_t cut = 0; cut <= len; cut++) {
		int rc = fg_policy_parse_buffer(buf, cut, "cut.yaml", p, &err);
		assert_ok_or_positioned(rc, &err, cut, "truncated", cut);
		ok += rc == 0;
	}
	/* Cuts inside the trailing comments still parse; most others must not. */
	assert_true(ok >= 1);
	assert_true(ok < len / 2);
	free(buf);
	fg_policy_free(p);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_mutated_example(void **state)
{
	(void)state;
	static const char alphabet[] = ":-[]{},\"'#&*!|>%@` \t\n\\0123456789.e/x";
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char path[512];
	size_t len;
	char *orig = slurp(root_path("examples/policy.yaml", path, sizeof(path)), &len);
	char *buf = malloc(len);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned failed = 0;

	for (unsigned iter = 0; iter < 3000; iter++) {
		memcpy(buf, orig, len);
		unsigned edits = 1 + (unsigned)(xorshift(&seed) % 4);
		for (unsigned e = 0; e < edits; e++) {
			size_t at = xorshift(&seed) % len;
			uint64_t r = xorshift(&seed);
			buf[at] = r & 1 ? alphabet[(r >> 8) % (sizeof(alphabet) - 1)]
					: (char)(r >> 16);
		}
		int rc = fg_policy_parse_buffer(buf, len, "mut.yaml", p, &err);
		assert_ok_or_positioned(rc, &err, len, "mutation", iter);
		failed += rc != 0;
	}
	assert_true(failed > 0);
	free(buf);
	free(orig);
	fg_policy_free(p);
}

/* ---- helpers ---- */

static void test_suggest(void **state)
{
	(void)state;
	static const char *const keys[] = { "replica", "tiers", "tenants", "agent" };

	assert_int_equal(fg_edit_distance("tiers", "tiers"), 0);
	assert_int_equal(fg_edit_distance("teirs", "tiers"), 1); /* swap */
	assert_int_equal(fg_edit_distance("kitten", "sitting"), 3);
	assert_string_equal(fg_suggest("Tenants", keys, 4), "tenants");
	assert_string_equal(fg_suggest("replicas", keys, 4), "replica");
	assert_string_equal(fg_suggest("agnet", keys, 4), "agent");
	assert_null(fg_suggest("foo", keys, 4));
	assert_null(fg_suggest("", keys, 4));
}

static void test_addresses(void **state)
{
	(void)state;
	struct fg_hostport hp;
	struct fg_cidr a, b;
	char why[128];

	assert_int_equal(fg_parse_hostport("[fe80::1]:443", &hp, why, sizeof(why)), 0);
	assert_string_equal(hp.host, "fe80::1");
	assert_int_equal(hp.port, 443);
	assert_int_equal(fg_parse_hostport("10.0.0.1:0", &hp, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_hostport("10.0.0.1:", &hp, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_hostport(":80", &hp, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_hostport("[::1]80", &hp, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_hostport("10.0.0.1:+80", &hp, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_hostport("1.2.3:80", &hp, why, sizeof(why)), -1);

	assert_int_equal(fg_parse_cidr("10.1.0.0/16", &a, why, sizeof(why)), 0);
	assert_int_equal(fg_parse_cidr("10.1.128.0/17", &b, why, sizeof(why)), 0);
	assert_true(fg_cidr_contains(&a, &b));
	assert_false(fg_cidr_contains(&b, &a));
	assert_true(fg_cidr_overlap(&b, &a));
	assert_int_equal(fg_parse_cidr("10.2.0.0/16", &b, why, sizeof(why)), 0);
	assert_false(fg_cidr_overlap(&a, &b));
	assert_int_equal(fg_parse_cidr("0.0.0.0/0", &b, why, sizeof(why)), 0);
	assert_true(fg_cidr_contains(&b, &a));
	assert_int_equal(fg_parse_cidr("192.0.2.7", &a, why, sizeof(why)), 0);
	assert_int_equal(a.prefixlen, 32);
	assert_int_equal(fg_parse_cidr("::/0", &b, why, sizeof(why)), 0);
	assert_false(fg_cidr_overlap(&a, &b)); /* families never overlap */
	assert_int_equal(fg_parse_cidr("10.0.0.0/", &a, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_cidr("10.0.0.0/1a", &a, why, sizeof(why)), -1);
	assert_int_equal(fg_parse_cidr("fd00::/129", &a, why, sizeof(why)), -1);
}

/* agent.fleet: the store as a name, an address or a unix socket; defaults */
static void test_fleet_block(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));

	assert_parses(T1, p);
	assert_false(p->agent.fleet.enabled);
	assert_parses(T1 "agent:\n  fleet: {redis: redis.fairgate.svc.cluster.local:6379}\n", p);
	assert_true(p->agent.fleet.enabled);
	assert_string_equal(p->agent.fleet.redis_host, "redis.fairgate.svc.cluster.local");
	assert_int_equal(p->agent.fleet.redis_port, 6379);
	assert_string_equal(p->agent.fleet.redis_unix, "");
	assert_string_equal(p->agent.fleet.node, "");
	assert_true(p->agent.fleet.period_s == 2 && p->agent.fleet.buffer_s == 1 &&
		    p->agent.fleet.node_timeout_s == 300 && p->agent.fleet.call_timeout_s == 0.5);
	assert_parses(T1 "agent:\n  fleet: {redis: \"[fd00::5]:6380\", node: gpu-7.zone-b, period_s: 0.5,"
		      " buffer_s: 0, node_timeout_s: 10, call_timeout_s: 0.2, password_file: /run/pw}\n", p);
	assert_string_equal(p->agent.fleet.redis_host, "fd00::5");
	assert_int_equal(p->agent.fleet.redis_port, 6380);
	assert_string_equal(p->agent.fleet.node, "gpu-7.zone-b");
	assert_true(p->agent.fleet.period_s == 0.5 && p->agent.fleet.buffer_s == 0 &&
		    p->agent.fleet.node_timeout_s == 10 && p->agent.fleet.call_timeout_s == 0.2);
	assert_string_equal(p->agent.fleet.password_file, "/run/pw");
	assert_parses(T1 "agent:\n  fleet: {redis: /run/redis/redis.sock}\n", p);
	assert_string_equal(p->agent.fleet.redis_unix, "/run/redis/redis.sock");
	assert_string_equal(p->agent.fleet.redis_host, "");
	assert_parses(TB "    fleet_floor_units_per_s: 0.5\n", p);
	assert_true(p->tenants[0].fleet_floor_units_per_s == 0.5);
	fg_policy_free(p);
}

/* agent.limits: left out, the two derived limits stay 0 (the agent fills
 * them at start) and the others take their defaults; each can be set alone;
 * the key files are paths. */
static void test_limits_block(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	static const struct {
		const char *agent;
		uint32_t conns, per_source, inflight;
		uint64_t buffered;
	} rows[] = {
		{ "", 0, 0, 256, 0 },
		{ "agent: {limits: {}}\n", 0, 0, 256, 0 },
		{ "agent: {limits: {max_connections: 900}}\n", 900, 0, 256, 0 },
		{ "agent: {limits: {max_connections: 100}}\n", 100, 0, 256, 0 }, /* the default per source is derived at start: half the total */
		{ "agent: {limits: {max_connections: 100, max_connections_per_source: 100}}\n", 100, 100, 256, 0 },
		{ "agent: {limits: {max_connections_per_source: 1}}\n", 0, 1, 256, 0 },
		{ "agent: {limits: {max_buffered_bytes: 8388608}}\n", 0, 0, 256, 8u << 20 },
		{ "agent: {limits: {max_buffered_bytes: 8589934592}}\n", 0, 0, 256, 1ull << 33 },
		{ "agent: {max_body_bytes: 1048576, limits: {max_buffered_bytes: 1048576}}\n", 0, 0, 256, 1u << 20 },
		{ "agent: {limits: {max_inflight_per_tenant: 1}}\n", 0, 0, 1, 0 },
		{ "agent:\n  limits:\n    max_connections: 10000\n    max_connections_per_source: 64\n"
		  "    max_buffered_bytes: 536870912\n    max_inflight_per_tenant: 32\n", 10000, 64, 32, 512u << 20 },
	};
	char yaml[512];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		snprintf(yaml, sizeof(yaml), "%s%s", T1, rows[i].agent);
		assert_parses(yaml, p);
		const struct fg_agent_limits *l = &p->agent.limits;
		if (l->max_connections != rows[i].conns || l->max_connections_per_source != rows[i].per_source ||
		    l->max_inflight_per_tenant != rows[i].inflight || l->max_buffered_bytes != rows[i].buffered)
			fail_msg("row %zu: got %u %u %u %llu", i, l->max_connections,
				 l->max_connections_per_source, l->max_inflight_per_tenant,
				 (unsigned long long)l->max_buffered_bytes);
	}
	assert_string_equal(p->agent.engine_api_key_file, "");
	assert_string_equal(p->agent.metrics_token_file, "");
	assert_parses(T1 "agent: {engine_api_key_file: /run/secrets/engine.key,"
		      " metrics_token_file: /run/secrets/metrics.token}\n", p);
	assert_string_equal(p->agent.engine_api_key_file, "/run/secrets/engine.key");
	assert_string_equal(p->agent.metrics_token_file, "/run/secrets/metrics.token");
	fg_policy_free(p);
}

static void test_file_errors(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char line[700];

	assert_int_equal(fg_policy_parse_file("/nonexistent/policy.yaml", p, &err), -1);
	fg_policy_error_format(&err, line, sizeof(line));
	assert_string_equal(line, "/nonexistent/policy.yaml: cannot open: No such file or directory");
	assert_int_equal(fg_policy_parse_file("/", p, &err), -1);
	assert_non_null(strstr(err.message, "not a regular file"));
	fg_policy_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_example_yaml),
		cmocka_unit_test(test_example_json_matches_yaml),
		cmocka_unit_test(test_json_compact_and_tabs),
		cmocka_unit_test(test_utf8_bom),
		cmocka_unit_test(test_documented_example),
		cmocka_unit_test(test_replicas_resolve_with_cost_model),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_malformed_table),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_fleet_block),
		cmocka_unit_test(test_limits_block),
		cmocka_unit_test(test_truncated_example),
		cmocka_unit_test(test_mutated_example),
		cmocka_unit_test(test_suggest),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_file_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
