/* listen.c — listening TCP sockets; see listen.h. */
#include "lib/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int fg_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, bool reuseport, char *err,
		  size_t errlen, const char *what)
{
	int one = 1;
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		snprintf(err, errlen, "%s: socket: %s", what, strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
		snprintf(err, errlen, "%s: SO_REUSEPORT: %s", what, strerror(errno));
		close(fd);
		return -1;
	}
	if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, FG_LISTEN_BACKLOG)) {
		char where[INET6_ADDRSTRLEN + 8];

		fg_sockaddr_desc(ss, where, sizeof(where));
		snprintf(err, errlen, "%s: cannot listen on %s: %s", what, where, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int fg_listen_tcp_sibling(int fd, char *err, size_t errlen, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v6only = 0, one = 1;
	socklen_t ol = sizeof(v6only);

	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		snprintf(err, errlen, "%s: getsockname: %s", what, strerror(errno));
		return -1;
	}
	int s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(err, errlen, "%s: socket: %s", what, strerror(errno));
		return -1;
	}
	/* the same family coverage as fd: a dual-stack [::] stays dual-stack */
	if (ss.ss_family == AF_INET6 &&
	    (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol) ||
	     setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only))))
		goto fail;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(s, (const struct sockaddr *)&ss, len) || listen(s, FG_LISTEN_BACKLOG))
		goto fail;
	return s;
fail:;
	char where[INET6_ADDRSTRLEN + 8];
	fg_sockaddr_desc(&ss, where, sizeof(where));
	snprintf(err, errlen, "%s: cannot add a listener on %s to its SO_REUSEPORT group: %s", what,
		 where, strerror(errno));
	close(s);
	return -1;
}

void fg_sockaddr_desc(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
		return;
	}
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in4 = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in4->sin_port));
		return;
	}
	snprintf(buf, len, "?:0");
}

void fg_socket_desc(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl))
		ss.ss_family = AF_UNSPEC;
	fg_sockaddr_desc(&ss, buf, len);
}
