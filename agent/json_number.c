/* json_number.c — a yajl number token read with jansson's rules. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/json_number.h"

enum fg_json_number fg_json_number(const char *s, size_t len, char *tmp, double *real,
				   long long *integer)
{
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	errno = 0;
	if (memchr(s, '.', len) || memchr(s, 'e', len) || memchr(s, 'E', len)) {
		*real = strtod(tmp, NULL);
		*integer = 0;
		return errno == ERANGE && (*real == HUGE_VAL || *real == -HUGE_VAL)
			       ? FG_JSON_REAL_OVERFLOW : FG_JSON_REAL;
	}
	*integer = strtoll(tmp, NULL, 10);
	*real = (double)*integer;
	return errno == ERANGE ? FG_JSON_INT_TOO_BIG : FG_JSON_INT;
}
