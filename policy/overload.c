/* overload.c — the tier-shedding rule; see overload.h. */
#include "overload.h"

void fg_tier_ranks(const struct fg_policy *p, int ranks[FG_MAX_TIERS])
{
	for (uint32_t i = 0; i < p->n_tiers; i++) {
		int r = 0;
		for (uint32_t j = 0; j < p->n_tiers; j++) {
			if (p->tiers[j].weight < p->tiers[i].weight ||
			    (p->tiers[j].weight == p->tiers[i].weight && j < i))
				r++;
		}
		ranks[i] = r;
	}
}

/* max_queue_s of the tier at rank r */
static double queue_limit_at_rank(const struct fg_policy *p, const int *ranks, int r)
{
	for (uint32_t i = 0; i < p->n_tiers; i++)
		if (ranks[i] == r)
			return p->tiers[i].max_queue_s;
	return 0;
}

int fg_overload_level(const struct fg_policy *p, double backlog_s, int current_level)
{
	int ranks[FG_MAX_TIERS];
	int level = -1;

	fg_tier_ranks(p, ranks);
	for (int r = 0; r < (int)p->n_tiers; r++) {
		double limit = queue_limit_at_rank(p, ranks, r);
		/* a level already in force stays until the backlog halves */
		double threshold = r <= current_level ? limit / 2 : limit;
		if (limit > 0 && backlog_s > threshold)
			level = r;
		else
			break;
	}
	/* the top tier is never shed by the node: it is what the node is for */
	if (level >= (int)p->n_tiers - 1)
		level = (int)p->n_tiers - 2;
	return level;
}
