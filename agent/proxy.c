/* proxy.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
#include "agent/proxy.h"
int fg_proxy_start(struct fg_agent_state *st, char *err, size_t errlen) { (void)st; snprintf(err, errlen, "the proxy is not built yet"); return -1; }
int fg_proxy_apply_policy(struct fg_agent_state *st, const struct fg_policy *p) { (void)st; (void)p; return 0; }
void fg_proxy_stop(struct fg_agent_state *st) { (void)st; }
