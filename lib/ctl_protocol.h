/* ctl_protocol.h — the control socket's protocol, shared by fairgated's
 * server (agent/ctl/ctl_server.c) and fairgatectl (cli/): one JSON object
 * per line each way. Request {"cmd": "...", ...}; reply {"ok": true, ...}
 * or {"ok": false, "error": "..."}. */
#ifndef FAIRGATE_CTL_PROTOCOL_H
#define FAIRGATE_CTL_PROTOCOL_H

#include <jansson.h>
#include <stddef.h>

#define FG_CTL_SOCK_PATH "/run/fairgate/ctl.sock"
/* A line larger than this is refused. The largest is `policy apply`'s: a
 * policy and a tenants file of up to the parser's 16 MiB each
 * (FG_YAML_MAX_BYTES), JSON-escaped at most 2 bytes a byte (YAML allows no
 * control byte but tab, CR and LF); cli/ctl_policy_apply.c asserts it fits.
 * A bound, not a buffer: lines are read into memory as they grow. */
#define FG_CTL_MAX_LINE (72u << 20)

/* Send req, wait for the reply line.
 * Returns the parsed reply or NULL with err filled. */
json_t *fg_ctl_call(const char *sock_path, json_t *req, char *err, size_t errlen);
/* The same, giving up after timeout_ms (fg_ctl_call waits 10 s). */
json_t *fg_ctl_call_within(const char *sock_path, json_t *req, unsigned timeout_ms, char *err,
			   size_t errlen);
/* The socket a fairgatectl command talks to: its --ctl, else a non-empty
 * FAIRGATE_CTL, else FG_CTL_SOCK_PATH. */
const char *fg_ctl_path(const char *flag);

#endif
