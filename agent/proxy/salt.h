/* salt.h — per-tenant vLLM cache_salt values.
 *
 * salt = "fg1-<tenant>-<hex HMAC-SHA256(node secret, namespace || tenant)>":
 * stable across restarts and nodes that share the secret, unguessable
 * without it, at most 100 characters and free of '@', '/' and '\' (vLLM
 * accepts up to 128). The secret comes from agent.salt_secret_file, or is
 * generated once at FG_SALT_DEFAULT_PATH (0600). */
#ifndef FAIRGATE_SALT_H
#define FAIRGATE_SALT_H

#include <stddef.h>
#include <stdint.h>

#define FG_SALT_DEFAULT_PATH "/var/lib/fairgate/salt.key"
#define FG_SALT_MAX 128
#define FG_SECRET_MIN 16
#define FG_SECRET_MAX 4096

struct fg_salt_secret {
	uint8_t bytes[FG_SECRET_MAX];
	size_t len;
};

/* Read the secret from `path`; with path NULL or "" use the default path and
 * create it (32 random bytes, 0600, directory 0700) when missing. A named
 * file must exist. 0, or -1 with err filled. */
int fg_salt_secret_load(const char *path, struct fg_salt_secret *out, char *err, size_t errlen);

/* Writes the salt (NUL-terminated, <= FG_SALT_MAX chars) into out. */
int fg_salt_for_tenant(const struct fg_salt_secret *s, const char *tenant,
		       char out[FG_SALT_MAX + 1]);

#endif
