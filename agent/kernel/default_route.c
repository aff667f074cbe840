/* default_route.c — which interfaces carry this network namespace's default
 * routes; see default_route.h. /proc/net/route and /proc/net/ipv6_route
 * show the routes of the namespace the reading process lives in (a
 * hostNetwork pod: the node's), main table only; policy routing that sends
 * client traffic elsewhere needs an explicit `agent.interfaces` list. */
#include "agent/kernel/default_route.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTF_UP_ 0x0001u
#define RTF_REJECT_ 0x0200u

struct pick {
	bool found;
	unsigned long metric;
	char ifname[FG_IFNAME_MAX];
};

static void consider(struct pick *p, const char *ifname, unsigned long metric)
{
	if (!strcmp(ifname, "lo") || strlen(ifname) >= FG_IFNAME_MAX)
		return;
	if (p->found && metric >= p->metric)
		return;
	p->found = true;
	p->metric = metric;
	snprintf(p->ifname, sizeof(p->ifname), "%s", ifname);
}

/* Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT,
 * addresses in hex; a default route has destination and mask 0. */
static int read_ipv4(struct pick *p)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[512], ifname[64];
	unsigned long dst, gw, flags, refcnt, use, metric, mask;

	if (!f)
		return errno == ENOENT ? 0 : -1;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lx %lx %lx %lu %lu %lu %lx", ifname, &dst, &gw, &flags,
			   &refcnt, &use, &metric, &mask) == 8 &&
		    dst == 0 && mask == 0 && (flags & RTF_UP_) && !(flags & RTF_REJECT_))
			consider(p, ifname, metric);
	fclose(f);
	return 0;
}

/* dst dst_len src src_len next_hop metric refcnt use flags iface, hex; the
 * kernel's own unreachable default on lo is a reject route. */
static int read_ipv6(struct pick *p)
{
	FILE *f = fopen("/proc/net/ipv6_route", "re");
	char line[512], dst[40], src[40], hop[40], ifname[64];
	unsigned int dst_len, src_len;
	unsigned long metric, refcnt, use, flags;

	if (!f)
		return errno == ENOENT ? 0 : -1; /* no IPv6 in this kernel */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%39s %x %39s %x %39s %lx %lx %lx %lx %63s", dst, &dst_len, src,
			   &src_len, hop, &metric, &refcnt, &use, &flags, ifname) == 10 &&
		    dst_len == 0 && strspn(dst, "0") == 32 && (flags & RTF_UP_) &&
		    !(flags & RTF_REJECT_))
			consider(p, ifname, metric);
	fclose(f);
	return 0;
}

int fg_default_route_ifaces(char names[][FG_IFNAME_MAX], int max, char *err, size_t errlen)
{
	struct pick v4 = { 0 }, v6 = { 0 };
	int n = 0;

	if (read_ipv4(&v4) || read_ipv6(&v6)) {
		snprintf(err, errlen, "reading this network namespace's routes: %s", strerror(errno));
		return -1;
	}
	if (v4.found && n < max)
		snprintf(names[n++], FG_IFNAME_MAX, "%s", v4.ifname);
	if (v6.found && n < max && !(v4.found && !strcmp(v4.ifname, v6.ifname)))
		snprintf(names[n++], FG_IFNAME_MAX, "%s", v6.ifname);
	if (!n)
		snprintf(err, errlen, "this network namespace has no default route");
	return n;
}
