/* policy_suggest.c — the nearest known word to a misspelt one; see policy_suggest.h. */
#include "policy_suggest.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define WORD_MAX 64

unsigned fg_edit_distance(const char *a, const char *b)
{
	size_t la = strnlen(a, WORD_MAX), lb = strnlen(b, WORD_MAX);
	unsigned d[WORD_MAX + 1][WORD_MAX + 1];

	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
			unsigned best = d[i - 1][j - 1] + (ca != cb);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

static int is_prefix_of(const char *word, const char *candidate)
{
	size_t n = strlen(word);
	return n >= 3 && !strncasecmp(word, candidate, n);
}

const char *fg_suggest(const char *word, const char *const *candidates, size_t n)
{
	const char *best = NULL;
	unsigned best_d = ~0u;
	size_t len = strlen(word);

	if (!len)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned d = fg_edit_distance(word, candidates[i]);
		if (d < best_d) {
			best_d = d;
			best = candidates[i];
		}
	}
	/* One edit is always a plausible typo; more need a longer word. */
	if (best && (best_d <= 1 || best_d * 2 <= len))
		return best;
	for (size_t i = 0; i < n; i++)
		if (is_prefix_of(word, candidates[i]))
			return candidates[i];
	return NULL;
}
