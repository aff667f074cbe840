/* test_policy_split.c — a policy whose tenants live in a second file (the
 * DaemonSet's Secret beside its ConfigMap) and `agent.interfaces: auto`:
 * the example policy split in two parses to exactly the example policy;
 * errors name the file and line they are in (a tenant's error the tenants
 * file, a tier's the policy file, a clash between the two files the one
 * the later tenant is in); either file holding what belongs in the other
 * is refused; `auto` (bare or quoted, as JSON writes it) and a list are
 * told apart, and anything else is an error naming both forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"


/* Two policies alike: every field, the tenants compared by content (each
 * policy has its own tenant array). */
static void assert_same_policy(const struct fg_policy *a, const struct fg_policy *b)
{
	assert_memory_equal(a, b, offsetof(struct fg_policy, tenants));
	assert_memory_equal(&a->agent, &b->agent, sizeof(a->agent));
	if (a->n_tenants)
		assert_memory_equal(a->tenants, b->tenants, a->n_tenants * sizeof(*a->tenants));
}

static char *slurp(const char *rel, size_t *len)
{
	const char *root = getenv("FG_ROOT");
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", root ? root : ".", rel);
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

/* The example policy cut at its "tenants:" line and the section rule after
 * the list: (policy without tenants, tenants alone). */
static void split_example(char **policy, char **tenants)
{
	size_t len;
	char *all = slurp("examples/policy.yaml", &len);
	char *t = strstr(all, "\ntenants:\n");
	assert_non_null(t);
	t++;
	char *end = strstr(t, "\n# ----");
	assert_non_null(end);
	end++;
	size_t tlen = (size_t)(end - t);
	*tenants = strndup(t, tlen);
	*policy = malloc(len + 1);
	assert_non_null(*tenants);
	assert_non_null(*policy);
	memcpy(*policy, all, (size_t)(t - all));
	strcpy(*policy + (t - all), end);
	free(all);
}

static int parse2(const char *policy, const char *tenants, struct fg_policy *p,
		  struct fg_policy_error *err)
{
	return fg_policy_parse_split(policy, strlen(policy), "policy.yaml", tenants,
				     tenants ? strlen(tenants) : 0, "tenants.yaml", p, err);
}

static void expect_error(const char *policy, const char *tenants, const char *file, unsigned line,
			 unsigned col, const char *msg)
{
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;
	char text[700];

	assert_non_null(p);
	assert_int_equal(parse2(policy, tenants, p, &err), -1);
	fg_policy_error_format(&err, text, sizeof(text));
	fg_policy_free(p);
	if (strcmp(err.file, file) || err.line != line || err.col != col || !strstr(err.message, msg))
		fail_msg("got \"%s\", want %s:%u:%u: ...%s...", text, file, line, col, msg);
}

static void test_split_example_equals_whole(void **state)
{
	(void)state;
	char *policy, *tenants;
	size_t len;
	char *whole = slurp("examples/policy.yaml", &len);
	struct fg_policy *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct fg_policy_error err;

	split_example(&policy, &tenants);
	assert_int_equal(fg_policy_parse_buffer(whole, len, "whole.yaml", a, &err), 0);
	if (parse2(policy, tenants, b, &err)) {
		char text[700];
		fg_policy_error_format(&err, text, sizeof(text));
		fail_msg("%s", text);
	}
	assert_int_equal(b->n_tenants, 3);
	assert_string_equal(b->tenants[0].name, "acme");
	assert_string_equal(b->tiers[b->tenants[2].tier].name, "long-context");
	/* the same policy, byte for byte (both start from the same defaults) */
	assert_same_policy(a, b);
	/* and no tenants at all is a tenants file too */
	assert_int_equal(parse2(policy, "tenants: []\n", b, &err), 0);
	assert_int_equal(b->n_tenants, 0);
	free(whole);
	free(policy);
	free(tenants);
	fg_policy_free(a);
	fg_policy_free(b);
}

#define POLICY "tiers:\n  std: {weight: 1, max_context: 4096, kv_cap_tokens: 65536, burst_s: 10}\n"

static void test_split_errors_name_their_file(void **state)
{
	(void)state;
	/* a tenant's mistake is in the tenants file, at its own line */
	expect_error(POLICY, "tenants:\n  - {name: a, tier: gold, units_per_s: 1}\n", "tenants.yaml",
		     2, 21, "unknown tier 'gold'");
	/* a tier's mistake is the policy file's */
	expect_error("tiers:\n  std: {weight: 0}\n", "tenants: []\n", "policy.yaml", 2, 17,
		     "tiers.std.weight must be");
	/* a key given to two tenants: the second one's line */
	expect_error(POLICY,
		     "tenants:\n  - {name: a, tier: std, units_per_s: 1, keys: [\"sha256:" 
		     "0000000000000000000000000000000000000000000000000000000000000000\"]}\n"
		     "  - {name: b, tier: std, units_per_s: 1, keys: [\"sha256:"
		     "0000000000000000000000000000000000000000000000000000000000000000\"]}\n",
		     "tenants.yaml", 3, 49, "is already a key of tenant 'a'");
	/* what belongs in the other file */
	expect_error(POLICY "tenants: []\n", "tenants: []\n", "policy.yaml", 3, 1,
		     "tenants come from the tenants file tenants.yaml");
	expect_error(POLICY, "tenants: []\nagent: {mode: front}\n", "tenants.yaml", 2, 1,
		     "a tenants file holds only 'tenants'; 'agent' belongs in the policy file policy.yaml");
	expect_error(POLICY, "- {name: a}\n", "tenants.yaml", 1, 1,
		     "a tenants file holds one mapping with the key 'tenants'");
	expect_error(POLICY, "", "tenants.yaml", 1, 1, "tenants file is empty");
	expect_error(POLICY, "tenants: [\n", "tenants.yaml", 2, 1, "invalid YAML");
	/* the policy alone, without a tenants file, still needs its tenants */
	expect_error(POLICY, NULL, "policy.yaml", 1, 1, "missing required key 'tenants'");
}

static void test_interfaces_auto(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;

	assert_int_equal(parse2(POLICY "agent:\n  interfaces: auto\n", "tenants: []\n", p, &err), 0);
	assert_true(p->agent.interfaces_auto);
	assert_int_equal(p->agent.n_interfaces, 0);
	assert_int_equal(parse2(POLICY "agent:\n  interfaces: [eth0, bond0]\n", "tenants: []\n", p, &err), 0);
	assert_false(p->agent.interfaces_auto);
	assert_int_equal(p->agent.n_interfaces, 2);
	assert_string_equal(p->agent.interfaces[1], "bond0");
	/* the default: no interfaces, not auto (gate attaches only where told) */
	assert_int_equal(parse2(POLICY, "tenants: []\n", p, &err), 0);
	assert_false(p->agent.interfaces_auto);
	assert_int_equal(p->agent.n_interfaces, 0);
	fg_policy_free(p);
	expect_error(POLICY "agent:\n  interfaces: automatic\n", "tenants: []\n", "policy.yaml", 4, 15,
		     "agent.interfaces must be auto or a list of interface names, got 'automatic'");
	/* quoted too, as JSON must write it; but the whole word only */
	p = calloc(1, sizeof(*p));
	assert_non_null(p);
	assert_int_equal(parse2(POLICY "agent:\n  interfaces: \"auto\"\n", "tenants: []\n", p, &err), 0);
	assert_true(p->agent.interfaces_auto);
	static const char json[] =
		"{\"tiers\": {\"std\": {\"weight\": 1, \"max_context\": 4096, \"kv_cap_tokens\": 65536, "
		"\"burst_s\": 10}}, \"tenants\": [], \"agent\": {\"interfaces\": \"auto\"}}";
	memset(p, 0, sizeof(*p));
	assert_int_equal(fg_policy_parse_buffer(json, strlen(json), "policy.json", p, &err), 0);
	assert_true(p->agent.interfaces_auto);
	fg_policy_free(p);
	expect_error(POLICY "agent:\n  interfaces: \"auto\\0\"\n", "tenants: []\n", "policy.yaml", 4,
		     15, "agent.interfaces must be auto or a list");
	expect_error(POLICY "agent:\n  interfaces: \"auto \"\n", "tenants: []\n", "policy.yaml", 4,
		     15, "agent.interfaces must be auto or a list");
	expect_error(POLICY "agent:\n  interfaces: [auto, auto]\n", "tenants: []\n", "policy.yaml", 4,
		     22, "interface auto is listed twice");
	expect_error(POLICY "agent:\n  interfaces: {eth0: 1}\n", "tenants: []\n", "policy.yaml", 4, 15,
		     "agent.interfaces must be auto or a list of interface names, got a mapping");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_example_equals_whole),
		cmocka_unit_test(test_split_errors_name_their_file),
		cmocka_unit_test(test_interfaces_auto),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
