/* engine_window.c — the shallow-engine-queue rule; see engine_window.h. */
#include "engine_window.h"

void fg_ew_init(struct fg_engine_window *w, double steps, uint64_t step_tokens)
{
	w->steps = steps > 0 ? steps : 2;
	w->step_tokens = step_tokens ? step_tokens : 8192;
	w->pending_tokens = 0;
	w->pending_requests = 0;
	w->engine_waiting = -1;
}

bool fg_ew_may_dispatch(const struct fg_engine_window *w, uint64_t prefill_tokens)
{
	double budget = w->steps * (double)w->step_tokens;

	if (w->pending_requests == 0)
		return true;
	/* The engine says more is waiting than our books allow: it is slower
	 * than we think (other clients, preemption), so hold off. */
	if (w->engine_waiting >= 0 && (double)w->engine_waiting > w->steps * 4)
		return false;
	return (double)(w->pending_tokens + prefill_tokens) <= budget;
}

void fg_ew_sent(struct fg_engine_window *w, uint64_t prefill_tokens)
{
	w->pending_tokens += prefill_tokens;
	w->pending_requests++;
}

void fg_ew_started(struct fg_engine_window *w, uint64_t prefill_tokens)
{
	w->pending_tokens -= prefill_tokens < w->pending_tokens ? prefill_tokens : w->pending_tokens;
	if (w->pending_requests)
		w->pending_requests--;
}

void fg_ew_engine_waiting(struct fg_engine_window *w, int64_t waiting)
{
	w->engine_waiting = waiting;
}
