/* admission.c — admit / retry later / never fits, and deny windows; see
 * admission.h. */
#include <math.h>
#include "admission.h"

struct fg_decision fg_admission_decide(struct fg_bucket *b, double cost, uint64_t now_ns)
{
	struct fg_decision d = { .cost = cost };

	if (!fg_bucket_can_ever_fit(b, cost) || b->rate <= 0) {
		d.verdict = FG_NEVER_FITS;
		return d;
	}
	if (fg_bucket_reserve(b, cost, now_ns)) {
		d.verdict = FG_ADMIT;
		return d;
	}
	d.verdict = FG_RETRY_LATER;
	d.wait_ns = fg_bucket_wait_ns(b, cost, now_ns);
	return d;
}

uint64_t fg_retry_turn_ns(struct fg_bucket *b, double cost, uint64_t now_ns, uint64_t *turn_ns,
			  double draw)
{
	uint64_t own = fg_bucket_wait_ns(b, cost, now_ns);

	if (own == FG_BUCKET_NEVER || !(b->rate > 0))
		return own;
	double slot = cost / b->rate * 1e9;
	double turn = (double)now_ns + (double)own;
	if (*turn_ns > now_ns && (double)*turn_ns + slot > turn)
		turn = (double)*turn_ns + slot;
	if (turn > 1.8e19)
		turn = 1.8e19;
	if (turn > (double)*turn_ns)
		*turn_ns = (uint64_t)turn;
	if (!(draw >= 0 && draw < 1))
		draw = 0;
	double wait = turn - (double)now_ns;
	return (uint64_t)(wait + draw * FG_RETRY_SPREAD * fmin(slot, wait));
}

uint64_t fg_retry_spread_ns(uint64_t waited_ns, double draw)
{
	if (!(draw >= 0 && draw < 1))
		draw = 0;
	return waited_ns + (uint64_t)((double)waited_ns * FG_RETRY_SPREAD * draw);
}

uint64_t fg_retry_after_s(uint64_t wait_ns)
{
	uint64_t s = wait_ns / 1000000000ull + (wait_ns % 1000000000ull ? 1 : 0);

	return s ? s : 1;
}

uint64_t fg_retry_after_ms(uint64_t wait_ns)
{
	uint64_t ms = wait_ns / 1000000ull + (wait_ns % 1000000ull ? 1 : 0);

	return ms ? ms : 1;
}

double fg_typical_cost_update(double typical, double cost)
{
	if (!isfinite(cost) || cost <= 0)
		return typical;
	if (typical <= 0)
		return cost;
	return typical + FG_TYPICAL_ALPHA * (cost - typical);
}

uint64_t fg_deny_until_ns(struct fg_bucket *b, double typical_cost, uint64_t now_ns, int open)
{
	if (typical_cost <= 0)
		return 0;
	uint64_t wait = fg_bucket_wait_ns(b, typical_cost, now_ns);
	/* a typical request that can never fit is answered 4xx, not held */
	if (wait == FG_BUCKET_NEVER || wait == 0 || (!open && wait < FG_DENY_MIN_NS))
		return 0;
	return now_ns + wait;
}
