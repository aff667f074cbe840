/* json_number.h — a JSON number token from yajl, read the way jansson reads
 * it, so the agent's two tree-less readers (request bodies, usage objects)
 * accept and refuse exactly the numbers jansson would. */
#ifndef FAIRGATE_JSON_NUMBER_H
#define FAIRGATE_JSON_NUMBER_H

#include <stdbool.h>
#include <stddef.h>

enum fg_json_number {
	FG_JSON_INT,           /* no fraction, no exponent: *integer (and *real) */
	FG_JSON_REAL,          /* *real */
	FG_JSON_INT_TOO_BIG,   /* jansson: "too big integer" */
	FG_JSON_REAL_OVERFLOW, /* jansson refuses it; an underflow reads ~0 */
};

/* s, len: the token as yajl hands it (not NUL-terminated); tmp: room for
 * len + 1 bytes. */
enum fg_json_number fg_json_number(const char *s, size_t len, char *tmp, double *real,
				   long long *integer);

#endif
