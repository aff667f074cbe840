/* sim_server.h — fairgate-sim's OpenAI-compatible front: routes HTTP
 * requests to the engine, streams tokens back as the engine produces them,
 * and paces the engine's virtual clock to the wall clock (--speedup).
 *
 * Pacing: with speedup X > 0, virtual time v and real time r are tied by
 * v = (r - start) * X. A request arriving while the engine is idle starts a
 * step at once; each step's results are delivered when the wall clock
 * reaches the step's virtual end. With X = 0 ("inf") steps run back to back
 * as fast as the CPU allows, virtual time stands still while idle, and a
 * request arriving during a step is stamped with the step's end.
 */
#ifndef FAIRGATE_SIM_SERVER_H
#define FAIRGATE_SIM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/event_loop.h"
#include "policy/cost_model.h"
#include "sim/engine.h"
#include "sim/sim_metrics.h"
#include "sim/tokenizer.h"

#define SIM_MAX_API_KEYS 16
#define SIM_MAX_API_KEY_LEN 4096
/* what /version answers: the sim, not a vLLM release */
#define SIM_VERSION "0.0.0+fairgate-sim"

struct sim_server_options {
	char host[64];
	uint16_t port;
	double speedup;               /* 0 = as fast as possible */
	struct sim_engine_config engine;
	bool prompt_tokens_details;   /* usage.prompt_tokens_details.cached_tokens */
	bool force_include_usage;     /* every stream carries usage, continuously */
	bool refuse_best_of;          /* best_of != 1 is a 400 (vLLM 0.8-0.11) */
	uint32_t media_tokens[SIM_MM_N]; /* per image / audio / video part; 0 = refused */
	char model[64];               /* served model name */
	uint32_t default_max_tokens;  /* chat requests without max_tokens */
	size_t max_body;
	bool log_requests;
	/* --api-key: a path under vLLM's guarded prefixes (/v1, /v2,
	 * /inference, /cohere) wants one of these as a bearer token; none = no
	 * authentication */
	const char *api_keys[SIM_MAX_API_KEYS];
	uint32_t n_api_keys;
	struct sim_metrics_opts metrics;
};

struct sim_server;

/* `hw` is the hardware the engine runs on: the policy's cost model, or the
 * truth's (sim/truth.h), with o->engine's overheads. */
struct sim_server *sim_server_new(struct fg_loop *loop, const struct sim_server_options *o,
				  const struct fg_cost_model *hw, char *err, size_t errlen);
void sim_server_free(struct sim_server *s);
uint16_t sim_server_port(const struct sim_server *s);

#endif
