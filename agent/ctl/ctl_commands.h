/* ctl_commands.h — every control-socket command fairgated serves, one
 * registration per file of agent/ctl/. fairgated.c calls them all, once,
 * before the server starts, so no room below registers itself.
 *   ctl_agent.c   health
 *   ctl_proxy.c   status        agent summary + every tenant's quota state
 *                 tenants       [name]: tenant quota state (bucket, reserved,
 *                               in-flight, admitted/rejected/settled,
 *                               outcomes, deny window)
 *                 policy_apply  {"policy": TEXT, "file": NAME[, "tenants":
 *                               TEXT, "tenants_file": NAME]}: parse, check,
 *                               then swap atomically (agent/policy_apply.c);
 *                               a bad file changes nothing
 *   ctl_kernel.c  tenant_deny, tenant_allow
 *   ctl_fleet.c   fleet */
#ifndef FAIRGATE_AGENT_CTL_COMMANDS_H
#define FAIRGATE_AGENT_CTL_COMMANDS_H

void fg_ctl_agent_register(void);
void fg_ctl_proxy_register(void);
void fg_ctl_kernel_register(void);
void fg_ctl_fleet_register(void);

#endif
