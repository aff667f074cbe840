/* listen.h — listening TCP sockets and how a socket address reads, for
 * every listener of the agent (proxy, transparent mode, metrics). */
#ifndef FAIRGATE_LISTEN_H
#define FAIRGATE_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define FG_LISTEN_BACKLOG 4096

/* A non-blocking, close-on-exec listening socket bound to ss (SO_REUSEADDR,
 * and SO_REUSEPORT when `reuseport`: the first of a group the kernel
 * spreads connections over); -1 with err naming `what` and the address. */
int fg_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, bool reuseport, char *err,
		  size_t errlen, const char *what);
/* Another listener in the SO_REUSEPORT group of the listener fd (bound
 * where fd is, its port too when fd took an ephemeral one, and dual-stack
 * when fd is); -1 with err. */
int fg_listen_tcp_sibling(int fd, char *err, size_t errlen, const char *what);
/* "[::1]:40123" / "0.0.0.0:8000". */
void fg_sockaddr_desc(const struct sockaddr_storage *ss, char *buf, size_t len);
/* Where a socket is bound, the same way ("?:0" when it cannot be read). */
void fg_socket_desc(int fd, char *buf, size_t len);

#endif
