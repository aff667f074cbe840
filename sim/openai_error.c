/* openai_error.c — see openai_error.h. */
#include "openai_error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>

int sim_error_set(struct sim_error *err, int status, const char *param, const char *fmt, ...)
{
	va_list ap;

	err->status = status;
	switch (status) {
	case 401: err->type = "UnauthorizedError"; break;
	case 404: err->type = "NotFoundError"; break;
	case 405: err->type = "MethodNotAllowedError"; break;
	case 413: err->type = "RequestEntityTooLargeError"; break;
	case 500: err->type = "InternalServerError"; break;
	case 503: err->type = "ServiceUnavailableError"; break;
	default: err->type = "BadRequestError"; break;
	}
	snprintf(err->param, sizeof(err->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

static json_t *error_object(const struct sim_error *err, const char *message)
{
	return json_pack("{s:{s:s,s:s,s:o,s:i}}", "error", "message", message, "type", err->type,
			 "param", err->param[0] ? json_string(err->param) : json_null(), "code",
			 err->status);
}

char *sim_error_json(const struct sim_error *err)
{
	json_t *e = error_object(err, err->message);

	if (!e) {
		/* jansson takes only UTF-8, and a message may quote the client's
		 * bytes (a JSON decode error does): send those as '?' */
		char ascii[sizeof(err->message)];
		size_t i = 0;
		for (; err->message[i] && i + 1 < sizeof(ascii); i++)
			ascii[i] = (unsigned char)err->message[i] < 0x80 ? err->message[i] : '?';
		ascii[i] = 0;
		e = error_object(err, ascii);
	}
	char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;

	json_decref(e);
	return s;
}
