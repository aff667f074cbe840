/* kernel.h — fairgated's side of the BPF datapath: pinned maps, the XDP
 * `gate` and sk_lookup `steer` programs, and publishing tenant state.
 * Owned by the datapath; the proxy only calls the publish functions. */
#ifndef FAIRGATE_KERNEL_H
#define FAIRGATE_KERNEL_H

#include <stddef.h>
#include "agent/agent.h"

/* Mount bpffs if needed, create or reuse the pins, fill tenants and static
 * sources from st->policy, attach programs. On failure returns -1 with one
 * human line in err (which capability or kernel feature is missing). */
int fg_kernel_open(struct fg_agent_state *st, char *err, size_t errlen);
/* Re-fill tenant names/tiers/sources after a policy reload. */
int fg_kernel_apply_policy(struct fg_agent_state *st, const struct fg_policy *p);
/* Detach programs; unpin maps only with opts.cleanup. */
void fg_kernel_close(struct fg_agent_state *st);

#endif
