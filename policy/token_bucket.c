/* token_bucket.c — reserve/settle token bucket in units; see token_bucket.h. */
#include <math.h>
#include "token_bucket.h"

/* Refill accumulates in floating point; a client that comes back exactly
 * when told must fit, so levels within a millionth of a unit count as met. */
#define LEVEL_EPS 1e-6

static void refill(struct fg_bucket *b, uint64_t now_ns)
{
	if (now_ns <= b->stamp_ns)
		return; /* same instant, or a caller's clock behind ours: no refill */
	double dt = (double)(now_ns - b->stamp_ns) / 1e9;
	double top = b->cap > 0 && b->cap < b->depth ? b->cap : b->depth;
	b->stamp_ns = now_ns;
	if (b->level >= top)
		return; /* above a cap by grants: refill adds nothing, takes nothing */
	b->level += b->rate * dt;
	if (b->level > top)
		b->level = top;
}

static double sane(double v)
{
	return isfinite(v) && v > 0 ? v : 0;
}

void fg_bucket_init(struct fg_bucket *b, double rate, double depth, uint64_t now_ns)
{
	b->rate = sane(rate);
	b->depth = sane(depth);
	b->level = b->depth;
	b->stamp_ns = now_ns;
	b->cap = 0;
}

void fg_bucket_reshape(struct fg_bucket *b, double rate, double depth, uint64_t now_ns)
{
	refill(b, now_ns);
	b->rate = sane(rate);
	b->depth = sane(depth);
	if (b->level > b->depth)
		b->level = b->depth;
}

double fg_bucket_level(struct fg_bucket *b, uint64_t now_ns)
{
	refill(b, now_ns);
	return b->level;
}

bool fg_bucket_can_ever_fit(const struct fg_bucket *b, double cost)
{
	return isfinite(cost) && cost <= b->depth;
}

uint64_t fg_bucket_wait_ns(struct fg_bucket *b, double cost, uint64_t now_ns)
{
	if (!fg_bucket_can_ever_fit(b, cost))
		return FG_BUCKET_NEVER;
	refill(b, now_ns);
	if (b->level + LEVEL_EPS >= cost)
		return 0;
	if (b->rate <= 0)
		return FG_BUCKET_NEVER;
	double ns = ceil((cost - b->level) / b->rate * 1e9);
	if (ns >= 1.8e19)
		return FG_BUCKET_NEVER;
	return ns < 1 ? 1 : (uint64_t)ns;
}

bool fg_bucket_reserve(struct fg_bucket *b, double cost, uint64_t now_ns)
{
	if (!isfinite(cost) || cost < 0)
		return false;
	refill(b, now_ns);
	if (b->level + LEVEL_EPS < cost)
		return false;
	b->level -= cost;
	return true;
}

void fg_bucket_settle(struct fg_bucket *b, double reserved, double actual, uint64_t now_ns)
{
	refill(b, now_ns);
	double diff = sane(reserved) - sane(actual);
	b->level += diff;
	if (b->level > b->depth)
		b->level = b->depth;
}
