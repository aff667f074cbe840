/* fleet_client.c — the grant thread and its Redis calls; see fleet_client.h. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent/fleet/fleet_client.h"

#define GRANT_ARGS 18  /* fg_grant's ARGV, agent/fleet/fleet_store.lua */
#define GRANT_ANSWER 14 /* fields before the per-node details */

struct fg_fleet_client {
	struct fg_fleet_cfg cfg;
	char node[FG_FLEET_NODE_MAX];
	char inc[40];
	char *password;
	int notify_fd;
	pthread_t thread;
	bool started;

	pthread_mutex_t mu;
	pthread_cond_t cv;        /* work arrived / stop / a batch finished */
	struct fg_fleet_batch *todo, *done;
	bool stop;
	struct fg_fleet_client_stats stats;

	/* the thread's own */
	redisContext *rc;
};

static struct timeval tv_of(double s)
{
	struct timeval tv = { .tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - (double)(time_t)s) * 1e6) };
	return tv;
}

static double mono_s(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void drop_connection(struct fg_fleet_client *c)
{
	if (c->rc)
		redisFree(c->rc);
	c->rc = NULL;
}

/* A reply element as a number: bulk strings ("%.17g" from the library) and
 * integers; anything else is NaN. */
static double rnum(const redisReply *r)
{
	if (!r)
		return NAN;
	if (r->type == REDIS_REPLY_INTEGER)
		return (double)r->integer;
	if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
		char *end;
		double v = strtod(r->str, &end);
		return end != r->str ? v : NAN;
	}
	return NAN;
}

static void rstr(const redisReply *r, char *out, size_t len)
{
	out[0] = 0;
	if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
		snprintf(out, len, "%.*s", (int)r->len, r->str);
}

static double finite_or(double v, double dflt)
{
	return isfinite(v) ? v : dflt;
}

static bool simple_ok(redisReply *r)
{
	return r && r->type != REDIS_REPLY_ERROR;
}

