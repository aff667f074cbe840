/* ctl_tenant.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
#include "agent/ctl_commands.h"
static int nyi(void) { fprintf(stderr, "fairgatectl: tenant commands are not built yet\n"); return 1; }
int fg_cmd_tenant_list(int argc, char **argv) { (void)argc; (void)argv; return nyi(); }
int fg_cmd_tenant_show(int argc, char **argv) { (void)argc; (void)argv; return nyi(); }
int fg_cmd_tenant_deny(int argc, char **argv) { (void)argc; (void)argv; return nyi(); }
int fg_cmd_tenant_allow(int argc, char **argv) { (void)argc; (void)argv; return nyi(); }
