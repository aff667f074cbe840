/* policy_suggest.h — "did you mean 'X'?" for misspelt keys and names. */
#ifndef FAIRGATE_POLICY_SUGGEST_H
#define FAIRGATE_POLICY_SUGGEST_H

#include <stddef.h>

/* Edit distance (optimal string alignment: insert, delete, substitute,
 * swap two neighbours), case-insensitive. Long inputs are capped. */
unsigned fg_edit_distance(const char *a, const char *b);

/* The candidate closest to `word` if it is close enough to be a likely typo
 * (or `word` is a prefix of it), else NULL. */
const char *fg_suggest(const char *word, const char *const *candidates, size_t n);

#endif
