/* fairgatectl.c — the operator CLI: dispatch to one subcommand per file.
 * Every command accepts --json. Reading commands (tenant list/show) read the
 * pinned maps directly so they work while fairgated is down; changing
 * commands go through the control socket. */
#include <stdio.h>
#include <string.h>
#include "cli/ctl_commands.h"

struct command {
	const char *w1, *w2;
	int (*fn)(int, char **);
	const char *usage;
};

static const struct command commands[] = {
	{ "plan", NULL, fg_cmd_plan,
	  "plan --policy FILE [--tenants FILE] [--json] [--in I --out O [--n N] [--prompts K] [--cached C]] [--rps R] [--context N] [--calibrated [--ctl PATH]]" },
	{ "policy", "check", fg_cmd_policy_check, "policy check FILE [--tenants FILE] [--json]" },
	{ "policy", "apply", fg_cmd_policy_apply, "policy apply FILE [--tenants FILE] [--json]" },
	{ "tenant", "list", fg_cmd_tenant_list, "tenant list [--json]" },
	{ "tenant", "show", fg_cmd_tenant_show, "tenant show NAME [--json]" },
	{ "tenant", "deny", fg_cmd_tenant_deny,
	  "tenant deny NAME --mode delay|shed --for DURATION [--json]" },
	{ "tenant", "allow", fg_cmd_tenant_allow, "tenant allow NAME [--json]" },
	{ "status", NULL, fg_cmd_status, "status [--json]" },
	{ "health", NULL, fg_cmd_health, "health [--ready] [--timeout SECONDS] [--json]" },
	{ "fleet", NULL, fg_cmd_fleet, "fleet [--json]" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: fairgatectl COMMAND ...\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  fairgatectl %s\n", commands[i].usage);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];
		if (strcmp(argv[1], c->w1))
			continue;
		if (!c->w2)
			return c->fn(argc - 2, argv + 2);
		if (argc >= 3 && !strcmp(argv[2], c->w2))
			return c->fn(argc - 3, argv + 3);
	}
	fprintf(stderr, "fairgatectl: unknown command '%s%s%s'\n", argv[1],
		argc >= 3 ? " " : "", argc >= 3 ? argv[2] : "");
	usage(stderr);
	return 2;
}
