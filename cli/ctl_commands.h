/* ctl_commands.h — fairgatectl subcommands, one file each (ctl_*.c).
 * Each takes argc/argv after the subcommand words and returns the exit
 * status: 0 ok, 1 runtime failure, 2 bad input (usage, invalid policy). */
#ifndef FAIRGATE_CTL_COMMANDS_H
#define FAIRGATE_CTL_COMMANDS_H

int fg_cmd_plan(int argc, char **argv);          /* ctl_plan.c */
int fg_cmd_policy_check(int argc, char **argv);  /* ctl_policy.c */
int fg_cmd_policy_apply(int argc, char **argv);  /* ctl_policy_apply.c */
int fg_cmd_tenant_list(int argc, char **argv);   /* ctl_tenant.c */
int fg_cmd_tenant_show(int argc, char **argv);   /* ctl_tenant.c */
int fg_cmd_tenant_deny(int argc, char **argv);   /* ctl_tenant.c */
int fg_cmd_tenant_allow(int argc, char **argv);  /* ctl_tenant.c */
int fg_cmd_status(int argc, char **argv);        /* ctl_status.c */
int fg_cmd_health(int argc, char **argv);        /* ctl_health.c */
int fg_cmd_fleet(int argc, char **argv);         /* ctl_fleet.c */

#endif
