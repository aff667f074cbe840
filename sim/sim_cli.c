/* sim_cli.c — command-line addresses and limits; see sim_cli.h. */
#include "sim_cli.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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

int sim_cli_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *ss,
		     socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
		*len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		*len = sizeof(*in6);
		return 0;
	}
	return -1;
}

void sim_cli_raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}
