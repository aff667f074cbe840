/* ctl_kernel.c — the datapath's control-socket commands:
 *
 *   {"cmd":"tenant_deny","tenant":NAME,"mode":"delay"|"shed","for_s":SECONDS}
 *   {"cmd":"tenant_allow","tenant":NAME}
 *
 * They write the same deny fields the quota controller writes
 * (fg_kernel_set_deny_from), marked as the operator's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agent/ctl/ctl_commands.h"
#include "agent/ctl/ctl_server.h"
#include "agent/kernel/kernel.h"
#include "agent/kernel/kernel_internal.h"

#define MAX_DENY_S (30.0 * 24 * 3600)

static const struct fg_tenant *find_tenant(struct fg_agent_state *st, json_t *req, char *err,
					   size_t errlen)
{
	const char *name = json_string_value(json_object_get(req, "tenant"));
	const struct fg_tenant *t;

	if (!name) {
		snprintf(err, errlen, "missing \"tenant\"");
		return NULL;
	}
	t = fg_policy_tenant_by_name(st->policy, name);
	if (!t)
		snprintf(err, errlen, "no tenant named '%s' in the policy", name);
	else if (!st->kernel)
		snprintf(err, errlen, "kernel enforcement is off on this node (fairgated runs with "
			 "--no-bpf, or its datapath failed to load: see its log)");
	return st->kernel ? t : NULL;
}

static json_t *cmd_tenant_deny(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	const struct fg_tenant *t = find_tenant(st, req, err, errlen);
	const char *mode = json_string_value(json_object_get(req, "mode"));
	json_t *jfor = json_object_get(req, "for_s");
	double for_s = json_number_value(jfor);
	int verdict;
	uint64_t until;

	if (!t)
		return NULL;
	if (mode && !strcmp(mode, "delay"))
		verdict = FG_VERDICT_DELAY;
	else if (mode && !strcmp(mode, "shed"))
		verdict = FG_VERDICT_SHED;
	else {
		snprintf(err, errlen, "\"mode\" must be \"delay\" or \"shed\"");
		return NULL;
	}
	if (!json_is_number(jfor) || !isfinite(for_s) || for_s <= 0 || for_s > MAX_DENY_S) {
		snprintf(err, errlen, "\"for_s\" must be a number of seconds in (0, %.0f]", MAX_DENY_S);
		return NULL;
	}
	until = fg_now_ns() + (uint64_t)(for_s * 1e9);
	if (fg_kernel_set_deny_from(st, t->id, until, verdict, FG_DENY_OPERATOR)) {
		snprintf(err, errlen, "writing the deny window of %s failed", t->name);
		return NULL;
	}
	fprintf(stderr, "fairgated: operator denies tenant %s (%s) for %.0f s\n", t->name, mode,
		for_s);
	return json_pack("{s:s, s:s, s:f, s:I}", "tenant", t->name, "verdict", mode, "for_s", for_s,
			 "until_ns", (json_int_t)until);
}

static json_t *cmd_tenant_allow(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	const struct fg_tenant *t = find_tenant(st, req, err, errlen);
	int was;

	if (!t)
		return NULL;
	was = fg_kernel_get_deny(st, t->id, NULL);
	if (fg_kernel_set_deny_from(st, t->id, 0, FG_VERDICT_ALLOW, FG_DENY_NONE)) {
		snprintf(err, errlen, "clearing the deny window of %s failed", t->name);
		return NULL;
	}
	fprintf(stderr, "fairgated: operator allows tenant %s (was %s)\n", t->name,
		fg_verdict_name(was));
	return json_pack("{s:s, s:s, s:s}", "tenant", t->name, "verdict", "allow", "was",
			 fg_verdict_name(was));
}

void fg_ctl_kernel_register(void)
{
	fg_ctl_register("tenant_deny", cmd_tenant_deny);
	fg_ctl_register("tenant_allow", cmd_tenant_allow);
}
