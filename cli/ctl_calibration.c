/* ctl_calibration.c — see ctl_calibration.h. */
#include "cli/ctl_calibration.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/ctl_show.h"

struct row {
	const char *label, *key, *fmt;
	double scale;
};

static const struct row rows[] = {
	{ "prompt token (us)", "prompt_token_us", "%12.2f", 1 },
	{ "decode step (ms), ref batch", "decode_step_ms", "%12.2f", 1 },
	{ "output weight (units)", "output_weight", "%12.2f", 1 },
	{ "  at context 0", "output_units_at_0", "%12.2f", 1 },
	{ "  + per 1k of context", "output_units_per_1k_context", "%12.3f", 1 },
	{ "replica budget (units/s)", "replica_units_per_s", "%12.0f", 1 },
	{ "prefill MFU", "prefill_mfu", "%12.3f", 1 },
	{ "decode MBU", "decode_mbu", "%12.3f", 1 },
	{ "step overhead (ms)", "step_overhead_ms", "%12.2f", 1 },
	{ "per-sequence overhead (us)", "seq_overhead_us", "%12.1f", 1 },
};

void fg_show_calibration(const json_t *cal)
{
	const json_t *ob = json_object_get(cal, "observations");
	const char *mode = fg_show_str(cal, "mode");
	const json_t *models[3] = { json_object_get(cal, "assumed"), json_object_get(cal, "measured"),
				    json_object_get(cal, "charged") };

	if (!cal) {
		printf("calibration: not reported by this agent\n");
		return;
	}
	printf("calibration: %s (%s); %.0f engine steps seen, %.0f observed, %.0f in the window",
	       mode,
	       !strcmp(mode, "on") ? "prices follow the measurement, at most 1.25x a minute, within 0.5x-2x of the policy's"
	       : !strcmp(mode, "off") ? "nothing measured"
				      : "measured, reported, not charged",
	       fg_show_num(ob, "steps_seen"), fg_show_num(ob, "steps_observed"),
	       fg_show_num(ob, "in_window"));
	if (json_is_true(json_object_get(cal, "valid")))
		printf("; fit from %.0f (%.0f prefilling, %.0f trimmed), rms %.2f ms%s\n",
		       fg_show_num(ob, "used"), fg_show_num(ob, "prefill_steps_used"),
		       fg_show_num(ob, "trimmed"), fg_show_num(json_object_get(cal, "fit"), "rms_ms"),
		       json_is_true(json_object_get(cal, "bounded")) ? " (a term held at its bound)" : "");
	else
		printf("; not enough yet to fit\n");
	const json_t *src = json_object_get(cal, "sources");
	if (src) {
		const json_t *s = json_object_get(src, "streams"), *e = json_object_get(src, "engine");
		printf("  fed by: %.0f steps seen in the streams (%.0f%% of the fit), %.0f decode and "
		       "%.0f prefill intervals of the engine's histograms (%.0f%%); %.0f engine "
		       "restart(s) skipped\n",
		       fg_show_num(s, "used"), 100 * fg_show_num(s, "weight_share"),
		       fg_show_num(e, "decode_used"), fg_show_num(e, "prefill_used"),
		       100 * fg_show_num(e, "weight_share"), fg_show_num(e, "resets"));
		if (json_is_true(json_object_get(e, "apart_from_streams")))
			printf("  the engine's inter-token time is more than 30%% from the streams' "
			       "(another clock, or steps the proxy misses): its histograms are left out\n");
	}
	printf("  %-28s %12s %12s %12s\n", "", "assumed", "measured", "charged");
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		printf("  %-28s", rows[i].label);
		for (int m = 0; m < 3; m++) {
			if (models[m] && json_object_get(models[m], rows[i].key))
				printf(" "), printf(rows[i].fmt, fg_show_num(models[m], rows[i].key) * rows[i].scale);
			else
				printf(" %12s", "-");
		}
		putchar('\n');
	}
	const json_t *itl = json_object_get(cal, "inter_token_ms");
	if (itl)
		printf("  mean inter-token time since the last engine scrape: engine %.2f ms, steps the proxy saw %.2f ms\n",
		       fg_show_num(itl, "engine"), fg_show_num(itl, "proxy"));
	const json_t *fit = json_object_get(cal, "fit");
	if (fit && !json_is_true(json_object_get(fit, "prompt_identified")))
		printf("  the prompt-token time is not identified (%.2f +- %.2f us: not within 10%%, or "
		       "held by its box): its prices hold\n",
		       fg_show_num(fit, "prompt_token_us"), fg_show_num(fit, "prompt_token_se_us"));
	if (fit && !json_is_true(json_object_get(fit, "step_identified")))
		printf("  the step's fixed and per-sequence terms are not identified (%.3f ms, %.1f us: "
		       "held by their box): the price at context 0 holds\n",
		       fg_show_num(fit, "step_fixed_ms"), fg_show_num(fit, "step_per_seq_us"));
	if (fit && !json_is_true(json_object_get(fit, "context_identified")))
		printf("  the per-context term is not identified (%.1f +- %.3g ns a token: not within "
		       "10%%, or on its box; the contexts hardly varied apart from the batch): its "
		       "price holds\n",
		       fg_show_num(fit, "step_per_context_ns"),
		       json_is_number(json_object_get(fit, "step_per_context_se_ns"))
			       ? fg_show_num(fit, "step_per_context_se_ns")
			       : INFINITY);
}

json_t *fg_fetch_calibration(const char *ctl)
{
	json_t *reply = fg_show_ask(ctl, json_pack("{s:s}", "cmd", "status"), "?");

	if (!reply)
		return NULL;
	json_t *cal = json_incref(json_object_get(reply, "calibration"));
	if (!cal)
		fprintf(stderr, "fairgatectl: the agent reports no calibration\n");
	json_decref(reply);
	return cal;
}
