/* id_set.c — a set of small ids that lists its members; see id_set.h. */
#include <stdlib.h>
#include <string.h>

#include "lib/id_set.h"

int fg_idset_init(struct fg_idset *s, uint32_t slots)
{
	memset(s, 0, sizeof(*s));
	if (!slots)
		slots = 1;
	s->ids = malloc((size_t)slots * sizeof(*s->ids));
	s->in = calloc(slots, 1);
	if (!s->ids || !s->in) {
		fg_idset_free(s);
		return -1;
	}
	s->slots = slots;
	return 0;
}

void fg_idset_free(struct fg_idset *s)
{
	free(s->ids);
	free(s->in);
	memset(s, 0, sizeof(*s));
}

void fg_idset_fill(struct fg_idset *s, uint32_t n)
{
	if (n > s->slots)
		n = s->slots;
	for (uint32_t i = 0; i < n; i++) {
		s->ids[i] = i;
		s->in[i] = 1;
	}
	for (uint32_t i = n; i < s->slots; i++)
		s->in[i] = 0;
	s->n = n;
}

void fg_idset_clear(struct fg_idset *s)
{
	for (uint32_t k = 0; k < s->n; k++)
		s->in[s->ids[k]] = 0;
	s->n = 0;
}

void fg_idset_filter(struct fg_idset *s, fg_idset_keep_fn keep, void *ctx)
{
	uint32_t w = 0;

	for (uint32_t k = 0; k < s->n; k++) {
		uint32_t id = s->ids[k];
		if (keep(id, ctx))
			s->ids[w++] = id;
		else
			s->in[id] = 0;
	}
	s->n = w;
}
