/* listen.h — listening TCP sockets and how a socket address reads, for
 * every listener of the agent (proxy, transparent mode, metrics). */
#ifndef FAIRGATE_LISTEN_H
#define FAIRGATE_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

#define FG_LISTEN_BACKLOG 4096

/* A non-blocking, close-on-exec listening socket bound to ss (SO_REUSEADDR);
 * -1 with err naming `what` and the address. */
int fg_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, char *err, size_t errlen,
		  const char *what);
/* "[::1]:40123" / "0.0.0.0:8000". */
void fg_sockaddr_desc(const struct sockaddr_storage *ss, char *buf, size_t len);
/* Where a socket is bound, the same way ("?:0" when it cannot be read). */
void fg_socket_desc(int fd, char *buf, size_t len);

#endif
