/* ctl_server.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
#include "agent/ctl_server.h"
int fg_ctl_register(const char *cmd, fg_ctl_handler handler) { (void)cmd; (void)handler; return 0; }
int fg_ctl_server_start(struct fg_agent_state *st, char *err, size_t errlen) { (void)st; (void)err; (void)errlen; return 0; }
void fg_ctl_server_stop(struct fg_agent_state *st) { (void)st; }
json_t *fg_ctl_call(const char *p, json_t *req, char *err, size_t errlen) { (void)p; (void)req; snprintf(err, errlen, "control socket not built yet"); return NULL; }
