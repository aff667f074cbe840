/* ctl_show.c — see ctl_show.h. */
#include "cli/ctl_show.h"

#include <getopt.h>
#include <stdio.h>

#include "lib/ctl_protocol.h"

double fg_show_num(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

const char *fg_show_str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "?";
}

json_t *fg_show_ask(const char *ctl, json_t *req, const char *refused)
{
	char err[512];
	json_t *reply = fg_ctl_call(fg_ctl_path(ctl), req, err, sizeof(err));

	json_decref(req);
	if (!reply) {
		fprintf(stderr, "fairgatectl: %s\n", err);
		return NULL;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		const char *e = json_string_value(json_object_get(reply, "error"));
		fprintf(stderr, "fairgatectl: %s\n", e ? e : refused);
		json_decref(reply);
		return NULL;
	}
	return reply;
}

static int usage(const char *cmd)
{
	fprintf(stderr, "usage: fairgatectl %s [--json] [--ctl PATH]\n", cmd);
	return 2;
}

int fg_show_command(int argc, char **argv, const char *cmd,
		    void (*print_human)(const json_t *reply))
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "ctl", required_argument, NULL, 'c' },
		{ 0 }
	};
	const char *ctl = NULL;
	int opt, json = 0;

	optind = 0;
	while ((opt = getopt_long(argc + 1, argv - 1, "", longopts, NULL)) != -1) {
		if (opt == 'j')
			json = 1;
		else if (opt == 'c')
			ctl = optarg;
		else
			return usage(cmd);
	}
	if (optind != argc + 1)
		return usage(cmd);
	json_t *req = json_pack("{s:s}", "cmd", cmd);
	json_t *reply = fg_show_ask(ctl, req, "?");
	if (!reply)
		return 1;
	if (json) {
		json_object_del(reply, "ok");
		json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		print_human(reply);
	}
	json_decref(reply);
	return 0;
}
