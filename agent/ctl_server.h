/* ctl_server.h — the control socket (/run/fairgate/ctl.sock, 0600).
 * Protocol: one JSON object per line each way. Request {"cmd": "...", ...};
 * reply {"ok": true, ...} or {"ok": false, "error": "..."}. Modules register
 * their commands by name. */
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

/* Client side, for fairgatectl: send req, wait for the reply line.
 * Returns the parsed reply or NULL with err filled. */
json_t *fg_ctl_call(const char *sock_path, json_t *req, char *err, size_t errlen);
/* The same, giving up after timeout_ms (fg_ctl_call waits 10 s). */
json_t *fg_ctl_call_within(const char *sock_path, json_t *req, unsigned timeout_ms, char *err,
			   size_t errlen);
/* The socket a fairgatectl command talks to: its --ctl, else a non-empty
 * FAIRGATE_CTL, else FG_CTL_SOCK_PATH. */
const char *fg_ctl_path(const char *flag);

#endif
