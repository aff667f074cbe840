/* proxy_transparent.c — the listening socket of transparent mode. The
 * engine keeps the protected port; the sk_lookup program `steer` hands new
 * connections to that port to this socket, wherever it is bound.
 *
 * Without agent.listen the agent picks an ephemeral port on [::] with
 * IPV6_V6ONLY off: steer can hand a socket only connections of a family it
 * takes, and a socket bound to ::1 is IPv6-only, so the wildcard is the one
 * socket that takes both. steer then refuses connections to that port that
 * were not made on this node (fg_kernel_steer_private_port), so clients
 * cannot reach the agent around steer and gate. Accepted IPv4 peers appear
 * as ::ffff:a.b.c.d, which identity and the kernel maps read as IPv4. On a
 * host without IPv6 it is 127.0.0.1 instead. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/kernel/kernel.h"
#include "agent/proxy/proxy_internal.h"

/* An ephemeral port on [::] (dual-stack) or, failing that, 127.0.0.1. */
static int listen_ephemeral(int family, bool reuseport)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len = sizeof(struct sockaddr_in);
	int off = 0, one = 1, fd;

	if (family == AF_INET6) {
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_any;
		len = sizeof(struct sockaddr_in6);
	} else {
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if ((family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off))) ||
	    (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, FG_LISTEN_BACKLOG)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static uint16_t bound_port(int fd, int *family)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl))
		return 0;
	*family = ss.ss_family;
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					      : ((struct sockaddr_in *)&ss)->sin_port);
}

int fg_proxy_transparent_listen(struct fg_agent_state *st, bool reuseport, char *err,
				size_t errlen)
{
	const struct fg_agent *a = &st->policy->agent;
	bool chosen = a->listen.host[0] != '\0';
	char where[INET6_ADDRSTRLEN + 8];
	int fd;

	if (!fg_kernel_steering(st) && !chosen) {
		snprintf(err, errlen, "transparent mode needs the steer program (sk_lookup), and "
			 "kernel enforcement is off: nothing would reach the agent (see the lines "
			 "above; or set agent.listen to serve clients there directly)");
		return -1;
	}
	if (chosen) {
		fd = fg_proxy_listen(&a->listen, reuseport, err, errlen, "agent.listen");
	} else {
		fd = listen_ephemeral(AF_INET6, reuseport);
		if (fd < 0) /* a kernel or namespace without IPv6 */
			fd = listen_ephemeral(AF_INET, reuseport);
		if (fd < 0)
			snprintf(err, errlen, "transparent mode: cannot listen on an ephemeral port: %s",
				 strerror(errno));
	}
	if (fd < 0)
		return -1;
	fg_socket_desc(fd, where, sizeof(where));
	if (!fg_kernel_steering(st)) {
		fprintf(stderr, "fairgated: transparent mode without steer: nothing steers "
				"connections here; serving agent.listen %s only\n", where);
		return fd;
	}
	int family = AF_UNSPEC, v6only = 0;
	socklen_t ol = sizeof(v6only);
	uint16_t port = bound_port(fd, &family);
	if ((!chosen && family == AF_INET6 && fg_kernel_steer_private_port(st, port)) ||
	    fg_kernel_steer_listener(st, fd)) {
		snprintf(err, errlen, "transparent mode: steer could not take the listener %s: %s",
			 where, strerror(errno));
		close(fd);
		return -1;
	}
	if (family == AF_INET ||
	    (!getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol) && v6only))
		fprintf(stderr, "fairgated: the agent's socket %s takes one address family only: "
				"steer cannot hand it the other's connections, so they %s\n",
			where, a->steer_fail_open ? "reach the engine (fail-open)" :
						    "are refused (fail-closed)");
	fprintf(stderr, "fairgated: steer hands connections to the protected ports to %s%s\n",
		where, chosen ? "" : " (reachable only through steer and from this node)");
	return fd;
}
