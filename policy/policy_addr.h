/* policy_addr.h — numeric "host:port" and CIDR strings, parsed and checked.
 *
 * Policy addresses are numeric on purpose: the agent must not depend on DNS
 * to start, and the kernel maps key on addresses. IPv6 is written
 * "[::1]:8000" (brackets stripped in fg_hostport.host) and CIDRs may not have
 * host bits set (10.1.2.3/16 is an error that names 10.1.0.0/16), because a
 * silently normalised range is a range the operator did not write.
 */
#ifndef FAIRGATE_POLICY_ADDR_H
#define FAIRGATE_POLICY_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "policy.h"

#define FG_CIDR_STRLEN 50  /* "ffff:...:ffff/128" + NUL */

/* 0, or -1 with a reason in why (no position; the caller adds it). */
int fg_parse_hostport(const char *s, struct fg_hostport *out, char *why, size_t whylen);
/* "ADDR/LEN" or a bare address (a host: /32 or /128). */
int fg_parse_cidr(const char *s, struct fg_cidr *out, char *why, size_t whylen);

bool fg_cidr_contains(const struct fg_cidr *outer, const struct fg_cidr *inner);
/* Either contains the other (prefixes overlap iff one contains the other). */
bool fg_cidr_overlap(const struct fg_cidr *a, const struct fg_cidr *b);
void fg_cidr_format(const struct fg_cidr *c, char *buf, size_t len);
/* "127.0.0.1:8000" / "[::1]:8000", the way fg_parse_hostport reads it;
 * returns buf. */
char *fg_hostport_format(const struct fg_hostport *hp, char *buf, size_t len);

/* A numeric IPv4/IPv6 host (no brackets) and a port as a sockaddr; -1 if the
 * host is not numeric. The one conversion the agent, the simulator and the
 * load generator share. */
int fg_sockaddr_numeric(const char *host, uint16_t port, struct sockaddr_storage *ss,
			socklen_t *len);
static inline int fg_hostport_sockaddr(const struct fg_hostport *hp, struct sockaddr_storage *ss,
				       socklen_t *len)
{
	return fg_sockaddr_numeric(hp->host, hp->port, ss, len);
}

#endif
