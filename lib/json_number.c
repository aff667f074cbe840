/* json_number.c — a yajl number token read with jansson's rules. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json_number.h"

enum fg_json_number fg_json_number(const char *s, size_t len, char *tmp, double *real,
				   long long *integer)
{
	/* most tokens are short plain integers (yajl has checked the grammar:
	 * an optional '-', then digits without a leading zero): 18 digits
	 * cannot overflow, so no strtoll is needed for them */
	size_t d = len && s[0] == '-';
	if (len - d && len - d <= 18 && !memchr(s, '.', len) && !memchr(s, 'e', len) &&
	    !memchr(s, 'E', len)) {
		long long v = 0;
		for (size_t k = d; k < len; k++)
			v = v * 10 + (s[k] - '0');
		*integer = d ? -v : v;
		*real = (double)*integer;
		return FG_JSON_INT;
	}
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
