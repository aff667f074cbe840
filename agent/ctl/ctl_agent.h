/* ctl_agent.h — the control socket's view of the agent itself:
 *   health   {"proxy": bool, "listen_port": N, "listen_family": 4|6,
 *            "listen_address", "mode", "kernel_enforcement", "steering"}:
 *            answered on the event loop, so an answer means the loop runs
 *            (liveness), and it names where the proxy accepts (readiness,
 *            fairgatectl health --ready).
 * and the pieces of `status` about gate's interfaces, the policy watch and
 * why kernel enforcement is off. */
#ifndef FAIRGATE_CTL_AGENT_H
#define FAIRGATE_CTL_AGENT_H

#include <jansson.h>
#include "agent/agent.h"

/* status's "gate": {"auto", "interfaces": [{"name", "attached", "mode" |
 * "error"}], "note"} */
json_t *fg_ctl_gate_json(const struct fg_agent_state *st);
/* status's "policy_watch": {"on", "files", "applied", "refused",
 * "last_change_age_s", "last_ok", "last_result"} */
json_t *fg_ctl_watch_json(const struct fg_agent_state *st);

#endif