/* Connect, authenticate, load the library. 0, or -1 with err. */
static int ensure_connected(struct fg_fleet_client *c, char *err, size_t errlen)
{
	struct timeval tv = tv_of(c->cfg.call_timeout_s);

	if (c->rc)
		return 0;
	c->stats.connects++;
	c->rc = c->cfg.redis_unix[0] ? redisConnectUnixWithTimeout(c->cfg.redis_unix, tv)
				     : redisConnectWithTimeout(c->cfg.redis_host, c->cfg.redis_port, tv);
	if (!c->rc || c->rc->err) {
		const char *why = c->rc ? c->rc->errstr : "out of memory";
		if (c->cfg.redis_unix[0])
			snprintf(err, errlen, "connect %.160s: %.80s", c->cfg.redis_unix, why);
		else
			snprintf(err, errlen, "connect %s:%u: %s", c->cfg.redis_host, c->cfg.redis_port,
				 why);
		goto fail;
	}
	redisSetTimeout(c->rc, tv);
	if (!c->cfg.redis_unix[0])
		redisEnableKeepAlive(c->rc);
	if (c->password) {
		const char *argv[] = { "AUTH", c->password };
		redisReply *r = redisCommandArgv(c->rc, 2, argv, NULL);
		if (!simple_ok(r)) {
			snprintf(err, errlen, "AUTH: %s", r ? r->str : c->rc->errstr);
			freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	const char *argv[] = { "FUNCTION", "LOAD", "REPLACE", fg_fleet_lua };
	size_t lens[] = { 8, 4, 7, fg_fleet_lua_len };
	redisReply *r = redisCommandArgv(c->rc, 4, argv, lens);
	if (!simple_ok(r)) {
		snprintf(err, errlen, "FUNCTION LOAD: %s (Redis 7 or later is needed)",
			 r ? r->str : c->rc->errstr);
		freeReplyObject(r);
		goto fail;
	}
	freeReplyObject(r);
	return 0;
fail:
	c->stats.connect_failures++;
	drop_connection(c);
	return -1;
}

static void key(char *out, size_t len, const char *tag, const char *suffix)
{
	snprintf(out, len, "fg:{%s}:%s", tag, suffix);
}

/* FCALL fn K <K keys of one hash tag, one per letter of suffix> node
 * incarnation: the head every call of fleet_store.lua takes; returns how
 * many arguments it wrote. */
enum { FCALL_KEYS_MAX = 4, FCALL_HEAD_MAX = 5 + FCALL_KEYS_MAX };

static uint32_t fcall_head(const char **argv, char k[FCALL_KEYS_MAX][FG_NAME_MAX + 16],
			   const struct fg_fleet_client *c, const char *fn, const char *tag,
			   const char *suffix)
{
	static const char *const counts[] = { "0", "1", "2", "3", "4" };
	uint32_t nk = (uint32_t)strlen(suffix), n = 0;

	argv[n++] = "FCALL";
	argv[n++] = fn;
	argv[n++] = counts[nk];
	for (uint32_t i = 0; i < nk; i++) {
		char s[2] = { suffix[i], 0 };
		key(k[i], FG_NAME_MAX + 16, tag, s);
		argv[n++] = k[i];
	}
	argv[n++] = c->node;
	argv[n++] = c->inc;
	return n;
}

static void append_grant(struct fg_fleet_client *c, const struct fg_fleet_req *q)
{
	char k[FCALL_KEYS_MAX][FG_NAME_MAX + 16], num[GRANT_ARGS][40];
	const char *argv[FCALL_HEAD_MAX + GRANT_ARGS];
	const struct fg_fleet_call *x = &q->call;
	const struct fg_fleet_params *p = &q->params;
	double v[] = { p->rate, p->depth, p->period_s, p->node_timeout_s, p->floor,
		       FG_FLEET_MIN_SHARE, x->demand, x->rate_now, x->refill, x->usage,
		       x->want, x->has };
	int n = (int)fcall_head(argv, k, c, "fg_grant", q->tenant, "bna");

	snprintf(num[0], sizeof(num[0]), "%llu", (unsigned long long)x->seq);
	argv[n++] = num[0];
	argv[n++] = x->epoch;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		snprintf(num[1 + i], sizeof(num[0]), "%.17g", isfinite(v[i]) ? v[i] : 0);
		argv[n++] = num[1 + i];
	}
	argv[n++] = x->idle ? "1" : "0";
	snprintf(num[14], sizeof(num[0]), "%.17g", x->ttl_s);
	argv[n++] = num[14];
	redisAppendCommandArgv(c->rc, n, argv, NULL);
}

static void append_leave(struct fg_fleet_client *c, const struct fg_fleet_req *q)
{
	char k[FCALL_KEYS_MAX][FG_NAME_MAX + 16];
	const char *argv[FCALL_HEAD_MAX];

	redisAppendCommandArgv(c->rc, fcall_head(argv, k, c, "fg_leave", q->tenant, "bna"), argv,
			       NULL);
}

static void append_report(struct fg_fleet_client *c, const struct fg_fleet_report *rp)
{
	uint32_t argc = FCALL_HEAD_MAX + 3 + 2 * rp->n; /* head, seq W X, pairs */
	const char **argv = calloc(argc + 1, sizeof(*argv));
	char (*nums)[40] = calloc(rp->n + 3, sizeof(*nums));
	char k[FCALL_KEYS_MAX][FG_NAME_MAX + 16];

	if (!argv || !nums) {
		free(argv);
		free(nums);
		redisAppendCommand(c->rc, "PING"); /* keeps the replies in step; read as an error */
		return;
	}
	uint32_t n = fcall_head(argv, k, c, "fg_report", "*fleet", "npao");
	snprintf(nums[0], sizeof(nums[0]), "%llu", (unsigned long long)rp->seq);
	snprintf(nums[1], sizeof(nums[0]), "%.17g", rp->window_s);
	snprintf(nums[2], sizeof(nums[0]), "%.17g", rp->node_timeout_s);
	argv[n++] = nums[0];
	argv[n++] = nums[1];
	argv[n++] = nums[2];
	for (uint32_t i = 0; i < rp->n; i++) {
		snprintf(nums[3 + i], sizeof(nums[0]), "%.17g", rp->units[i]);
		argv[n++] = rp->tenant[i];
		argv[n++] = nums[3 + i];
	}
	redisAppendCommandArgv(c->rc, (int)n, argv, NULL);
	free(argv);
	free(nums);
}

static bool read_grant(const redisReply *r, struct fg_fleet_req *q)
{
	struct fg_fleet_answer *a = &q->ans;

	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < GRANT_ANSWER)
		return false;
	redisReply **e = r->element;
	memset(a, 0, sizeof(*a));
	rstr(e[0], a->epoch, sizeof(a->epoch));
	a->rate = rnum(e[1]);
	a->units = rnum(e[2]);
	if (!a->epoch[0] || !isfinite(a->rate) || !isfinite(a->units))
		return false;
	a->fleet_level = finite_or(rnum(e[3]), 0);
	a->fleet_avail = finite_or(rnum(e[4]), 0);
	a->rate_eff = finite_or(rnum(e[5]), 0);
	double live = rnum(e[6]);
	a->live_nodes = isfinite(live) && live >= 1 ? (uint32_t)live : 1;
	a->learning = rnum(e[7]) == 1;
	a->replayed = rnum(e[8]) == 1;
	a->recreated = rnum(e[9]) == 1;
	a->demand_sum = finite_or(rnum(e[10]), 0);
	a->charged_total = finite_or(rnum(e[11]), 0);
	a->usage_total = finite_or(rnum(e[12]), 0);
	double rec = rnum(e[13]);
	a->recoveries = isfinite(rec) && rec > 0 ? (uint64_t)rec : 0;
	q->n_peers = 0;
	for (size_t i = GRANT_ANSWER; i < r->elements; i++) {
		char line[160];
		rstr(e[i], line, sizeof(line));
		if (q->n_peers < FG_FLEET_VIEW_MAX) {
			struct fg_fleet_peer *pe = &q->peers[q->n_peers];
			if (sscanf(line, "%63s %lf %lf %lf %11s", pe->node, &pe->demand, &pe->rate,
				   &pe->age_ms, pe->state) != 5)
				continue;
		}
		q->n_peers++;
	}
	return true;
}

