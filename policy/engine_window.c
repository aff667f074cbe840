/* engine_window.c — the shallow-engine-queue rule; see engine_window.h. */
#include <math.h>
#include <string.h>

#include "engine_window.h"

void fg_ew_init(struct fg_engine_window *w, double steps, uint64_t step_tokens)
{
	memset(w, 0, sizeof(*w));
	w->steps = steps > 0 ? steps : 2;
	w->step_tokens = step_tokens ? step_tokens : 8192;
}

double fg_ew_budget_tokens(const struct fg_engine_window *w)
{
	return w->steps * (double)w->step_tokens;
}

uint32_t fg_ew_waiting_limit(const struct fg_engine_window *w)
{
	double n = ceil(w->steps * FG_EW_REQUESTS_PER_STEP);

	return n < 1 ? 1 : (uint32_t)n;
}

bool fg_ew_may_dispatch(const struct fg_engine_window *w)
{
	return (double)w->pending_tokens < fg_ew_budget_tokens(w) &&
	       (uint64_t)w->pending_requests + w->engine_extra < fg_ew_waiting_limit(w);
}

void fg_ew_sent(struct fg_engine_window *w, struct fg_ew_item *it, uint64_t prefill_tokens,
		bool first_token_signal, uint64_t now_ns)
{
	if (it->linked)
		return;
	it->prefill_tokens = prefill_tokens;
	it->sent_ns = now_ns;
	it->started = false;
	it->first_token_signal = first_token_signal;
	it->next = NULL;
	it->prev = w->newest;
	if (w->newest)
		w->newest->next = it;
	else
		w->oldest = it;
	w->newest = it;
	it->linked = true;
	w->inflight++;
	w->pending_tokens += prefill_tokens;
	w->pending_requests++;
}

void fg_ew_started(struct fg_engine_window *w, struct fg_ew_item *it)
{
	if (!it->linked || it->started)
		return;
	it->started = true;
	w->pending_tokens -= it->prefill_tokens < w->pending_tokens ? it->prefill_tokens
								    : w->pending_tokens;
	if (w->pending_requests)
		w->pending_requests--;
}

void fg_ew_ended(struct fg_engine_window *w, struct fg_ew_item *it)
{
	if (!it->linked)
		return;
	fg_ew_started(w, it);
	if (it->prev)
		it->prev->next = it->next;
	else
		w->oldest = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		w->newest = it->prev;
	it->prev = it->next = NULL;
	it->linked = false;
	if (w->inflight)
		w->inflight--;
}

uint32_t fg_ew_unconfirmed(const struct fg_engine_window *w)
{
	uint32_t n = 0;

	for (const struct fg_ew_item *it = w->oldest; it; it = it->next)
		n += !it->started && !it->first_token_signal;
	return n;
}

uint32_t fg_ew_engine_counts(struct fg_engine_window *w, double running, double waiting,
			     uint64_t snapshot_ns)
{
	/* Ours the engine could have counted: in flight, sent before it was
	 * asked (a prefix of the list). If it counts fewer than that, the
	 * newest are taken as not there yet (still on the wire, or being
	 * tokenized; or an old one finished and its answer is on its way):
	 * either way fewer are started below, never more. */
	if (!(running >= 0))
		running = 0;
	if (!(waiting >= 0))
		waiting = 0;
	uint64_t asked = 0, pending_asked = 0;
	for (const struct fg_ew_item *it = w->oldest; it && it->sent_ns < snapshot_ns; it = it->next) {
		asked++;
		pending_asked += !it->started;
	}
	double has = running + waiting;
	uint64_t seen = (double)asked <= has ? asked : (uint64_t)has;
	uint64_t pending_seen = 0;
	const struct fg_ew_item *it = w->oldest;
	for (uint64_t k = 0; k < seen; k++, it = it->next)
		pending_seen += !it->started;

	/* More waiting than all our pending ones: another client's requests,
	 * or a preempted sequence back in the queue. They count against the
	 * window until the engine reports them gone, so that the engine's
	 * waiting never exceeds what the window allows. */
	double extra = waiting - (double)pending_asked;
	w->engine_extra = extra > 0 ? (extra < 1e9 ? (uint32_t)extra : 1000000000u) : 0;
	w->engine_known = true;

	/* Arrival order: the engine's waiting are the newest it has, so the
	 * oldest of our pending ones beyond that many are running. */
	uint64_t w_ours = (double)pending_seen <= waiting ? pending_seen : (uint64_t)waiting;

	uint64_t running_ours = pending_seen - w_ours;
	uint32_t n = 0;
	struct fg_ew_item *p = w->oldest;
	for (uint64_t k = 0; k < seen && running_ours; k++) {
		struct fg_ew_item *next = p->next;
		if (!p->started) {
			running_ours--;
			/* a stream is running too, but its first token is exact and
			 * comes with the end of its prefill: wait for it */
			if (!p->first_token_signal) {
				fg_ew_started(w, p);
				n++;
			}
		}
		p = next;
	}
	w->started_by_engine += n;
	return n;
}

void fg_ew_engine_unknown(struct fg_engine_window *w)
{
	w->engine_extra = 0;
	w->engine_known = false;
}
