/* ctl_proxy.h — the proxy's control-socket commands:
 *   status        agent summary + every tenant's quota state
 *   tenants       [name]: tenant quota state (bucket, reserved, in-flight,
 *                 admitted/rejected/settled, outcomes, deny window)
 *   policy_apply  {"policy": TEXT, "file": NAME[, "tenants": TEXT,
 *                 "tenants_file": NAME]}: parse, check, then swap atomically
 *                 (policy_apply.c); a bad file changes nothing. */
#ifndef FAIRGATE_CTL_PROXY_H
#define FAIRGATE_CTL_PROXY_H

void fg_ctl_proxy_register(void);

#endif
