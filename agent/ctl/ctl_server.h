/* ctl_server.h — the control socket (/run/fairgate/ctl.sock, 0600).
 * The protocol is lib/ctl_protocol.h's; fairgated.c registers every
 * command by name before the server starts. */
#ifndef FAIRGATE_CTL_SERVER_H
#define FAIRGATE_CTL_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include "agent/agent.h"

/* Returns a new reply object (the server adds "ok": true), or NULL with
 * err filled (sent as {"ok": false, "error": err}). */
typedef json_t *(*fg_ctl_handler)(struct fg_agent_state *st, json_t *req, char *err,
				  size_t errlen);

int fg_ctl_register(const char *cmd, fg_ctl_handler handler);
int fg_ctl_server_start(struct fg_agent_state *st, char *err, size_t errlen);
void fg_ctl_server_stop(struct fg_agent_state *st);

#endif
