/* salt.c — node secret and per-tenant cache salts; see salt.h. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent/proxy/salt.h"

/* Domain separation: the same secret may one day key other things. */
static const char salt_namespace[] = "fairgate/cache_salt/v1:";

static int read_secret(const char *path, struct fg_salt_secret *out, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;

	if (fd < 0) {
		snprintf(err, errlen, "salt secret %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "salt secret %s: not a regular file", path);
		close(fd);
		return -1;
	}
	if (sb.st_mode & 077)
		fprintf(stderr, "fairgated: warning: salt secret %s is readable by others (mode %03o)\n",
			path, (unsigned)(sb.st_mode & 0777));
	ssize_t n = read(fd, out->bytes, sizeof(out->bytes));
	close(fd);
	if (n < FG_SECRET_MIN) {
		snprintf(err, errlen, "salt secret %s: needs at least %d bytes, has %zd", path,
			 FG_SECRET_MIN, n < 0 ? (ssize_t)0 : n);
		return -1;
	}
	out->len = (size_t)n;
	return 0;
}

static int create_default_secret(const char *path, char *err, size_t errlen)
{
	uint8_t key[32];
	char dir[256];

	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		if (mkdir(dir, 0700) && errno != EEXIST) {
			snprintf(err, errlen, "salt secret: mkdir %s: %s", dir, strerror(errno));
			return -1;
		}
	}
	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key)) {
		snprintf(err, errlen, "salt secret: getrandom: %s", strerror(errno));
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			return 0; /* another agent won the race: use its key */
		snprintf(err, errlen, "salt secret %s: %s", path, strerror(errno));
		return -1;
	}
	ssize_t w = write(fd, key, sizeof(key));
	if (w != (ssize_t)sizeof(key) || fsync(fd)) {
		snprintf(err, errlen, "salt secret %s: write: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	fprintf(stderr, "fairgated: generated a new cache-salt secret at %s\n", path);
	return 0;
}

int fg_salt_secret_load(const char *path, struct fg_salt_secret *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (path && *path)
		return read_secret(path, out, err, errlen);
	if (access(FG_SALT_DEFAULT_PATH, F_OK) && create_default_secret(FG_SALT_DEFAULT_PATH, err, errlen))
		return -1;
	return read_secret(FG_SALT_DEFAULT_PATH, out, err, errlen);
}

int fg_salt_for_tenant(const struct fg_salt_secret *s, const char *tenant,
		       char out[FG_SALT_MAX + 1])
{
	uint8_t msg[sizeof(salt_namespace) + 64], mac[32];
	size_t tlen = strnlen(tenant, 40), nlen = sizeof(salt_namespace) - 1;
	unsigned int maclen = 0;
	char safe[41];

	memcpy(msg, salt_namespace, nlen);
	memcpy(msg + nlen, tenant, tlen);
	if (!HMAC(EVP_sha256(), s->bytes, (int)s->len, msg, nlen + tlen, mac, &maclen) ||
	    maclen != sizeof(mac))
		return -1;
	/* the readable part only helps operators; the MAC is what separates */
	for (size_t i = 0; i < tlen; i++) {
		char c = tenant[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
		safe[i] = ok ? c : '_';
	}
	safe[tlen] = 0;
	static const char hex[] = "0123456789abcdef";
	int n = snprintf(out, FG_SALT_MAX + 1, "fg1-%s-", safe);
	if (n < 0 || n > FG_SALT_MAX)
		n = n < 0 ? 0 : FG_SALT_MAX;
	for (size_t i = 0; i < sizeof(mac) && n + 2 <= FG_SALT_MAX; i++) {
		out[n++] = hex[mac[i] >> 4];
		out[n++] = hex[mac[i] & 15];
	}
	out[n] = 0;
	return 0;
}
