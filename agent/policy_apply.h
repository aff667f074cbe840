/* policy_apply.h — the one way a new policy replaces the running one.
 *
 * `fairgatectl policy apply` (the control socket's policy_apply, in
 * ctl_proxy.c) and the watch on the policy files (policy_watch.c) both
 * parse with fg_agent_parse_policy and swap with fg_agent_apply_policy:
 * all or nothing, so a bad file, a change that takes a restart or a failed
 * step leaves the running policy untouched.
 */
#ifndef FAIRGATE_POLICY_APPLY_H
#define FAIRGATE_POLICY_APPLY_H

#include <jansson.h>
#include <stddef.h>
#include "agent/agent.h"

/* A policy from its text (and its tenants file's, when tenants_text is not
 * NULL), with this agent's command-line settings laid over it (the metrics
 * address): the same at start, on `policy apply` and on a file change.
 * Returns a new policy, or NULL with "FILE:LINE:COL: message" in err. */
struct fg_policy *fg_agent_parse_policy(const struct fg_agent_opts *o, const char *text,
					size_t len, const char *file, const char *tenants_text,
					size_t tenants_len, const char *tenants_file, char *err,
					size_t errlen);

/* Swap np in for st->policy (np is taken: kept or freed). Unchanged tenants
 * keep their bucket levels; no connection is dropped. Returns
 * {"file", "tenants", "added": [...], "removed": [...]}, or NULL with err
 * and nothing changed. */
json_t *fg_agent_apply_policy(struct fg_agent_state *st, struct fg_policy *np, const char *file,
			      char *err, size_t errlen);

#endif
