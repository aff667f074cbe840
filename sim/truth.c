/* truth.c — see truth.h. */
#include "truth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_yaml.h"

struct key {
	const char *name;
	double scale;    /* file and flag unit -> what sim_truth holds */
	double lo, hi;   /* accepted range, in the file's unit */
	bool lo_open;    /* lo itself is refused */
};

static const struct key keys[] = {
	{ "prefill_mfu", 1, 0, 1, true },
	{ "decode_mbu", 1, 0, 1, true },
	{ "step_overhead_ms", 1e-3, 0, 10000, false },
	{ "seq_overhead_us", 1e-6, 0, 1e7, false },
};

int sim_truth_set(struct sim_truth *t, const char *key, double value, char *why, size_t len)
{
	double *dst[] = { &t->prefill_mfu, &t->decode_mbu, &t->step_overhead_s, &t->seq_overhead_s };

	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
		const struct key *k = &keys[i];
		if (strcmp(key, k->name))
			continue;
		if (!isfinite(value) || value > k->hi || value < k->lo ||
		    (k->lo_open && value == k->lo)) {
			snprintf(why, len, "%s must be in %s%g, %g], got %g", k->name,
				 k->lo_open ? "(" : "[", k->lo, k->hi, value);
			return -1;
		}
		*dst[i] = value * k->scale;
		return 0;
	}
	snprintf(why, len, "unknown key '%s' (prefill_mfu, decode_mbu, step_overhead_ms, "
			   "seq_overhead_us)", key);
	return -1;
}

static int load_tree(const struct fg_ynode *root, struct sim_truth *t, const char *path,
		     char *err, size_t errlen)
{
	const struct fg_ynode *m = root;

	if (m->type == FG_Y_MAP && fg_ymap_len(m) == 1 && fg_ymap_get(m, "truth"))
		m = fg_ymap_get(m, "truth");
	if (m->type != FG_Y_MAP) {
		snprintf(err, errlen, "%s:%u:%u: a truth is a mapping of numbers", path, m->line,
			 m->col);
		return -1;
	}
	for (size_t i = 0; i < fg_ymap_len(m); i++) {
		const struct fg_ynode *k = fg_ymap_key(m, i), *v = fg_ymap_val(m, i);
		char *end, why[200];
		double x;
		if (k->type != FG_Y_SCALAR || v->type != FG_Y_SCALAR || !v->plain) {
			snprintf(err, errlen, "%s:%u:%u: expected `key: number`", path, k->line,
				 k->col);
			return -1;
		}
		errno = 0;
		x = strtod(v->str, &end);
		if (errno || end == v->str || *end) {
			snprintf(err, errlen, "%s:%u:%u: '%s' is not a number", path, v->line, v->col,
				 v->str);
			return -1;
		}
		if (sim_truth_set(t, k->str, x, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%u:%u: %s", path, k->line, k->col, why);
			return -1;
		}
	}
	return 0;
}

int sim_truth_load(const char *path, struct sim_truth *t, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	struct fg_policy_error perr = { 0 };
	struct fg_ynode *root;
	char *buf;
	size_t n;
	int rc;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	buf = malloc(FG_YAML_MAX_BYTES + 1);
	n = buf ? fread(buf, 1, FG_YAML_MAX_BYTES + 1, f) : 0;
	fclose(f);
	if (!buf || n > FG_YAML_MAX_BYTES) {
		snprintf(err, errlen, "%s: %s", path, buf ? "too large" : "out of memory");
		free(buf);
		return -1;
	}
	rc = fg_yaml_load(buf, n, &root, &perr);
	free(buf);
	if (rc) {
		snprintf(err, errlen, "%s:%u:%u: %s", path, perr.line, perr.col, perr.message);
		return -1;
	}
	rc = load_tree(root, t, path, err, errlen);
	fg_yaml_free(root);
	return rc;
}

void sim_truth_hardware(const struct sim_truth *t, const struct fg_replica *policy,
			struct fg_cost_model *out)
{
	struct fg_replica r = *policy;

	if (t->prefill_mfu > 0)
		r.prefill_mfu = t->prefill_mfu;
	if (t->decode_mbu > 0)
		r.decode_mbu = t->decode_mbu;
	fg_cost_model_init(out, &r);
}

bool sim_truth_is_policy(const struct sim_truth *t)
{
	return !t->prefill_mfu && !t->decode_mbu && !t->step_overhead_s && !t->seq_overhead_s;
}
