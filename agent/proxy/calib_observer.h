/* calib_observer.h — engine steps as the proxy sees them, for
 * policy/calibration.c, and the prices that follow (agent.calibration).
 *
 * vLLM ends every step by emitting one token to each sequence it decoded
 * and the first token of each prompt it finished prefilling; a streaming
 * proxy sees those tokens arrive together, a step's duration apart. So the
 * proxy groups token arrivals that come within FG_PCAL_CLUSTER_NS of each
 * other into one step, and knows of it what the engine knew: the batch
 * (streams that got a token), their KV (prompt + output so far), and the
 * prompt tokens prefilled (streams that got their first token; uncached,
 * from the engine's own count in the first chunk's usage when it carries
 * one, else the gateway's estimate). The step's duration is the time from
 * the previous group's first arrival.
 *
 * A step is observed only when nothing makes it ambiguous: every stream
 * that decoded in the previous step (and did not end) is in it, none got
 * two tokens at once (a coalesced read), and nothing the proxy cannot
 * follow is at the engine (a non-streamed request, several choices). The
 * rest is not observed: ambiguous, not wrong. What is not seen at all: a
 * prompt chunked over several steps is counted in the step that finished
 * it, and another client of the engine is invisible (the proxy must be its
 * only client, as fairgated is in front of its replica).
 */
#ifndef FAIRGATE_CALIB_OBSERVER_H
#define FAIRGATE_CALIB_OBSERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/calib_follow.h"
#include "policy/calib_hist.h"
#include "policy/calibration.h"
#include "policy/gateway.h"
#include "policy/policy.h"

#define FG_PCAL_CLUSTER_NS 1500000ull /* arrivals this close are one step's */
/* The engine's mean inter-token time and the streams' this far apart: the
 * histograms are not on the gateway's clock (a simulator's virtual time)
 * or the proxy misses steps; the histogram source is then left out. */
#define FG_PCAL_CLOCK_APART 0.30

enum fg_pcal_state { FG_PCAL_NONE = 0, FG_PCAL_PREFILL, FG_PCAL_DECODE, FG_PCAL_OPAQUE };

/* One request's part (in struct fg_exchange; zero = not at the engine). */
struct fg_pcal_req {
	enum fg_pcal_state state;
	double prompt, out;
	uint64_t last_step;       /* the step group of its last token */
};

/* The step group being seen. */
struct fg_pcal_group {
	uint64_t first_ns, last_ns;
	uint32_t decoded, started, ended; /* tokens after the first, first tokens, ends */
	double context, prefill;
	bool broken;
};

struct fg_pcal {
	enum fg_calib_mode mode;
	struct fg_calib fit;
	struct fg_calib_follow follow;
	struct fg_calib_hist hist;     /* the second source: the engine's histograms */
	uint32_t n_prefill, n_decode, n_opaque;
	uint64_t step;                 /* groups seen; cur is number `step` */
	struct fg_pcal_group cur, prev;
	uint64_t steps_seen, steps_observed;
	uint64_t sharp_changes;
	bool step_measured;            /* the TPOT cap is on the measured step (`on`, a valid fit) */
	/* the cross-check against the engine's own inter-token latency:
	 * every step seen, weighted by the tokens it decoded, and the
	 * engine's histogram, both as of the last two scrapes */
	double gap_token_s, gap_tokens;       /* running sums, proxy side */
	double seen_at_scrape[2], engine_at_scrape[2]; /* (sum, count) last time */
	bool have_scrape;
	double proxy_itl_s, engine_itl_s;     /* means between the last two scrapes; 0 = none */
	bool engine_apart;             /* the two last compared were FG_PCAL_CLOCK_APART apart */
	/* the requests that ended with usage: calib_hist.h's gateway books */
	double ended_output_tokens, ended_context_tokens;
};

struct fg_pcal *fg_pcal_new(const struct fg_policy *p, const struct fg_cost_model *assumed,
			    uint64_t now_ns);
void fg_pcal_free(struct fg_pcal *pc);
/* A new policy, after fg_gw_reload put its prices in gw->cm: observations
 * stay (unless it names another engine: then they start again), and under
 * `on` the followed prices go back in. */
void fg_pcal_apply_policy(struct fg_pcal *pc, const struct fg_policy *p, struct fg_gateway *gw,
			  bool new_engine, uint64_t now_ns);

/* The request is at the engine; `followable` when the proxy sees its
 * tokens one by one (a stream of one choice). */
void fg_pcal_sent(struct fg_pcal *pc, struct fg_pcal_req *q, const struct fg_gw_request *r,
		  bool followable);
/* `completion_tokens` relayed so far; at the first, `uncached_prompt` is
 * the engine's count when known (else <= 0: the gateway's estimate). */
void fg_pcal_output(struct fg_pcal *pc, struct fg_pcal_req *q, double completion_tokens,
		    double uncached_prompt, uint64_t now_ns);
void fg_pcal_end(struct fg_pcal *pc, struct fg_pcal_req *q);

/* The engine's vllm:inter_token_latency_seconds _sum and _count as just
 * scraped: the means between this scrape and the last, the engine's and
 * the steps the proxy saw, are compared. */
void fg_pcal_engine_itl(struct fg_pcal *pc, double sum, double count);

/* A request ended with the engine's usage: its prompt and output tokens,
 * for the histogram source's context (policy/calib_hist.h). */
void fg_pcal_finished(struct fg_pcal *pc, double prompt_tokens, double completion_tokens);

/* The engine's timing histograms and token counters as scraped (counts
 * as of asked_ns), and its running gauge (< 0: none): calibration's
 * second source (policy/calib_hist.h). */
void fg_pcal_engine_totals(struct fg_pcal *pc, const struct fg_engine_totals *t, double running,
			   uint64_t asked_ns);

/* Once a second: refit; under `on`, move gw->cm, and size the TPOT cap on
 * the measured step at once (fg_gw_set_step_model; the policy's under
 * off and advise). Logs a sharp change once. */
void fg_pcal_tick(struct fg_pcal *pc, struct fg_gateway *gw, uint64_t now_ns);

#endif
