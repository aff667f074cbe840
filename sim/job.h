/* job.h — one generation request being served: its engine sequences (a
 * choice per prompt x n) and what the engine has told about each. Data
 * only: sim_server.c creates jobs, feeds them engine events and frees them;
 * job_output.c writes their answers. */
#ifndef FAIRGATE_SIM_JOB_H
#define FAIRGATE_SIM_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sim/engine.h"
#include "sim/openai_request.h"
#include "sim/sim_http.h"

struct job;

/* One engine sequence of a request. */
struct choice {
	struct job *job;
	struct sim_seq *seq;          /* NULL once finished */
	uint32_t prompt_idx;
	uint32_t prompt_tokens;       /* of its prompt */
	char *text;                   /* 4 bytes per token */
	uint32_t n_output;
	const char *finish;
	bool done;
	bool role_sent;
	double first_scheduled, first_token, finished;
	uint32_t cached_tokens, preemptions;
	uint64_t recomputed;
};

struct job {
	struct sim_server *srv;
	struct sim_http_conn *conn;
	enum sim_api api;
	bool stream, include_usage, continuous_usage;
	bool prompt_tokens_details;   /* the server's --enable-prompt-tokens-details */
	const char *model;            /* the served name (the server's, outlives us) */
	uint32_t n_choices, n_done;
	struct choice *choices;
	uint64_t prompt_tokens;       /* each prompt counted once */
	uint32_t media_tokens[SIM_MM_N];
	uint32_t n_per_prompt;
	uint32_t max_tokens;
	char id[48];
	time_t created;
	double arrival;
	/* responses */
	char msg_id[48];
	char *instructions;
	double temperature, top_p;
	uint64_t sequence_number;     /* the next event's */
	bool item_open;               /* output_item.added was sent */
};

#endif
