/* ctl_policy_apply.c — `fairgatectl policy apply FILE [--tenants FILE]`:
 * check the file(s) here (so a typo is reported with FILE:LINE:COL even
 * when the agent is down), then send the text to fairgated, which parses it
 * again and swaps it in atomically: unchanged tenants keep their bucket
 * levels, no connection is dropped, and a bad file changes nothing. Exit 0
 * applied, 2 invalid policy or usage, 1 the agent could not be reached or
 * refused. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl_commands.h"
#include "cli/ctl_show.h"
#include "lib/ctl_protocol.h"
#include "policy/policy.h"
#include "policy/policy_yaml.h"

/* what `policy check` reads is what `policy apply` can send: two files of
 * the parser's limit, escaped, and the command around them */
_Static_assert(2ull * 2 * FG_YAML_MAX_BYTES + 65536 <= FG_CTL_MAX_LINE,
	       "the control line cannot carry the largest policy apply");

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			/* up to the parser's limit and a read past it, so a file
			 * the parser takes is read whole and a larger one refused */
			cap = cap ? cap * 2 : 16384;
			if (cap > FG_YAML_MAX_BYTES + 4096 + 1)
				cap = FG_YAML_MAX_BYTES + 4096 + 1;
			char *nb = n > FG_YAML_MAX_BYTES ? NULL : realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				errno = EFBIG;
				return NULL;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

/* A file's text for the control socket's one JSON line; NULL after saying why. */
static char *read_policy_text(const char *path, size_t *len)
{
	char *text = read_file(path, len);

	if (!text) {
		fprintf(stderr, "fairgatectl: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (strlen(text) != *len) {
		fprintf(stderr, "fairgatectl: %s: contains a NUL byte; not a policy file\n", path);
		free(text);
		return NULL;
	}
	return text;
}

int fg_cmd_policy_apply(int argc, char **argv)
{
	static const char usage[] =
		"usage: fairgatectl policy apply FILE [--tenants FILE] [--json] [--ctl PATH]\n";
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "tenants", required_argument, NULL, 't' },
		{ 0 }
	};
	const char *ctl = NULL, *tfile = NULL;
	int opt, json = 0;
	char err[512];

	optind = 0;
	while ((opt = getopt_long(argc + 1, argv - 1, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j': json = 1; break;
		case 'c': ctl = optarg; break;
		case 't': tfile = optarg; break;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	const char *file = argv[optind - 1];
	size_t len, tlen = 0;
	char *text = read_policy_text(file, &len), *ttext = NULL;
	if (!text || (tfile && !(ttext = read_policy_text(tfile, &tlen)))) {
		free(text);
		return 2;
	}
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error perr;
	if (!p || fg_policy_parse_split(text, len, file, ttext, tlen, tfile, p, &perr)) {
		if (p) {
			fg_policy_error_format(&perr, err, sizeof(err));
			fprintf(stderr, "%s\n", err);
		}
		fg_policy_free(p);
		free(text);
		free(ttext);
		return 2;
	}
	fg_policy_free(p);

	json_t *req = json_pack("{s:s, s:s, s:s}", "cmd", "policy_apply", "file", file, "policy", text);
	if (ttext) {
		json_object_set_new(req, "tenants", json_string(ttext));
		json_object_set_new(req, "tenants_file", json_string(tfile));
	}
	free(text);
	free(ttext);
	json_t *reply = fg_show_ask(ctl, req, "fairgated refused the policy");
	if (!reply)
		return 1;
	if (json) {
		json_object_del(reply, "ok");
		json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		printf("applied %s: %lld tenants (%zu added, %zu removed)\n", file,
		       (long long)json_integer_value(json_object_get(reply, "tenants")),
		       json_array_size(json_object_get(reply, "added")),
		       json_array_size(json_object_get(reply, "removed")));
	}
	json_decref(reply);
	return 0;
}
