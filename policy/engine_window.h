/* engine_window.h — keep the engine's own queue shallow.
 *
 * Inside the engine the order is FCFS (or priority), which would undo the
 * gateway's fairness if work piled up there. So the gateway sends the next
 * request only while the work the engine has not started is under `steps`
 * engine steps, counted two ways:
 *
 *   - prefill tokens of requests sent and not started, below
 *     steps x step_tokens. The rule looks at what is already pending, not at
 *     the next request's size: a prompt larger than the whole window goes, in
 *     its turn, as soon as the window is not full, so it can neither starve
 *     (it never needs the window empty, which a busy neighbour would never
 *     allow) nor hold the engine idle. The engine's unstarted prefill stays
 *     under the budget plus one request.
 *   - requests not started plus what else waits in the engine (other
 *     clients, preempted sequences), below steps x FG_EW_REQUESTS_PER_STEP,
 *     so tiny prompts cannot pile up under the token budget. This keeps the
 *     engine's vllm:num_requests_waiting at or under that limit.
 *
 * When has a request started? A stream says so with its first token. A
 * non-streamed request says nothing until its answer, so it is started only
 * when the engine's own counts show it: after a scrape of the engine's
 * /metrics taken after it was sent, the requests the engine has (its running
 * + waiting) are matched against ours in send order; the engine schedules in
 * arrival order, so its `waiting` are the newest of what it has, and our
 * older pending ones are running. Whatever the matching cannot account for
 * counts as not started (requests still on their way, or finished with the
 * answer on its way), so the window errs towards holding, never towards a
 * deeper engine queue (another client's running requests weaken that check:
 * they look like ours). Without the engine's counts a non-streamed request
 * is pending until its answer. Nothing here is timed: the window follows the
 * engine's clock whatever its pace.
 */
#ifndef FAIRGATE_ENGINE_WINDOW_H
#define FAIRGATE_ENGINE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

/* Requests the engine may hold unstarted per step of the window: a step
 * admits several short prompts, and four a step keeps the engine's queue at
 * 8 with the default 2 steps, what the gateway has always allowed. */
#define FG_EW_REQUESTS_PER_STEP 4

/* One request sent to the engine (embedded in the caller's request). */
struct fg_ew_item {
	struct fg_ew_item *prev, *next; /* in flight, in send order */
	uint64_t prefill_tokens;
	uint64_t sent_ns;
	bool linked;
	bool started;
	bool first_token_signal;        /* a stream: its first token says it started */
};

struct fg_engine_window {
	double steps;               /* agent.engine_queue_steps */
	uint64_t step_tokens;       /* prefill tokens one engine step takes */
	struct fg_ew_item *oldest, *newest;
	uint32_t inflight;          /* sent and not ended */
	uint64_t pending_tokens;    /* sent, not started */
	uint32_t pending_requests;
	uint32_t engine_extra;      /* waiting in the engine beyond our pending ones */
	bool engine_known;          /* the engine's counts are current */
	uint64_t started_by_engine; /* non-streamed requests its counts showed started */
};

void fg_ew_init(struct fg_engine_window *w, double steps, uint64_t step_tokens);
double fg_ew_budget_tokens(const struct fg_engine_window *w);
uint32_t fg_ew_waiting_limit(const struct fg_engine_window *w);
/* May one more request go now (whatever its size)? */
bool fg_ew_may_dispatch(const struct fg_engine_window *w);
void fg_ew_sent(struct fg_engine_window *w, struct fg_ew_item *it, uint64_t prefill_tokens,
		bool first_token_signal, uint64_t now_ns);
/* First token, or the whole answer, seen. Idempotent. */
void fg_ew_started(struct fg_engine_window *w, struct fg_ew_item *it);
/* The request is over (answered, failed, client gone). Idempotent. */
void fg_ew_ended(struct fg_engine_window *w, struct fg_ew_item *it);
/* Non-streamed requests still waiting for the engine's counts to start them. */
uint32_t fg_ew_unconfirmed(const struct fg_engine_window *w);
/* The engine's vllm:num_requests_running / _waiting from a scrape asked for
 * at snapshot_ns. Returns how many requests it showed started. */
uint32_t fg_ew_engine_counts(struct fg_engine_window *w, double running, double waiting,
			     uint64_t snapshot_ns);
/* The engine's counts are gone (stale, or no engine to ask). */
void fg_ew_engine_unknown(struct fg_engine_window *w);

#endif
