/* request_fields.h — a request body's JSON and the fields every endpoint
 * shares, read as vLLM's pydantic models read them: the decode (and its
 * error), integers and booleans with lax typing, the served model's name,
 * cache_salt and priority, and the limits of the engine behind them.
 *
 * Pure: JSON in, values or an OpenAI-shaped error out.
 */
#ifndef FAIRGATE_SIM_REQUEST_FIELDS_H
#define FAIRGATE_SIM_REQUEST_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/openai_error.h"
#include "sim/tokenizer.h"

#define SIM_SALT_MAX 128

/* What the served engine accepts. */
struct sim_request_limits {
	const char *model;          /* served model name; NULL accepts any */
	uint32_t max_model_len;
	bool priority_scheduling;   /* --scheduling-policy priority */
	uint32_t default_max_tokens;/* chat and responses requests that name none */
	uint32_t media_tokens[SIM_MM_N]; /* placeholder tokens per media part;
					    all 0 = a text-only model */
	bool refuse_best_of;        /* --best-of refuse: vLLM 0.8-0.11's V1 check */
	bool force_include_usage;   /* --enable-force-include-usage */
};

/* Decode a body that must be a JSON object; *root is a new reference. */
int sim_json_load(const char *body, size_t len, json_t **root, struct sim_error *err);

/* An optional integer field in [lo, hi]: absent or null leaves *present
 * false. JSON reals with an integral value are accepted (pydantic's lax
 * mode). */
int sim_field_int(json_t *obj, const char *key, long long lo, long long hi, long long *out,
		  bool *present, struct sim_error *err);
/* An optional boolean; absent or null leaves *out as it was. */
int sim_field_bool(json_t *obj, const char *key, bool *out, struct sim_error *err);
/* "model", when present, must name the served model (404 otherwise). */
int sim_field_model(json_t *root, const struct sim_request_limits *lim, struct sim_error *err);
/* "cache_salt": copied to out (NUL-terminated) and *has set when present. */
int sim_field_salt(json_t *root, bool *has, char out[SIM_SALT_MAX + 1], struct sim_error *err);
/* "priority": non-zero only under priority scheduling, as vLLM checks. */
int sim_field_priority(json_t *root, const struct sim_request_limits *lim, int32_t *out,
		       struct sim_error *err);

/* The rule vLLM's validator applies to cache_salt, plus fairgate's: 1..128
 * bytes, none of '@', '/', '\\' or NUL. */
bool sim_cache_salt_valid(const char *s, size_t len);

#endif
