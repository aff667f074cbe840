/* http_errors.c — OpenAI-shaped error responses; see http_errors.h. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "agent/http/http_errors.h"

const char *fg_http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 417: return "Expectation Failed";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

char *fg_error_json(const char *type, const char *code, const char *param, const char *message)
{
	json_t *err = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", message, "type",
				type, "param", param, "code", code);
	char ascii[1024];

	if (!err && message) {
		/* jansson takes only UTF-8, and a message may quote the client's
		 * bytes (a JSON parse error does): answer with those as '?' */
		size_t i = 0;
		for (; message[i] && i + 1 < sizeof(ascii); i++)
			ascii[i] = (unsigned char)message[i] < 0x80 ? message[i] : '?';
		ascii[i] = 0;
		err = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", ascii, "type", type,
				"param", param, "code", code);
	}
	char *body = err ? json_dumps(err, JSON_COMPACT) : NULL;

	json_decref(err);
	return body;
}

int fg_http_error(struct fg_buf *out, int status, const char *type, const char *code,
		  const char *param, const char *message, const char *extra_headers, bool close)
{
	char *body = fg_error_json(type, code, param, message);
	int rc = -1;

	if (!body)
		return -1;
	size_t blen = strlen(body);
	if (!fg_buf_printf(out,
			   "HTTP/1.1 %d %s\r\n"
			   "Content-Type: application/json\r\n"
			   "Content-Length: %zu\r\n"
			   "%s%s\r\n",
			   status, fg_http_reason(status), blen, extra_headers ? extra_headers : "",
			   close ? "Connection: close\r\n" : "") &&
	    !fg_buf_append(out, body, blen))
		rc = 0;
	free(body);
	return rc;
}
