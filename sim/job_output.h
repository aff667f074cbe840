/* job_output.h — what a job writes back, per API: chat and completions
 * (openai_response.h: bodies, chunks, usage chunk, [DONE]) and responses
 * (responses_response.h: the object and its event sequence), plus the
 * simulator's virtual timings (x-sim-* headers on a body, an ": x-sim {...}"
 * SSE comment at the end of a stream). */
#ifndef FAIRGATE_SIM_JOB_OUTPUT_H
#define FAIRGATE_SIM_JOB_OUTPUT_H

#include <stddef.h>

#include "sim/job.h"
#include "sim/openai_response.h"

/* Usage summed over the job's sequences (a prompt's cache hit once). */
struct sim_usage job_usage(const struct job *j);

/* Virtual timings of the request, in ms: TTFT from the first choice to
 * produce a token, E2E to the last to finish, TPOT of the first choice. */
struct job_timing {
	double ttft_ms, e2e_ms, queue_ms, tpot_ms;
	uint32_t preemptions;
	uint64_t recomputed;
};
struct job_timing job_timing(const struct job *j);

/* A streamed job: the response head and, for responses, the events before
 * the first token; then one call per token; then the trailer (the usage
 * chunk or response.completed, the timings comment, [DONE] for chat and
 * completions). The caller ends the chunked response. */
void job_output_stream_begin(struct job *j);
void job_output_token(struct job *j, struct choice *c);
void job_output_stream_end(struct job *j);

/* A non-streamed job's body (malloc'd, NULL when out of memory) and its
 * timing headers, written into headers[0..len). */
char *job_output_body(const struct job *j, char *headers, size_t len);

#endif
