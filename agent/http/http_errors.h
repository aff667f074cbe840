/* http_errors.h — responses the proxy writes itself: OpenAI-shaped errors
 * {"error": {"message", "type", "param", "code"}} with the right status,
 * headers and framing. */
#ifndef FAIRGATE_HTTP_ERRORS_H
#define FAIRGATE_HTTP_ERRORS_H

#include <stdbool.h>
#include "lib/buf.h"

const char *fg_http_reason(int status);

/* {"error":{"message","type","param","code"}} (malloc'd, compact); a
 * message that is not UTF-8 goes out with its other bytes as '?'. */
char *fg_error_json(const char *type, const char *code, const char *param, const char *message);

/* Append a whole HTTP/1.1 response. `extra_headers` is "" or complete
 * "Name: value\r\n" lines; `close` adds Connection: close. 0 or -1 (OOM). */
int fg_http_error(struct fg_buf *out, int status, const char *type, const char *code,
		  const char *param, const char *message, const char *extra_headers, bool close);

#endif
