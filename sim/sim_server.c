/* sim_server.c — routes, request jobs, token streaming and engine pacing;
 * see sim_server.h. */
#include "sim_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sim/job.h"
#include "sim/job_output.h"
#include "sim/openai_request.h"
#include "sim/sim_http.h"
#include "sim/sim_metrics.h"
#include "sim/tokenize_api.h"
#include "sim/tokenizer.h"

struct sim_server {
	struct fg_loop *loop;
	struct sim_server_options opt;
	struct fg_cost_model cm;
	struct sim_engine *engine;
	struct sim_http_server *http;
	struct sim_http_counters counters;
	uint64_t real_origin_ns;
	uint64_t step_timer;
	uint64_t next_job;
	bool closing;          /* sim_server_free: the engine frees every sequence */
};

/* ---- pacing ------------------------------------------------------------------ */

static bool as_fast_as_possible(const struct sim_server *s)
{
	return s->opt.speedup <= 0;
}

static double virtual_now(const struct sim_server *s)
{
	return (double)(fg_now_ns() - s->real_origin_ns) * 1e-9 * s->opt.speedup;
}

/* The virtual arrival time of a request read now (see sim_server.h). */
static double arrival_time(struct sim_server *s)
{
	if (sim_engine_in_step(s->engine)) {
		const struct sim_step_info *st = sim_engine_last_step(s->engine);
		double end = st->start + st->duration;
		if (as_fast_as_possible(s))
			return end;
		double v = virtual_now(s);
		return v < st->start ? st->start : v > end ? end : v;
	}
	if (!as_fast_as_possible(s))
		sim_engine_advance_idle(s->engine, virtual_now(s));
	return sim_engine_now(s->engine);
}

static void step_timer_fired(struct fg_loop *loop, void *ctx);

static void arm_step(struct sim_server *s, double virtual_end)
{
	uint64_t delay = 0;

	if (!as_fast_as_possible(s)) {
		double real_end = (double)s->real_origin_ns + virtual_end / s->opt.speedup * 1e9;
		double now = (double)fg_now_ns();
		/* The loop's timers have 1 ms resolution and round up; waiting for
		 * less than that would make every short step late. Finishing up to
		 * 1 ms early keeps the absolute schedule instead. */
		if (real_end - now >= 1e6)
			delay = (uint64_t)(real_end - now);
	}
	s->step_timer = fg_loop_timer(s->loop, delay, step_timer_fired, s);
}

/* End the step in flight (delivering its tokens), then plan the next. */
static void step_timer_fired(struct fg_loop *loop, void *ctx)
{
	struct sim_server *s = ctx;

	(void)loop;
	s->step_timer = 0;
	if (sim_engine_in_step(s->engine))
		sim_engine_step_end(s->engine);
	double d = sim_engine_step_begin(s->engine);
	if (d >= 0)
		arm_step(s, sim_engine_last_step(s->engine)->start + d);
}

static void kick_engine(struct sim_server *s)
{
	if (!s->step_timer && !sim_engine_in_step(s->engine) && sim_engine_has_work(s->engine))
		s->step_timer = fg_loop_timer(s->loop, 0, step_timer_fired, s);
}

/* ---- responses ---------------------------------------------------------------- */

static void count_status(struct sim_server *s, int status)
{
	s->counters.requests++;
	if (status >= 100 && status < 600)
		s->counters.by_status[status / 100]++;
}

static void respond_json(struct sim_server *s, struct sim_http_conn *c, int status,
			 const char *headers, char *body)
{
	count_status(s, status);
	sim_http_respond(c, status, "application/json", headers, body ? body : "{}",
			 body ? strlen(body) : 2);
	free(body);
}

static void respond_error(struct sim_server *s, struct sim_http_conn *c,
			  const struct sim_error *err)
{
	respond_json(s, c, err->status, "", sim_error_json(err));
}

static void job_free(struct job *j)
{
	for (uint32_t i = 0; i < j->n_choices; i++) {
		/* one abort scans the queues; thousands at exit would take seconds */
		if (j->choices[i].seq && !j->srv->closing)
			sim_engine_abort(j->srv->engine, j->choices[i].seq);
		free(j->choices[i].text);
	}
	free(j->choices);
	free(j->instructions);
	free(j);
}

