/* policy_parse.c — the policy file's entry points: read, load the YAML tree
 * (policy_yaml.c), decode it against the schema (policy_schema.c), check
 * what must be unique across tenants (policy_conflicts.c). A policy may keep
 * its tenants in a second file (fg_policy_parse_split). All-or-nothing:
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

/* The tenants file is a mapping with the one key `tenants`; anything else
 * there belongs in the policy file. */
static int check_tenants_file(const struct fg_ynode *root, const char *tenants_file,
			      const char *policy_file, struct fg_policy_error *err)
{
	const struct fg_ynode *at = root;
	const char *why = "a tenants file holds one mapping with the key 'tenants'";

	if (root->type == FG_Y_MAP && fg_ymap_get(root, "tenants")) {
		for (size_t i = 0; i < fg_ymap_len(root); i++) {
			const struct fg_ynode *k = fg_ymap_key(root, i);
			if (k->type == FG_Y_SCALAR && !strcmp(k->str, "tenants"))
				continue;
			snprintf(err->file, sizeof(err->file), "%s", tenants_file);
			err->line = k->line;
			err->col = k->col;
			snprintf(err->message, sizeof(err->message),
				 "a tenants file holds only 'tenants'; '%.60s' belongs in the policy file %.80s",
				 k->type == FG_Y_SCALAR ? k->str : "?", policy_file);
			return -1;
		}
		return 0;
	}
	if (root->type == FG_Y_MAP && fg_ymap_len(root))
		at = fg_ymap_key(root, 0);
	snprintf(err->file, sizeof(err->file), "%s", tenants_file);
	err->line = at->line;
	err->col = at->col;
	snprintf(err->message, sizeof(err->message), "%s (tenants: [...])", why);
	return -1;
}

int fg_policy_parse_split(const char *buf, size_t len, const char *filename,
			  const char *tenants_buf, size_t tenants_len, const char *tenants_filename,
			  struct fg_policy *out, struct fg_policy_error *err)
{
	struct fg_ynode *root, *troot = NULL;
	const char *tfile = tenants_filename ? tenants_filename : "<tenants>";

	error_reset(err, filename);
	fg_policy_release(out);
	fg_policy_defaults(out);
	if (fg_yaml_load(buf, len, &root, err))
		return -1;

	/* fg_pfail writes err->file from c.files: keep the name apart from it */
	char file[sizeof(err->file)];
	snprintf(file, sizeof(file), "%s", err->file);
	struct fg_pctx c = { .p = out, .err = err, .root = root,
			     .files = { file, tenants_buf ? tfile : NULL } };
	int rc = -1;

	if (tenants_buf) {
		struct fg_ynode *own = root->type == FG_Y_MAP ? fg_ymap_key_node(root, "tenants") : NULL;
		if (own) {
			fg_pfail(&c, own,
				 "tenants come from the tenants file %.100s; remove them here, or give no tenants file",
				 tfile);
			goto out;
		}
		if (fg_yaml_load(tenants_buf, tenants_len, &troot, err)) {
			snprintf(err->file, sizeof(err->file), "%s", tfile);
			if (!strncmp(err->message, "policy file is empty", 20))
				snprintf(err->message, sizeof(err->message),
					 "tenants file is empty (expected tenants: [...])");
			goto out;
		}
		fg_yaml_set_source(troot, 1);
		if (check_tenants_file(troot, tfile, file, err))
			goto out;
		if (root->type == FG_Y_MAP) {
			/* Borrow the tenants file's key and list into the policy's
			 * mapping for the decode; given back before either is freed. */
			size_t n = root->n;
			for (size_t i = 0; i < troot->n; i += 2) {
				if (strcmp(troot->items[i]->str, "tenants"))
					continue;
				if (root->n + 2 > root->cap) {
					size_t cap = root->cap ? root->cap * 2 : 8;
					struct fg_ynode **items = realloc(root->items, cap * sizeof(*items));
					if (!items) {
						fg_pfail(&c, NULL, "out of memory");
						goto out;
					}
					root->items = items;
					root->cap = cap;
				}
				root->items[root->n++] = troot->items[i];
				root->items[root->n++] = troot->items[i + 1];
			}
			rc = fg_decode_map(&c, root, &fg_policy_schema, out, "", NULL);
			if (rc == 0)
				rc = fg_policy_check_conflicts(&c);
			root->n = n;
			goto out;
		}
	}
	rc = fg_decode_map(&c, root, &fg_policy_schema, out, "", NULL);
	if (rc == 0)
		rc = fg_policy_check_conflicts(&c);
out:
	if (rc)
		fg_policy_release(out); /* a failed parse owns nothing */
	fg_yaml_free(troot);
	fg_yaml_free(root);
	return rc;
}

int fg_policy_parse_buffer(const char *buf, size_t len, const char *filename,
			   struct fg_policy *out, struct fg_policy_error *err)
{
	return fg_policy_parse_split(buf, len, filename, NULL, 0, NULL, out, err);
}

static int file_error(struct fg_policy_error *err, const char *what, int errnum)
{
	err->line = 0;
	err->col = 0;
	snprintf(err->message, sizeof(err->message), "%s: %s", what, strerror(errnum));
	return -1;
}

int fg_policy_read_file(const char *path, char **text, size_t *len, struct fg_policy_error *err)
{
	struct stat st;
	char *buf;
	size_t got = 0;

	*text = NULL;
	*len = 0;
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
	buf[got] = '\0';
	*text = buf;
	*len = got;
	return 0;
}

int fg_policy_parse_files(const char *path, const char *tenants_path, struct fg_policy *out,
			  struct fg_policy_error *err)
{
	char *text, *ttext = NULL;
	size_t len, tlen = 0;

	if (fg_policy_read_file(path, &text, &len, err))
		return -1;
	if (tenants_path && fg_policy_read_file(tenants_path, &ttext, &tlen, err)) {
		free(text);
		return -1;
	}
	int rc = fg_policy_parse_split(text, len, path, ttext, tlen, tenants_path, out, err);
	free(ttext);
	free(text);
	return rc;
}

int fg_policy_parse_file(const char *path, struct fg_policy *out, struct fg_policy_error *err)
{
	return fg_policy_parse_files(path, NULL, out, err);
}

void fg_policy_error_format(const struct fg_policy_error *err, char *buf, size_t len)
{
	/* line 0: the file itself could not be read, no position to give. */
	if (err->line == 0)
		snprintf(buf, len, "%s: %s", err->file, err->message);
	else
		snprintf(buf, len, "%s:%u:%u: %s", err->file, err->line, err->col, err->message);
}
