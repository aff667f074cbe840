/* sim_cli.c — command-line addresses and limits; see sim_cli.h. */
#include "sim_cli.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "policy/policy_addr.h"

int sim_cli_parse_addr(const char *arg, bool allow_port0, struct fg_hostport *out, char *why,
		       size_t whylen)
{
	size_t n = strlen(arg);

	/* the policy never names port 0; a simulator may ask for any free port */
	if (allow_port0 && n >= 2 && n < FG_HOSTPORT_MAX + 3 && !strcmp(arg + n - 2, ":0")) {
		char one[FG_HOSTPORT_MAX + 3];
		memcpy(one, arg, n + 1);
		one[n - 1] = '1';
		if (fg_parse_hostport(one, out, why, whylen))
			return -1;
		out->port = 0;
		return 0;
	}
	return fg_parse_hostport(arg, out, why, whylen);
}

void sim_cli_raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}
