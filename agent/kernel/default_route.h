/* default_route.h — the interfaces the default routes of this network
 * namespace go out of: where `agent.interfaces: auto` attaches gate. */
#ifndef FAIRGATE_DEFAULT_ROUTE_H
#define FAIRGATE_DEFAULT_ROUTE_H

#include <stddef.h>
#include "policy/policy.h"

/* The interface of the IPv4 default route with the lowest metric, then
 * that of the IPv6 one if it is another, into names (at most max). Returns
 * how many (0: no default route, with a line in err saying so), or -1 with
 * err filled when the routes cannot be read. */
int fg_default_route_ifaces(char names[][FG_IFNAME_MAX], int max, char *err, size_t errlen);

#endif
