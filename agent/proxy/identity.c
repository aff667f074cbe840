/* identity.c — SHA-256 of API keys (OpenSSL EVP), Bearer parsing and
 * trusted-proxy matching; see identity.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>
#include "agent/proxy/identity.h"

/* once per thread: fetching the algorithm and a context for every request
 * cost more than hashing the key */
static __thread EVP_MD *md;
static __thread EVP_MD_CTX *ctx;

int fg_sha256(const void *data, size_t len, uint8_t out[32])
{
	unsigned int n = 0;

	if (!md && !(md = EVP_MD_fetch(NULL, "SHA256", NULL)))
		return -1;
	if (!ctx && !(ctx = EVP_MD_CTX_new()))
		return -1;
	if (!EVP_DigestInit_ex2(ctx, md, NULL) || !EVP_DigestUpdate(ctx, data, len) ||
	    !EVP_DigestFinal_ex(ctx, out, &n) || n != 32)
		return -1;
	return 0;
}

void fg_sha256_thread_end(void)
{
	EVP_MD_CTX_free(ctx);
	EVP_MD_free(md);
	ctx = NULL;
	md = NULL;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

const char *fg_bearer_token(const char *v, size_t len, size_t *token_len)
{
	while (len && blank(*v))
		v++, len--;
	while (len && blank(v[len - 1]))
		len--;
	if (len < 8 || strncasecmp(v, "bearer", 6) || !blank(v[6]))
		return NULL;
	v += 6, len -= 6;
	while (len && blank(*v))
		v++, len--;
	if (!len)
		return NULL;
	for (size_t i = 0; i < len; i++)
		if (blank(v[i]))
			return NULL; /* a token has no blanks inside */
	*token_len = len;
	return v;
}

/* The address as the policy stores it: family + network-order bytes, with
 * IPv4-mapped IPv6 unwrapped to IPv4. */
static bool addr_of(const struct sockaddr *sa, uint8_t *family, uint8_t addr[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(addr, 0, 16);
	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a6 = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (!memcmp(a6, mapped, 12)) {
			*family = AF_INET;
			memcpy(addr, a6 + 12, 4);
		} else {
			*family = AF_INET6;
			memcpy(addr, a6, 16);
		}
		return true;
	}
	return false;
}

bool fg_cidr_holds_peer(const struct fg_cidr *c, const struct sockaddr *sa)
{
	uint8_t family, addr[16];

	if (!addr_of(sa, &family, addr) || family != c->family)
		return false;
	unsigned bits = c->prefixlen, max = family == AF_INET ? 32 : 128;
	if (bits > max)
		return false;
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(addr, c->addr, whole))
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));
		if ((addr[whole] & mask) != (c->addr[whole] & mask))
			return false;
	}
	return true;
}

bool fg_source_trusted(const struct fg_agent *a, const struct sockaddr *sa)
{
	for (uint32_t i = 0; i < a->n_trusted_proxies && i < FG_MAX_TRUSTED; i++)
		if (fg_cidr_holds_peer(&a->trusted_proxies[i], sa))
			return true;
	return false;
}
