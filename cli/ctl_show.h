/* ctl_show.h — what fairgatectl's subcommands share when they ask the agent:
 * the call with its error said, reading fields of the JSON reply, and the
 * whole of a read-only `CMD [--json] [--ctl PATH]` view (one call, the reply
 * as JSON or printed). */
#ifndef FG_CLI_CTL_SHOW_H
#define FG_CLI_CTL_SHOW_H

#include <jansson.h>

/* k's number in o, 0 when absent */
double fg_show_num(const json_t *o, const char *k);
/* k's string in o, "?" when absent */
const char *fg_show_str(const json_t *o, const char *k);

/* Sends req (and drops it) to the agent at ctl (NULL: the default socket).
 * The reply when the agent said ok; else NULL, with the agent's error (or
 * `refused` when it gave none), or why there was no answer, on stderr. */
json_t *fg_show_ask(const char *ctl, json_t *req, const char *refused);

/* `fairgatectl CMD [--json] [--ctl PATH]`: asks the agent {"cmd": CMD} and
 * prints the reply with print_human, or as JSON with --json. Returns the
 * exit code: 0, 1 (no agent, or it said no), 2 (usage). */
int fg_show_command(int argc, char **argv, const char *cmd,
		    void (*print_human)(const json_t *reply));

#endif
