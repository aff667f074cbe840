/* conn_limits.c — connections per source and in all; see conn_limits.h. */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "agent/proxy/conn_limits.h"

struct fg_conn_source {
	struct fg_conn_source *next;
	uint8_t family;
	uint8_t addr[16];
	uint32_t count;
};

/* IPv4-mapped IPv6 counts as the IPv4 address it is (dual-stack listeners) */
static void key_of(const struct sockaddr_storage *ss, uint8_t *family, uint8_t addr[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(addr, 0, 16);
	*family = (uint8_t)ss->ss_family;
	if (ss->ss_family == AF_INET) {
		memcpy(addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const uint8_t *a6 = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		if (!memcmp(a6, mapped, 12)) {
			*family = AF_INET;
			memcpy(addr, a6 + 12, 4);
		} else {
			memcpy(addr, a6, 16);
		}
	}
}

static uint32_t bucket_of(uint8_t family, const uint8_t addr[16])
{
	uint32_t h = 2166136261u ^ family; /* FNV-1a */
	for (int i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 16777619u;
	return h % FG_CONN_SOURCE_BUCKETS;
}

enum fg_conn_verdict fg_conn_admit(struct fg_conn_limits *cl, const struct sockaddr_storage *peer,
				   uint32_t n_open, uint32_t max_total, uint32_t max_per_source,
				   bool exempt, struct fg_conn_source **source)
{
	uint8_t family, addr[16];

	*source = NULL;
	if (max_total && n_open >= max_total) {
		cl->refused_total++;
		return FG_CONN_OVER_TOTAL;
	}
	if (exempt || !max_per_source)
		return FG_CONN_OK;
	key_of(peer, &family, addr);
	uint32_t b = bucket_of(family, addr);
	struct fg_conn_source *s = cl->bucket[b];
	while (s && (s->family != family || memcmp(s->addr, addr, 16)))
		s = s->next;
	if (s && s->count >= max_per_source) {
		cl->refused_per_source++;
		return FG_CONN_OVER_SOURCE;
	}
	if (!s) {
		if (!(s = calloc(1, sizeof(*s))))
			return FG_CONN_NO_MEMORY;
		s->family = family;
		memcpy(s->addr, addr, 16);
		s->next = cl->bucket[b];
		cl->bucket[b] = s;
		cl->n_sources++;
	}
	s->count++;
	*source = s;
	return FG_CONN_OK;
}

void fg_conn_release(struct fg_conn_limits *cl, struct fg_conn_source *source)
{
	if (!source || --source->count)
		return;
	struct fg_conn_source **p = &cl->bucket[bucket_of(source->family, source->addr)];
	while (*p != source)
		p = &(*p)->next;
	*p = source->next;
	cl->n_sources--;
	free(source);
}

void fg_conn_limits_free(struct fg_conn_limits *cl)
{
	for (uint32_t b = 0; b < FG_CONN_SOURCE_BUCKETS; b++)
		while (cl->bucket[b]) {
			struct fg_conn_source *s = cl->bucket[b];
			cl->bucket[b] = s->next;
			free(s);
		}
	cl->n_sources = 0;
}

uint32_t fg_conn_default_max(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 1u << 20;
	if (rl.rlim_cur <= 2 * FG_CONN_FD_RESERVE)
		return 16; /* a tiny limit: leave the agent something to work with */
	uint64_t n = (rl.rlim_cur - FG_CONN_FD_RESERVE) / 2;
	return n > (1u << 24) ? (1u << 24) : (uint32_t)n;
}
