/* policy_parse.c — the policy file's entry points: read, load the YAML tree
 * (policy_yaml.c), decode it against the schema (policy_schema.c), check
 * what must be unique across tenants (policy_conflicts.c). All-or-nothing:
 * callers parse into a scratch struct and keep their old policy on -1. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "policy.h"
#include "policy_conflicts.h"
#include "policy_schema.h"
#include "policy_yaml.h"

static void error_reset(struct fg_policy_error *err, const char *filename)
{
	memset(err, 0, sizeof(*err));
	snprintf(err->file, sizeof(err->file), "%s", filename ? filename : "<policy>");
}

int fg_policy_parse_buffer(const char *buf, size_t len, const char *filename,
			   struct fg_policy *out, struct fg_policy_error *err)
{
	struct fg_ynode *root;

	error_reset(err, filename);
	fg_policy_defaults(out);
	if (fg_yaml_load(buf, len, &root, err))
		return -1;

	struct fg_pctx c = { .p = out, .err = err, .root = root };
	int rc = fg_decode_map(&c, root, &fg_policy_schema, out, "", NULL);
	if (rc == 0)
		rc = fg_policy_check_conflicts(&c);
	fg_yaml_free(root);
	return rc;
}

static int file_error(struct fg_policy_error *err, const char *what, int errnum)
{
	err->line = 0;
	err->col = 0;
	snprintf(err->message, sizeof(err->message), "%s: %s", what, strerror(errnum));
	return -1;
}

int fg_policy_parse_file(const char *path, struct fg_policy *out, struct fg_policy_error *err)
{
	struct stat st;
	char *buf;
	size_t got = 0;

	error_reset(err, path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return file_error(err, "cannot open", errno);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int e = errno;
		close(fd);
		if (S_ISDIR(st.st_mode))
			e = EISDIR;
		return file_error(err, "not a regular file", e ? e : EINVAL);
	}
	if (st.st_size > FG_YAML_MAX_BYTES) {
		close(fd);
		snprintf(err->message, sizeof(err->message),
			 "policy file is larger than %u bytes", FG_YAML_MAX_BYTES);
		return -1;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return file_error(err, "cannot read", ENOMEM);
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return file_error(err, "cannot read", e);
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	int rc = fg_policy_parse_buffer(buf, got, path, out, err);
	free(buf);
	return rc;
}

void fg_policy_error_format(const struct fg_policy_error *err, char *buf, size_t len)
{
	/* line 0: the file itself could not be read, no position to give. */
	if (err->line == 0)
		snprintf(buf, len, "%s: %s", err->file, err->message);
	else
		snprintf(buf, len, "%s:%u:%u: %s", err->file, err->line, err->col, err->message);
}

const struct fg_tenant *fg_policy_tenant_by_name(const struct fg_policy *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_tenants; i++)
		if (!strcmp(p->tenants[i].name, name))
			return &p->tenants[i];
	return NULL;
}

const struct fg_tenant *fg_policy_tenant_by_key_hash(const struct fg_policy *p,
						     const uint8_t hash[32])
{
	for (uint32_t i = 0; i < p->n_tenants; i++)
		for (uint32_t k = 0; k < p->tenants[i].n_keys; k++)
			if (!memcmp(p->tenants[i].keys[k], hash, 32))
				return &p->tenants[i];
	return NULL;
}

int fg_policy_tier_by_name(const struct fg_policy *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_tiers; i++)
		if (!strcmp(p->tiers[i].name, name))
			return (int)i;
	return -1;
}
