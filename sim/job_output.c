/* job_output.c — see job_output.h. */
#include "job_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/responses_response.h"
#include "sim/tokenizer.h"

struct sim_usage job_usage(const struct job *j)
{
	struct sim_usage u = { .prompt_tokens = j->prompt_tokens,
			       .details = j->prompt_tokens_details };

	for (uint32_t i = 0; i < j->n_choices; i++) {
		u.completion_tokens += j->choices[i].n_output;
		if (i % j->n_per_prompt == 0) /* the prompt's first sequence speaks for it */
			u.cached_tokens += j->choices[i].cached_tokens;
	}
	memcpy(u.media_tokens, j->media_tokens, sizeof(u.media_tokens));
	return u;
}

struct job_timing job_timing(const struct job *j)
{
	struct job_timing t = { 0 };
	double first = -1, sched = -1, last = j->arrival;

	for (uint32_t i = 0; i < j->n_choices; i++) {
		const struct choice *c = &j->choices[i];
		if (c->first_token >= 0 && (first < 0 || c->first_token < first))
			first = c->first_token;
		if (c->first_scheduled >= 0 && (sched < 0 || c->first_scheduled < sched))
			sched = c->first_scheduled;
		if (c->finished > last)
			last = c->finished;
		t.preemptions += c->preemptions;
		t.recomputed += c->recomputed;
	}
	t.ttft_ms = first >= 0 ? (first - j->arrival) * 1e3 : 0;
	t.e2e_ms = (last - j->arrival) * 1e3;
	t.queue_ms = sched >= 0 ? (sched - j->arrival) * 1e3 : 0;
	const struct choice *c0 = &j->choices[0];
	if (c0->n_output > 1)
		t.tpot_ms = (c0->finished - c0->first_token) * 1e3 / (c0->n_output - 1);
	return t;
}

static struct sim_resp_meta meta(const struct job *j)
{
	struct sim_resp_meta m = { .api = j->api, .id = j->id, .created = j->created,
				   .model = j->model };
	return m;
}

static void emit(struct job *j, char *data)
{
	if (data)
		sim_http_stream_chunk(j->conn, data, strlen(data));
	free(data);
}

/* ---- responses -------------------------------------------------------------- */

static const char *responses_status(const struct job *j)
{
	const struct choice *c = &j->choices[0];

	if (!c->done)
		return "in_progress";
	return c->finish && !strcmp(c->finish, "length") ? "incomplete" : "completed";
}

static struct sim_resp_object responses_object(const struct job *j)
{
	const struct choice *c = &j->choices[0];
	struct sim_usage u = job_usage(j);
	struct sim_resp_object r = {
		.id = j->id, .msg_id = j->msg_id, .model = j->model,
		.instructions = j->instructions, .created_at = j->created,
		.max_output_tokens = j->max_tokens, .temperature = j->temperature,
		.top_p = j->top_p, .status = responses_status(j),
		.text = j->item_open || c->done ? c->text : NULL,
		.text_len = (size_t)c->n_output * SIM_BYTES_PER_TOKEN,
		.has_usage = c->done,
		/* vLLM reports cached input tokens here whatever
		 * --enable-prompt-tokens-details says */
		.input_tokens = u.prompt_tokens, .cached_tokens = u.cached_tokens,
		.output_tokens = u.completion_tokens,
	};
	return r;
}

static void responses_event(struct job *j, enum sim_resp_event ev, const char *delta)
{
	struct sim_resp_object r = responses_object(j);

	emit(j, sim_responses_event(&r, ev, j->sequence_number++, delta,
				    delta ? SIM_BYTES_PER_TOKEN : 0));
}

/* ---- streams ----------------------------------------------------------------- */

void job_output_stream_begin(struct job *j)
{
	char hdr[128];

	snprintf(hdr, sizeof(hdr), "x-request-id: %s\r\nx-sim-arrival-s: %.9f\r\n", j->id,
		 j->arrival);
	sim_http_stream_begin(j->conn, 200, "text/event-stream; charset=utf-8", hdr);
	if (j->api == SIM_API_RESPONSES) {
		responses_event(j, SIM_RESP_CREATED, NULL);
		responses_event(j, SIM_RESP_IN_PROGRESS, NULL);
	}
}

