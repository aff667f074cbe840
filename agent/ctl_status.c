/* ctl_status.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
#include "agent/ctl_commands.h"
int fg_cmd_status(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "fairgatectl: status is not built yet\n"); return 1; }