static void job_complete(struct job *j)
{
	struct sim_server *s = j->srv;
	struct sim_http_conn *c = j->conn;
	char headers[768];

	if (s->opt.log_requests) {
		struct sim_usage u = job_usage(j);
		struct job_timing t = job_timing(j);
		fprintf(stderr, "fairgate-sim: %s prompt=%llu out=%llu cached=%llu ttft=%.3fms "
				"e2e=%.3fms queue=%.3fms preempt=%u\n", j->id,
			(unsigned long long)u.prompt_tokens, (unsigned long long)u.completion_tokens,
			(unsigned long long)u.cached_tokens, t.ttft_ms, t.e2e_ms, t.queue_ms,
			t.preemptions);
	}
	if (j->stream) {
		job_output_stream_end(j);
		j->conn = NULL;
		job_free(j);
		sim_http_stream_end(c);
		return;
	}
	char *body = job_output_body(j, headers, sizeof(headers));
	j->conn = NULL;
	job_free(j);
	if (!body) {
		struct sim_error err;
		sim_error_set(&err, 500, NULL, "out of memory");
		respond_error(s, c, &err);
		return;
	}
	respond_json(s, c, 200, headers, body);
}

/* ---- engine events ---------------------------------------------------------- */

static void on_engine_event(void *ctx, const struct sim_event *ev)
{
	struct choice *c = ev->seq->user;

	(void)ctx;
	if (!c || ev->kind != SIM_EV_TOKEN)
		return;
	struct job *j = c->job;
	const struct sim_seq *seq = ev->seq;
	uint32_t id = seq->tokens[seq->n_tokens - 1];

	sim_token_bytes(id, c->text + (size_t)c->n_output * SIM_BYTES_PER_TOKEN);
	c->n_output = seq->n_output;
	c->first_scheduled = seq->first_scheduled;
	c->first_token = seq->first_token;
	c->cached_tokens = seq->cached_tokens;
	c->preemptions = seq->num_preemptions;
	c->recomputed = seq->recomputed_tokens;
	if (seq->finish != SIM_FINISH_NONE) {
		c->finish = sim_finish_reason(seq->finish);
		c->finished = seq->finished;
		c->done = true;
		c->seq = NULL; /* the engine frees it after this callback */
		j->n_done++;
	}
	if (j->stream)
		job_output_token(j, c);
	if (j->n_done == j->n_choices)
		job_complete(j);
}

/* ---- routes ------------------------------------------------------------------- */

static struct sim_request_limits limits(const struct sim_server *s)
{
	struct sim_request_limits lim = {
		.model = s->opt.model,
		.max_model_len = s->opt.engine.max_model_len,
		.priority_scheduling = s->opt.engine.policy == SIM_SCHED_PRIORITY,
		.default_max_tokens = s->opt.default_max_tokens,
		.refuse_best_of = s->opt.refuse_best_of,
		.force_include_usage = s->opt.force_include_usage,
	};
	memcpy(lim.media_tokens, s->opt.media_tokens, sizeof(lim.media_tokens));
	return lim;
}

static void handle_completion(struct sim_server *s, struct sim_http_conn *conn,
			      enum sim_api api, const struct sim_http_request *r)
{
	struct sim_request_limits lim = limits(s);
	struct sim_request req;
	struct sim_error err;

