/* ctl_show.h — what fairgatectl's read-only views share: reading fields of
 * the agent's JSON reply, and the whole of a `CMD [--json] [--ctl PATH]`
 * subcommand (one call, its error said, the reply as JSON or printed). */
#ifndef FG_CLI_CTL_SHOW_H
#define FG_CLI_CTL_SHOW_H

#include <jansson.h>

/* k's number in o, 0 when absent */
double fg_show_num(const json_t *o, const char *k);
/* k's string in o, "?" when absent */
const char *fg_show_str(const json_t *o, const char *k);

/* `fairgatectl CMD [--json] [--ctl PATH]`: asks the agent {"cmd": CMD} and
 * prints the reply with print_human, or as JSON with --json. Returns the
 * exit code: 0, 1 (no agent, or it said no), 2 (usage). */
int fg_show_command(int argc, char **argv, const char *cmd,
		    void (*print_human)(const json_t *reply));

#endif
