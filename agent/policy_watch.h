/* policy_watch.h — fairgated re-applies its policy files when they change
 * (an edited ConfigMap or Secret takes effect without `kubectl exec`),
 * through the same all-or-nothing transaction as `fairgatectl policy
 * apply` (policy_apply.h). */
#ifndef FAIRGATE_POLICY_WATCH_H
#define FAIRGATE_POLICY_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "agent/agent.h"

/* Quiet time after the last change before the files are read: a ConfigMap
 * update is a burst of creates, a rename and deletes. */
#define FG_WATCH_SETTLE_NS (200ull * 1000000ull)

/* Watch the directories of st->opts.policy_path and tenants_path. text /
 * tenants_text are what the running policy was parsed from (copied), so
 * only a different text is applied. -1 with err if inotify fails. */
int fg_policy_watch_start(struct fg_agent_state *st, const char *text, const char *tenants_text,
			  char *err, size_t errlen);
void fg_policy_watch_stop(struct fg_agent_state *st);

struct fg_policy_watch_status {
	bool on;
	uint64_t applied;         /* changes applied since start */
	uint64_t refused;         /* changes refused (bad file, needs a restart...) */
	double last_change_age_s; /* since the last change was tried; -1: none yet */
	bool last_ok;
	char last_result[600];    /* the last change's outcome, one line */
};
void fg_policy_watch_get(const struct fg_agent_state *st, struct fg_policy_watch_status *out);

#endif