static bool read_report(const redisReply *r, struct fg_fleet_report *rp)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 5)
		return false;
	redisReply **e = r->element;
	double live = rnum(e[0]), closed = rnum(e[3]);
	rp->live_nodes = isfinite(live) && live > 0 ? (uint32_t)live : 0;
	rp->fleet_peak = finite_or(rnum(e[1]), 0);
	rp->fleet_last = finite_or(rnum(e[2]), 0);
	rp->windows_closed = isfinite(closed) && closed > 0 ? (uint32_t)closed : 0;
	rp->sum_tenant_peaks = finite_or(rnum(e[4]), 0);
	for (uint32_t i = 0; i < rp->n; i++)
		rp->peak[i] = 0;
	for (size_t i = 5; i + 1 < r->elements; i += 2) {
		char name[FG_NAME_MAX];
		rstr(e[i], name, sizeof(name));
		for (uint32_t k = 0; k < rp->n; k++)
			if (!strcmp(rp->tenant[k], name))
				rp->peak[k] = finite_or(rnum(e[i + 1]), 0);
	}
	return true;
}

static void fail_all(struct fg_fleet_batch *b)
{
	for (uint32_t i = 0; i < b->n; i++)
		b->reqs[i].ok = false;
	b->report.ok = false;
	b->connected = false;
}

