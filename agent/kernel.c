/* kernel.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
#include "agent/kernel.h"
int fg_kernel_open(struct fg_agent_state *st, char *err, size_t errlen)
{ (void)st; snprintf(err, errlen, "the BPF datapath is not built yet"); return -1; }
int fg_kernel_apply_policy(struct fg_agent_state *st, const struct fg_policy *p) { (void)st; (void)p; return 0; }
void fg_kernel_close(struct fg_agent_state *st) { (void)st; }
