/* conn_limits.h — client connections counted in all and per source address
 * (agent.limits.max_connections, max_connections_per_source), so that one
 * address, or all of them together, cannot take the fds the agent needs to
 * serve anybody else. Memory grows with the number of distinct sources
 * connected, not with the caps. */
#ifndef FAIRGATE_CONN_LIMITS_H
#define FAIRGATE_CONN_LIMITS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define FG_CONN_SOURCE_BUCKETS 4096

struct fg_conn_source;

struct fg_conn_limits {
	struct fg_conn_source *bucket[FG_CONN_SOURCE_BUCKETS];
	uint32_t n_sources;
	uint64_t refused_total, refused_per_source; /* for /metrics */
};

enum fg_conn_verdict {
	FG_CONN_OK = 0,
	FG_CONN_OVER_TOTAL,      /* max_connections */
	FG_CONN_OVER_SOURCE,     /* max_connections_per_source */
	FG_CONN_NO_MEMORY,
};

/* Count a new connection from PEER against the caps (N_OPEN connections are
 * open now; EXEMPT: a trusted proxy's address, which carries many clients
 * and is held to the total only). On FG_CONN_OK *SOURCE is what to give
 * fg_conn_release when it closes (NULL when nothing was counted per source). */
enum fg_conn_verdict fg_conn_admit(struct fg_conn_limits *cl, const struct sockaddr_storage *peer,
				   uint32_t n_open, uint32_t max_total, uint32_t max_per_source,
				   bool exempt, struct fg_conn_source **source);
void fg_conn_release(struct fg_conn_limits *cl, struct fg_conn_source *source);
void fg_conn_limits_free(struct fg_conn_limits *cl);

/* agent.limits.max_connections when the policy leaves it out: half the fds
 * left after the agent's own (listeners, maps, control socket, epoll),
 * since every client may hold an engine connection too. */
#define FG_CONN_FD_RESERVE 64
uint32_t fg_conn_default_max(void);

#endif
