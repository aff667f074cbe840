/* engine_window.h — keep the engine's own queue shallow.
 *
 * Inside the engine the order is FCFS (or priority), which would undo the
 * gateway's fairness if work piled up there. So the gateway only dispatches
 * while the work the engine has not started is under `steps` steps: counted
 * from the agent's own books (requests sent that have not produced a first
 * token, and their prefill tokens against the engine's per-step token budget)
 * and cross-checked with the engine's vllm:num_requests_waiting when known.
 */
#ifndef FAIRGATE_ENGINE_WINDOW_H
#define FAIRGATE_ENGINE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

struct fg_engine_window {
	double steps;               /* agent.engine_queue_steps */
	uint64_t step_tokens;       /* prefill tokens one engine step takes */
	uint64_t pending_tokens;    /* sent, no first token yet */
	uint32_t pending_requests;
	int64_t engine_waiting;     /* from the engine's metrics; -1 = unknown */
};

void fg_ew_init(struct fg_engine_window *w, double steps, uint64_t step_tokens);
/* One request may always be pending, so a prompt larger than the window
 * still goes (alone) instead of waiting forever. */
bool fg_ew_may_dispatch(const struct fg_engine_window *w, uint64_t prefill_tokens);
void fg_ew_sent(struct fg_engine_window *w, uint64_t prefill_tokens);
/* First token seen, or the request ended before one (error, disconnect). */
void fg_ew_started(struct fg_engine_window *w, uint64_t prefill_tokens);
void fg_ew_engine_waiting(struct fg_engine_window *w, int64_t waiting);

#endif
