/* request_fields.c — see request_fields.h. */
#include "request_fields.h"

#include <math.h>
#include <string.h>

int sim_json_load(const char *body, size_t len, json_t **root, struct sim_error *err)
{
	json_error_t jerr;
	/* JSON_ALLOW_NUL lets "\u0000" into strings as Python's json does; a
	 * raw NUL byte is JSON nowhere, but jansson takes one after a number */
	const char *nul = memchr(body, '\0', len);

	*root = NULL;
	if (nul)
		return sim_error_set(err, 400, NULL,
				     "JSON decode error: invalid control character at byte %zu",
				     (size_t)(nul - body));
	*root = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
	if (!*root)
		return sim_error_set(err, 400, NULL, "JSON decode error: %s (line %d, column %d)",
				     jerr.text, jerr.line, jerr.column);
	if (!json_is_object(*root)) {
		json_decref(*root);
		*root = NULL;
		return sim_error_set(err, 400, NULL, "the request body must be a JSON object");
	}
	return 0;
}

int sim_field_int(json_t *obj, const char *key, long long lo, long long hi, long long *out,
		  bool *present, struct sim_error *err)
{
	json_t *v = json_object_get(obj, key);

	*present = false;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
		   fabs(json_real_value(v)) < 9e18) {
		*out = (long long)json_real_value(v);
	} else {
		return sim_error_set(err, 400, key, "%s must be an integer", key);
	}
	if (*out < lo)
		return sim_error_set(err, 400, key, "%s must be at least %lld, got %lld.", key, lo,
				     *out);
	if (*out > hi)
		return sim_error_set(err, 400, key, "%s must be at most %lld, got %lld.", key, hi,
				     *out);
	*present = true;
	return 0;
}

int sim_field_bool(json_t *obj, const char *key, bool *out, struct sim_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return sim_error_set(err, 400, key, "%s must be a boolean", key);
	*out = json_is_true(v);
	return 0;
}

int sim_field_model(json_t *root, const struct sim_request_limits *lim, struct sim_error *err)
{
	json_t *model = json_object_get(root, "model");

	if (!model || json_is_null(model))
		return 0;
	if (!json_is_string(model))
		return sim_error_set(err, 400, "model", "model must be a string");
	if (lim->model && strcmp(json_string_value(model), lim->model) != 0)
		return sim_error_set(err, 404, "model", "The model `%s` does not exist.",
				     json_string_value(model));
	return 0;
}

bool sim_cache_salt_valid(const char *s, size_t len)
{
	if (len < 1 || len > SIM_SALT_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '@' || s[i] == '/' || s[i] == '\\' || s[i] == '\0')
			return false;
	return true;
}

int sim_field_salt(json_t *root, bool *has, char out[SIM_SALT_MAX + 1], struct sim_error *err)
{
	json_t *salt = json_object_get(root, "cache_salt");

	*has = false;
	if (!salt || json_is_null(salt))
		return 0;
	if (!json_is_string(salt) ||
	    !sim_cache_salt_valid(json_string_value(salt), json_string_length(salt)))
		return sim_error_set(err, 400, "cache_salt",
				     "cache_salt must be a string of 1 to %d characters without "
				     "'@', '/', '\\' or NUL", SIM_SALT_MAX);
	memcpy(out, json_string_value(salt), json_string_length(salt) + 1);
	*has = true;
	return 0;
}

int sim_field_priority(json_t *root, const struct sim_request_limits *lim, int32_t *out,
		       struct sim_error *err)
{
	long long v;
	bool present;

	*out = 0;
	if (sim_field_int(root, "priority", INT32_MIN, INT32_MAX, &v, &present, err))
		return -1;
	if (!present)
		return 0;
	if (v && !lim->priority_scheduling)
		return sim_error_set(err, 400, "priority",
				     "Got priority %lld but Priority scheduling is not enabled.", v);
	*out = (int32_t)v;
	return 0;
}