	if (sim_request_parse(api, r->body, r->body_len, &lim, &req, &err)) {
		respond_error(s, conn, &err);
		return;
	}
	struct job *j = calloc(1, sizeof(*j));
	if (j)
		j->choices = calloc((size_t)req.n_prompts * req.n, sizeof(*j->choices));
	if (!j || !j->choices) {
		free(j);
		sim_request_free(&req);
		sim_error_set(&err, 500, NULL, "out of memory");
		respond_error(s, conn, &err);
		return;
	}
	j->srv = s;
	j->conn = conn;
	j->api = api;
	j->stream = req.stream;
	j->include_usage = req.include_usage;
	j->continuous_usage = req.continuous_usage;
	j->prompt_tokens_details = s->opt.prompt_tokens_details;
	j->model = s->opt.model;
	j->n_per_prompt = req.n;
	j->max_tokens = req.max_tokens;
	memcpy(j->media_tokens, req.media_tokens, sizeof(j->media_tokens));
	j->instructions = req.instructions;
	req.instructions = NULL;
	j->temperature = req.temperature;
	j->top_p = req.top_p;
	j->created = time(NULL);
	j->arrival = arrival_time(s);
	s->next_job++;
	snprintf(j->id, sizeof(j->id), "%s-%016llx",
		 api == SIM_API_CHAT ? "chatcmpl" : api == SIM_API_COMPLETIONS ? "cmpl" : "resp",
		 (unsigned long long)s->next_job);
	if (api == SIM_API_RESPONSES) /* vLLM's ids are resp_ and msg_ + a uuid */
		j->id[4] = '_';
	snprintf(j->msg_id, sizeof(j->msg_id), "msg_%016llx", (unsigned long long)s->next_job);
	for (uint32_t p = 0; p < req.n_prompts; p++) {
		j->prompt_tokens += req.prompts[p].n;
		for (uint32_t k = 0; k < req.n; k++) {
			struct choice *c = &j->choices[j->n_choices];
			struct sim_seq_params sp = {
				.prompt = req.prompts[p].ids,
				.n_prompt = req.prompts[p].n,
				.max_tokens = req.max_tokens,
				.min_tokens = req.min_tokens,
				.ignore_eos = req.ignore_eos,
				.priority = req.priority,
				.cache_salt = req.has_salt ? req.cache_salt : NULL,
				.user = c,
			};
			c->job = j;
			c->prompt_idx = p;
			c->prompt_tokens = req.prompts[p].n;
			c->first_scheduled = c->first_token = c->finished = -1;
			c->text = malloc((size_t)req.max_tokens * SIM_BYTES_PER_TOKEN + 1);
			c->seq = c->text ? sim_engine_add(s->engine, &sp, j->arrival) : NULL;
			if (!c->seq) {
				free(c->text);
				c->text = NULL;
				j->conn = NULL;
				job_free(j);
				sim_request_free(&req);
				sim_error_set(&err, 500, NULL, "out of memory");
				respond_error(s, conn, &err);
				return;
			}
			j->n_choices++;
		}
	}
	sim_request_free(&req);
	sim_http_set_user(conn, j);
	if (j->stream) {
		count_status(s, 200);
		job_output_stream_begin(j);
	}
	kick_engine(s);
}

static void handle_models(struct sim_server *s, struct sim_http_conn *conn)
{
	char *body = NULL;

	if (asprintf(&body,
		     "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
		     "\"created\":%lld,\"owned_by\":\"fairgate-sim\",\"root\":\"%s\","
		     "\"parent\":null,\"max_model_len\":%u,\"permission\":[]}]}",
		     s->opt.model, (long long)time(NULL), s->opt.model,
		     s->opt.engine.max_model_len) < 0)
		body = NULL;
	respond_json(s, conn, 200, "", body);
}

/* /tokenize and /detokenize: no engine work, answered at once. */
static void handle_tokenizer(struct sim_server *s, struct sim_http_conn *conn, bool detok,
			     const struct sim_http_request *r)
{
	struct sim_request_limits lim = limits(s);
	struct sim_error err;
	char *body = detok ? sim_detokenize_body(r->body, r->body_len, &lim, &err)
			   : sim_tokenize(r->body, r->body_len, &lim, &err);

	if (!body) {
		respond_error(s, conn, &err);
		return;
	}
	respond_json(s, conn, 200, "", body);
}

static void handle_metrics(struct sim_server *s, struct sim_http_conn *conn)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (f) {
		s->counters.connections = sim_http_num_connections(s->http);
		sim_metrics_write(f, s->engine, s->opt.model, &s->counters);
		fclose(f);
	}
	count_status(s, 200);
	sim_http_respond(conn, 200, "text/plain; version=0.0.4; charset=utf-8", "",
			 text ? text : "", text ? len : 0);
	free(text);
}

/* vLLM's --api-key: probes, metrics and the version stay open; the API
 * (/v1, /v2, /inference, /cohere, /tokenize, /detokenize) wants
 * "Authorization: Bearer KEY" with one of the keys. */
static bool authorized(const struct sim_server *s, const struct sim_http_request *r)
{
	static const char *const guarded[] = { "/v1", "/v2", "/inference", "/cohere",
						"/tokenize", "/detokenize" };
	bool guard = false;

	if (!s->opt.n_api_keys || !strcmp(r->method, "OPTIONS"))
		return true;
	for (size_t i = 0; i < sizeof(guarded) / sizeof(*guarded); i++)
		guard |= !strncmp(r->path, guarded[i], strlen(guarded[i]));
	if (!guard)
		return true;
	if (!r->authorization)
		return false;
	const char *sp = strchr(r->authorization, ' ');
	if (!sp || (size_t)(sp - r->authorization) != 6 ||
	    strncasecmp(r->authorization, "bearer", 6))
		return false;
	bool match = false;
	for (uint32_t i = 0; i < s->opt.n_api_keys; i++)
		match |= !strcmp(sp + 1, s->opt.api_keys[i]);
	return match;
}