void job_output_token(struct job *j, struct choice *c)
{
	struct sim_resp_meta m = meta(j);
	uint32_t index = (uint32_t)(c - j->choices);
	const char *tok = c->text + (size_t)(c->n_output - 1) * SIM_BYTES_PER_TOKEN;
	struct sim_usage running = { .prompt_tokens = c->prompt_tokens };

	if (j->api == SIM_API_RESPONSES) {
		if (!j->item_open) {
			j->item_open = true;
			responses_event(j, SIM_RESP_ITEM_ADDED, NULL);
			responses_event(j, SIM_RESP_PART_ADDED, NULL);
		}
		responses_event(j, SIM_RESP_TEXT_DELTA, tok);
		return;
	}
	if (j->api == SIM_API_CHAT && !c->role_sent) {
		emit(j, sim_resp_chunk(&m, index, "assistant", "", 0, NULL,
				       j->continuous_usage ? &running : NULL));
		c->role_sent = true;
	}
	running.completion_tokens = c->n_output;
	emit(j, sim_resp_chunk(&m, index, NULL, tok, SIM_BYTES_PER_TOKEN, c->finish,
			       j->continuous_usage ? &running : NULL));
}

void job_output_stream_end(struct job *j)
{
	struct sim_resp_meta m = meta(j);
	struct sim_usage u = job_usage(j);
	struct job_timing t = job_timing(j);
	char timing[512];

	if (j->api == SIM_API_RESPONSES) {
		responses_event(j, SIM_RESP_TEXT_DONE, NULL);
		responses_event(j, SIM_RESP_PART_DONE, NULL);
		responses_event(j, SIM_RESP_ITEM_DONE, NULL);
		responses_event(j, SIM_RESP_COMPLETED, NULL);
	} else if (j->include_usage) {
		emit(j, sim_resp_usage_chunk(&m, &u));
	}
	/* An SSE comment: clients ignore it, tests and the gateway can read it. */
	int n = snprintf(timing, sizeof(timing),
			 ": x-sim {\"ttft_ms\":%.6f,\"e2e_ms\":%.6f,\"queue_ms\":%.6f,"
			 "\"tpot_ms\":%.6f,\"preemptions\":%u,\"recomputed_tokens\":%llu,"
			 "\"cached_tokens\":%llu}\n\n",
			 t.ttft_ms, t.e2e_ms, t.queue_ms, t.tpot_ms, t.preemptions,
			 (unsigned long long)t.recomputed, (unsigned long long)u.cached_tokens);
	sim_http_stream_chunk(j->conn, timing, (size_t)n);
	if (j->api != SIM_API_RESPONSES)
		sim_http_stream_chunk(j->conn, SIM_SSE_DONE, strlen(SIM_SSE_DONE));
}

/* ---- bodies -------------------------------------------------------------------- */

char *job_output_body(const struct job *j, char *headers, size_t len)
{
	struct sim_resp_meta m = meta(j);
	struct sim_usage u = job_usage(j);
	struct job_timing t = job_timing(j);
	char *body = NULL;

	snprintf(headers, len,
		 "x-request-id: %s\r\nx-sim-arrival-s: %.9f\r\nx-sim-ttft-ms: %.6f\r\n"
		 "x-sim-e2e-ms: %.6f\r\nx-sim-queue-ms: %.6f\r\nx-sim-tpot-ms: %.6f\r\n"
		 "x-sim-preemptions: %u\r\nx-sim-recomputed-tokens: %llu\r\n"
		 "x-sim-cached-tokens: %llu\r\n",
		 j->id, j->arrival, t.ttft_ms, t.e2e_ms, t.queue_ms, t.tpot_ms, t.preemptions,
		 (unsigned long long)t.recomputed, (unsigned long long)u.cached_tokens);
	if (j->api == SIM_API_RESPONSES) {
		struct sim_resp_object r = responses_object(j);
		return sim_responses_object(&r);
	}
	struct sim_resp_choice *rc = calloc(j->n_choices, sizeof(*rc));
	if (!rc)
		return NULL;
	for (uint32_t i = 0; i < j->n_choices; i++) {
		rc[i].text = j->choices[i].text;
		rc[i].len = (size_t)j->choices[i].n_output * SIM_BYTES_PER_TOKEN;
		rc[i].finish_reason = j->choices[i].finish;
	}
	body = sim_resp_full(&m, rc, j->n_choices, &u);
	free(rc);
	return body;
}
