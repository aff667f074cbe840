/* policy_addr.c — host:port and CIDR parsing for the policy; see policy_addr.h. */
#include "policy_addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int fg_parse_hostport(const char *s, struct fg_hostport *out, char *why, size_t whylen)
{
	char host[FG_HOSTPORT_MAX];
	const char *port;
	unsigned char addr[16];
	int family;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':') {
			snprintf(why, whylen, "expected [IPV6]:PORT");
			return -1;
		}
		size_t n = (size_t)(end - s - 1);
		if (n >= sizeof(host)) {
			snprintf(why, whylen, "address is too long");
			return -1;
		}
		memcpy(host, s + 1, n);
		host[n] = '\0';
		port = end + 2;
		family = AF_INET6;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon) {
			snprintf(why, whylen, "expected HOST:PORT, e.g. 127.0.0.1:8001 or [::1]:8001");
			return -1;
		}
		size_t n = (size_t)(colon - s);
		if (memchr(s, ':', n)) {
			snprintf(why, whylen, "an IPv6 address needs brackets: [ADDR]:PORT");
			return -1;
		}
		if (n == 0) {
			snprintf(why, whylen, "missing address (write 0.0.0.0:PORT or [::]:PORT for all)");
			return -1;
		}
		if (n >= sizeof(host)) {
			snprintf(why, whylen, "address is too long");
			return -1;
		}
		memcpy(host, s, n);
		host[n] = '\0';
		port = colon + 1;
		family = AF_INET;
	}
	if (inet_pton(family, host, addr) != 1) {
		snprintf(why, whylen, family == AF_INET
			 ? "'%.40s' is not a numeric IPv4 address (names are not resolved)"
			 : "'%.40s' is not a numeric IPv6 address", host);
		return -1;
	}
	if (parse_port(port, &out->port)) {
		snprintf(why, whylen, "port must be a number from 1 to 65535");
		return -1;
	}
	memcpy(out->host, host, strlen(host) + 1);
	return 0;
}

static void mask_to(uint8_t *dst, const uint8_t *src, unsigned bytes, unsigned prefixlen)
{
	for (unsigned i = 0; i < bytes; i++) {
		unsigned bits = prefixlen > i * 8 ? prefixlen - i * 8 : 0;
		uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
		dst[i] = src[i] & m;
	}
}

int fg_parse_cidr(const char *s, struct fg_cidr *out, char *why, size_t whylen)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned maxlen, prefixlen;

	if (n == 0 || n >= sizeof(host)) {
		snprintf(why, whylen, "expected ADDR/LEN, e.g. 10.1.0.0/16 or fd00::/48");
		return -1;
	}
	memcpy(host, s, n);
	host[n] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, out->addr) == 1) {
		out->family = AF_INET;
		maxlen = 32;
	} else if (inet_pton(AF_INET6, host, out->addr) == 1) {
		out->family = AF_INET6;
		maxlen = 128;
	} else {
		snprintf(why, whylen, "'%.46s' is not a numeric IPv4 or IPv6 address", host);
		return -1;
	}
	prefixlen = maxlen;
	if (slash) {
		const char *p = slash + 1;
		size_t digits = strspn(p, "0123456789");
		if (digits == 0 || digits > 3 || p[digits] != '\0' ||
		    (prefixlen = (unsigned)atoi(p)) > maxlen) {
			snprintf(why, whylen, "prefix length must be a number from 0 to %u", maxlen);
			return -1;
		}
	}
	out->prefixlen = (uint8_t)prefixlen;

	uint8_t net[16] = { 0 };
	unsigned bytes = maxlen / 8;
	mask_to(net, out->addr, bytes, prefixlen);
	if (memcmp(net, out->addr, bytes)) {
		struct fg_cidr fixed = *out;
		char text[FG_CIDR_STRLEN];
		memcpy(fixed.addr, net, bytes);
		fg_cidr_format(&fixed, text, sizeof(text));
		snprintf(why, whylen, "host bits are set; did you mean %s?", text);
		return -1;
	}
	return 0;
}

bool fg_cidr_contains(const struct fg_cidr *outer, const struct fg_cidr *inner)
{
	uint8_t a[16], b[16];
	unsigned bytes = outer->family == AF_INET ? 4 : 16;

	if (outer->family != inner->family || outer->prefixlen > inner->prefixlen)
		return false;
	mask_to(a, outer->addr, bytes, outer->prefixlen);
	mask_to(b, inner->addr, bytes, outer->prefixlen);
	return !memcmp(a, b, bytes);
}

bool fg_cidr_overlap(const struct fg_cidr *a, const struct fg_cidr *b)
{
	return fg_cidr_contains(a, b) || fg_cidr_contains(b, a);
}

char *fg_hostport_format(const struct fg_hostport *hp, char *buf, size_t len)
{
	bool v6 = strchr(hp->host, ':') != NULL;

	snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", hp->host, v6 ? "]" : "", hp->port);
	return buf;
}

void fg_cidr_format(const struct fg_cidr *c, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (!inet_ntop(c->family, c->addr, host, sizeof(host)))
		snprintf(host, sizeof(host), "?");
	snprintf(buf, len, "%s/%u", host, c->prefixlen);
}

int fg_sockaddr_numeric(const char *host, uint16_t port, struct sockaddr_storage *ss,
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
