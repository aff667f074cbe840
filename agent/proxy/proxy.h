/* proxy.h — the admission proxy inside fairgated: HTTP/1.1 in, priced,
 * admitted or refused, forwarded to the engine, settled from usage. */
#ifndef FAIRGATE_PROXY_H
#define FAIRGATE_PROXY_H

#include <stddef.h>
#include "agent/agent.h"

int fg_proxy_start(struct fg_agent_state *st, char *err, size_t errlen);
/* Swap in a new policy (already validated); keeps bucket levels of tenants
 * that survive and reads agent.engine_api_key_file again. -1 with ERR set
 * (and nothing changed) when the key file or memory fails. */
int fg_proxy_apply_policy(struct fg_agent_state *st, const struct fg_policy *p, char *err,
			  size_t errlen);
void fg_proxy_stop(struct fg_agent_state *st);
/* Publish every tenant's quota state to the kernel (after a reload). */
void fg_proxy_publish_all(struct fg_agent_state *st);

#endif