static void on_request(void *ctx, struct sim_http_conn *conn, const struct sim_http_request *r)
{
	struct sim_server *s = ctx;
	struct sim_error err;
	bool get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");

	if (!authorized(s, r)) {
		/* vLLM's exact answer, not OpenAI's error shape */
		count_status(s, 401);
		sim_http_respond(conn, 401, "application/json", "", "{\"error\":\"Unauthorized\"}",
				 strlen("{\"error\":\"Unauthorized\"}"));
		return;
	}

	if (!strcmp(r->path, "/v1/chat/completions") || !strcmp(r->path, "/v1/completions") ||
	    !strcmp(r->path, "/v1/responses")) {
		if (post) {
			handle_completion(s, conn,
					  r->path[4] == 'r'   ? SIM_API_RESPONSES
					  : r->path[5] == 'h' ? SIM_API_CHAT
							      : SIM_API_COMPLETIONS,
					  r);
			return;
		}
	} else if (!strcmp(r->path, "/tokenize") || !strcmp(r->path, "/detokenize")) {
		if (post) {
			handle_tokenizer(s, conn, r->path[1] == 'd', r);
			return;
		}
	} else if (!strcmp(r->path, "/v1/models")) {
		if (get) {
			handle_models(s, conn);
			return;
		}
	} else if (!strcmp(r->path, "/version")) {
		if (get) {
			respond_json(s, conn, 200, "", strdup("{\"version\":\"" SIM_VERSION "\"}"));
			return;
		}
	} else if (!strcmp(r->path, "/health") || !strcmp(r->path, "/ping")) {
		if (get || (post && r->path[1] == 'p')) {
			count_status(s, 200);
			sim_http_respond(conn, 200, NULL, "", "", 0);
			return;
		}
	} else if (!strcmp(r->path, "/metrics")) {
		if (get) {
			handle_metrics(s, conn);
			return;
		}
	} else {
		sim_error_set(&err, 404, NULL, "%s %s: not found", r->method, r->path);
		respond_error(s, conn, &err);
		return;
	}
	sim_error_set(&err, 405, NULL, "%s is not allowed on %s", r->method, r->path);
	respond_error(s, conn, &err);
}

static void on_close(void *ctx, struct sim_http_conn *conn)
{
	struct job *j = sim_http_user(conn);

	(void)ctx;
	if (j) {
		j->conn = NULL;
		job_free(j); /* aborts its sequences, as vLLM does on disconnect */
	}
}

/* ---- lifecycle ------------------------------------------------------------------ */

struct sim_server *sim_server_new(struct fg_loop *loop, const struct sim_server_options *o,
				  const struct fg_cost_model *cm, char *err, size_t errlen)
{
	const char *why = sim_engine_config_check(&o->engine);
	if (why) {
		snprintf(err, errlen, "%s", why);
		return NULL;
	}
	struct sim_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->loop = loop;
	s->opt = *o;
	s->cm = *cm;
	s->real_origin_ns = fg_now_ns();
	s->engine = sim_engine_new(&o->engine, cm, on_engine_event, s);
	if (!s->engine) {
		snprintf(err, errlen, "cannot create the engine (out of memory?)");
		free(s);
		return NULL;
	}
	struct sim_http_callbacks cb = { .on_request = on_request, .on_close = on_close };
	s->http = sim_http_listen(loop, o->host, o->port, o->max_body, &cb, s, err, errlen);
	if (!s->http) {
		sim_engine_free(s->engine);
		free(s);
		return NULL;
	}
	return s;
}

void sim_server_free(struct sim_server *s)
{
	if (!s)
		return;
	if (s->step_timer)
		fg_loop_timer_cancel(s->loop, s->step_timer);
	s->closing = true;
	sim_http_free(s->http);  /* closes connections, which frees their jobs */
	sim_engine_free(s->engine);
	free(s);
}

uint16_t sim_server_port(const struct sim_server *s)
{
	return sim_http_port(s->http);
}