static void run_batch(struct fg_fleet_client *c, struct fg_fleet_batch *b)
{
	double t0 = mono_s(CLOCK_MONOTONIC), cpu0 = mono_s(CLOCK_THREAD_CPUTIME_ID);
	uint64_t calls = 0, errors = 0;

	fail_all(b);
	b->error[0] = 0;
	if (ensure_connected(c, b->error, sizeof(b->error)))
		goto out;
	for (uint32_t i = 0; i < b->n; i++) {
		if (b->leave)
			append_leave(c, &b->reqs[i]);
		else
			append_grant(c, &b->reqs[i]);
	}
	if (b->report.send && !b->leave)
		append_report(c, &b->report);
	bool io_ok = true, missing_lib = false;
	for (uint32_t i = 0; i < b->n + (b->report.send && !b->leave); i++) {
		redisReply *r = NULL;
		if (redisGetReply(c->rc, (void **)&r) != REDIS_OK) {
			snprintf(b->error, sizeof(b->error), "%s", c->rc->errstr[0] ? c->rc->errstr
											: "connection lost");
			io_ok = false;
			break;
		}
		calls++;
		if (r->type == REDIS_REPLY_ERROR) {
			errors++;
			snprintf(b->error, sizeof(b->error), "%s", r->str);
			/* a Redis that lost its functions (FUNCTION FLUSH) while we were
			 * connected: load them again on the next batch */
			if (strstr(r->str, "unction not found") || strstr(r->str, "NOSCRIPT"))
				missing_lib = true;
		} else if (i < b->n) {
			b->reqs[i].ok = b->leave ? true : read_grant(r, &b->reqs[i]);
			if (!b->reqs[i].ok && !b->error[0])
				snprintf(b->error, sizeof(b->error), "fg_grant: unexpected reply");
		} else {
			b->report.ok = read_report(r, &b->report);
		}
		freeReplyObject(r);
	}
	if (!io_ok || missing_lib)
		drop_connection(c);
	b->connected = io_ok && !missing_lib;
out:
	pthread_mutex_lock(&c->mu);
	c->stats.batches++;
	c->stats.calls += calls;
	c->stats.call_errors += errors + (b->connected ? 0 : 1);
	c->stats.busy_s += mono_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	c->stats.connected = c->rc != NULL;
	pthread_mutex_unlock(&c->mu);
	b->seconds = mono_s(CLOCK_MONOTONIC) - t0;
}

static void *thread_main(void *arg)
{
	struct fg_fleet_client *c = arg;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->todo && !c->stop)
			pthread_cond_wait(&c->cv, &c->mu);
		if (!c->todo)
			break; /* stop, nothing left to do */
		struct fg_fleet_batch *b = c->todo;
		pthread_mutex_unlock(&c->mu);
		run_batch(c, b);
		pthread_mutex_lock(&c->mu);
		c->todo = NULL;
		c->done = b;
		pthread_cond_broadcast(&c->cv);
		uint64_t one = 1;
		if (write(c->notify_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			perror("fairgated: fleet: notify");
		if (c->stop)
			break;
	}
	pthread_mutex_unlock(&c->mu);
	drop_connection(c);
	return NULL;
}

struct fg_fleet_client *fg_fleet_client_start(const struct fg_fleet_cfg *cfg, const char *node,
					      const char *incarnation, const char *password,
					      int notify_fd, char *err, size_t errlen)
{
	struct fg_fleet_client *c = calloc(1, sizeof(*c));

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	snprintf(c->node, sizeof(c->node), "%s", node);
	snprintf(c->inc, sizeof(c->inc), "%s", incarnation);
	c->password = password && password[0] ? strdup(password) : NULL;
	c->notify_fd = notify_fd;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	int e = pthread_create(&c->thread, NULL, thread_main, c);
	if (e) {
		snprintf(err, errlen, "cannot start the grant thread: %s", strerror(e));
		fg_fleet_client_stop(c);
		return NULL;
	}
	c->started = true;
	pthread_setname_np(c->thread, "fg-fleet");
	return c;
}

bool fg_fleet_client_submit(struct fg_fleet_client *c, struct fg_fleet_batch *b)
{
	bool ok;

	pthread_mutex_lock(&c->mu);
	ok = !c->todo && !c->done && !c->stop;
	if (ok) {
		c->todo = b;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return ok;
}

struct fg_fleet_batch *fg_fleet_client_take(struct fg_fleet_client *c)
{
	pthread_mutex_lock(&c->mu);
	struct fg_fleet_batch *b = c->done;
	c->done = NULL;
	pthread_mutex_unlock(&c->mu);
	return b;
}

bool fg_fleet_client_wait(struct fg_fleet_client *c, uint64_t timeout_ns)
{
	struct timespec ts;
	int e = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns;
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	pthread_mutex_lock(&c->mu);
	while (c->todo && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	bool done = !c->todo;
	pthread_mutex_unlock(&c->mu);
	return done;
}

void fg_fleet_client_stats(struct fg_fleet_client *c, struct fg_fleet_client_stats *out)
{
	pthread_mutex_lock(&c->mu);
	*out = c->stats;
	pthread_mutex_unlock(&c->mu);
}

void fg_fleet_client_stop(struct fg_fleet_client *c)
{
	if (!c)
		return;
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	if (c->password) {
		memset(c->password, 0, strlen(c->password));
		free(c->password);
	}
	free(c);
}
