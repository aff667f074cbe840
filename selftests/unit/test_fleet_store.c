/* test_fleet_store.c — the fleet bucket's rules as Redis runs them:
 * agent/fleet/fleet_store.lua through the grant thread (agent/fleet/fleet_client.c)
 * against a redis-server this test starts on a unix socket in a temp dir
 * (no persistence, killed by PID at the end). A fresh bucket, shares by
 * demand that never add up past the contract, a retried call answered
 * once, reports charged only in their epoch, a lost store recreated empty
 * and relearning, a silent node's fallback reserved (an idle one's only
 * its floor), a snapshot restore noticed by sequence, clean leaves, the
 * fleet-wide peak windows, and the bound: three greedy nodes running the
 * node-side rules (policy/fleet_grant.c) in real time never admit more
 * than one bucket of the contract plus the per-node terms. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/fleet/fleet_client.h"
#include "policy/fleet_grant.h"

#define T_S 0.1 /* the period: short, so 2T of silence is 0.2 s of real time */

static char dir[64], sock[128];
static pid_t redis_pid;
static int skip_all;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static redisContext *admin(void)
{
	struct timeval tv = { 1, 0 };
	return redisConnectUnixWithTimeout(sock, tv);
}

static int start_redis(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fgt-fleet-store.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/redis.sock", dir);
	redis_pid = fork();
	if (redis_pid == 0) {
		char log[128];
		snprintf(log, sizeof(log), "%s/redis.log", dir);
		/* in its temp dir with no pidfile: nothing lands in the tree */
		if (!freopen(log, "w", stdout) || !freopen(log, "a", stderr) || chdir(dir))
			_exit(126);
		execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock,
		       "--save", "", "--appendonly", "no", "--dir", dir, "--pidfile", "",
		       (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		redisContext *c = admin();
		if (c && !c->err) {
			redisFree(c);
			return 0;
		}
		if (c)
			redisFree(c);
		int st;
		if (waitpid(redis_pid, &st, WNOHANG) == redis_pid) {
			redis_pid = 0;
			skip_all = 1; /* no redis-server here */
			return 0;
		}
		sleep_s(0.05);
	}
	return -1;
}

static int stop_redis(void **state)
{
	(void)state;
	if (redis_pid > 0) {
		kill(redis_pid, SIGKILL);
		waitpid(redis_pid, NULL, 0);
	}
	char path[160];
	snprintf(path, sizeof(path), "%s/redis.log", dir);
	unlink(path);
	unlink(sock);
	rmdir(dir);
	return 0;
}

static void flush(void)
{
	redisContext *c = admin();
	freeReplyObject(redisCommand(c, "FLUSHALL"));
	redisFree(c);
}

/* a field of the tenant's bucket hash, as a number */
static double bucket_field(const char *tenant, const char *field)
{
	redisContext *c = admin();
	redisReply *r = redisCommand(c, "HGET fg:{%s}:b %s", tenant, field);
	double v = r && r->type == REDIS_REPLY_STRING ? strtod(r->str, NULL) : NAN;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

struct node {
	struct fg_fleet_client *client;
	int efd;
	char name[16];
};

static void node_start(struct node *n, const char *name)
{
	struct fg_fleet_cfg cfg = { .enabled = true, .period_s = T_S, .buffer_s = 0.1,
				    .node_timeout_s = 5, .call_timeout_s = 0.5 };
	char err[256], inc[24];

	snprintf(cfg.redis_unix, sizeof(cfg.redis_unix), "%s", sock);
	snprintf(n->name, sizeof(n->name), "%s", name);
	snprintf(inc, sizeof(inc), "inc-%s-%d", name, rand());
	n->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	n->client = fg_fleet_client_start(&cfg, name, inc, NULL, n->efd, err, sizeof(err));
	assert_non_null(n->client);
}

static void node_stop(struct node *n)
{
	fg_fleet_client_stop(n->client);
	close(n->efd);
}

static const struct fg_fleet_params P = {
	.rate = 1000, .depth = 2000, .floor = 0, .period_s = T_S, .buffer_s = 0.1,
	.node_timeout_s = 5,
};

/* One fg_grant, synchronously; the answer in *a. */
static bool grant(struct node *n, const char *tenant, const struct fg_fleet_call *call,
		  struct fg_fleet_answer *a, struct fg_fleet_req *out)
{
	static struct fg_fleet_req req;
	struct fg_fleet_batch b = { .n = 1, .reqs = &req };

	memset(&req, 0, sizeof(req));
	snprintf(req.tenant, sizeof(req.tenant), "%s", tenant);
	req.params = P;
	req.call = *call;
	assert_true(fg_fleet_client_submit(n->client, &b));
	assert_true(fg_fleet_client_wait(n->client, 3000000000ull));
	assert_ptr_equal(fg_fleet_client_take(n->client), &b);
	uint64_t v;
	if (read(n->efd, &v, sizeof(v)) < 0) { /* consumed */ }
	if (a)
		*a = req.ans;
	if (out)
		*out = req;
	return b.connected && req.ok;
}

static struct fg_fleet_call mkcall(uint64_t seq, const char *epoch, double demand, double want)
{
	struct fg_fleet_call c = { .seq = seq, .demand = demand, .want = want, .ttl_s = 60,
				   .rate_now = 1 };
	snprintf(c.epoch, sizeof(c.epoch), "%s", epoch);
	return c;
}

/* Most cases need one node on an empty store: started before, stopped after
 * (also when an assertion fails mid-test). */
static struct node node_a;

static int one_node_up(void **state)
{
	*state = &node_a;
	if (!skip_all) {
		flush();
		node_start(&node_a, "a");
	}
	return 0;
}

static int one_node_down(void **state)
{
	(void)state;
	if (!skip_all)
		node_stop(&node_a);
	return 0;
}

#define SKIP_WITHOUT_REDIS() do { if (skip_all) { skip(); return; } } while (0)

static void fresh_bucket_is_full(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	struct fg_fleet_answer ans;

	struct fg_fleet_call c = mkcall(1, "", 0, 500);
	assert_true(grant(a, "t1", &c, &ans, NULL));
	assert_true(ans.epoch[0] != 0);
	assert_true(fabs(ans.units - 500) < 1e-6);  /* a full bucket grants at once */
	assert_true(ans.rate >= P.rate - 1e-6);      /* alone: the whole contract's rate */
	assert_true(fabs(ans.fleet_level - 1500) < 1);
	assert_int_equal(ans.live_nodes, 1);
	assert_false(ans.learning);
	/* an idle node keeps only a sliver of the rate */
	c = mkcall(2, ans.epoch, 0, 0);
	c.idle = true;
	assert_true(grant(a, "t1", &c, &ans, NULL));
	assert_true(fabs(ans.rate - FG_FLEET_MIN_SHARE * P.rate) < 1e-9);
}

static void shares_follow_demand_within_the_contract(void **state)
{
	(void)state;
	SKIP_WITHOUT_REDIS();
	struct node n[3];
	const double demand[3] = { 800, 100, 100 };
	double rate[3] = { 0 };
	char epoch[FG_FLEET_EPOCH_MAX] = "";
	struct fg_fleet_answer ans;

	flush();
	for (int i = 0; i < 3; i++) {
		char name[4] = { (char)('a' + i), 0 };
		node_start(&n[i], name);
	}
	for (int round = 1; round <= 4; round++) {
		for (int i = 0; i < 3; i++) {
			struct fg_fleet_call c = mkcall((uint64_t)round, epoch, demand[i], 0);
			assert_true(grant(&n[i], "t2", &c, &ans, NULL));
			snprintf(epoch, sizeof(epoch), "%s", ans.epoch);
			rate[i] = ans.rate;
			/* at every answer the leases in force never pass the contract */
			double sum = rate[0] + rate[1] + rate[2];
			if (sum > P.rate * (1 + 3 * FG_FLEET_MIN_SHARE) + 1e-6) {
				print_error("round %d node %d: leases sum to %.3f\n", round, i, sum);
				fail();
			}
		}
	}
	for (int i = 0; i < 3; i++)
		if (fabs(rate[i] - P.rate * demand[i] / 1000) > 0.03 * P.rate) {
			print_error("node %d: rate %.1f, want ~%.1f\n", i, rate[i], P.rate * demand[i] / 1000);
			fail();
		}
	for (int i = 0; i < 3; i++)
		node_stop(&n[i]);
}

static void a_retried_call_is_answered_once(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	struct fg_fleet_answer first, again;

	struct fg_fleet_call c = mkcall(1, "", 100, 300);
	assert_true(grant(a, "t3", &c, &first, NULL));
	c = mkcall(2, first.epoch, 100, 300);
	c.refill = 50;
	assert_true(grant(a, "t3", &c, &first, NULL));
	double charged = bucket_field("t3", "charged");
	assert_true(fabs(charged - (300 + 50 + 300)) < 1e-6); /* units, refill, units */
	/* the answer was lost: the same call again */
	assert_true(grant(a, "t3", &c, &again, NULL));
	assert_true(again.replayed);
	assert_true(again.units == first.units && again.rate == first.rate);
	assert_true(fabs(bucket_field("t3", "charged") - charged) < 1e-9);
}

static void reports_charge_only_their_epoch(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	struct fg_fleet_answer ans;

	/* the call that creates the bucket reports refill from before it */
	struct fg_fleet_call c = mkcall(1, "", 100, 0);
	c.refill = 400;
	assert_true(grant(a, "t4", &c, &ans, NULL));
	assert_true(fabs(bucket_field("t4", "charged")) < 1e-9);
	c = mkcall(2, "some-other-epoch", 100, 0);
	c.refill = 400;
	assert_true(grant(a, "t4", &c, &ans, NULL));
	assert_true(fabs(bucket_field("t4", "charged")) < 1e-9);
	c = mkcall(3, ans.epoch, 100, 0);
	c.refill = 400;
	assert_true(grant(a, "t4", &c, &ans, NULL));
	assert_true(fabs(bucket_field("t4", "charged") - 400) < 1e-9);
}

static void a_lost_store_relearns_without_burst(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	struct fg_fleet_answer ans;

	struct fg_fleet_call c = mkcall(1, "", 100, 0);
	assert_true(grant(a, "t5", &c, &ans, NULL));
	char old[FG_FLEET_EPOCH_MAX];
	snprintf(old, sizeof(old), "%s", ans.epoch);
	flush(); /* Redis restarted without persistence */
	c = mkcall(2, old, 100, 1500);
	c.rate_now = 333;
	uint64_t t0 = mono_ns(); /* the bucket is recreated within this call */
	assert_true(grant(a, "t5", &c, &ans, NULL));
	assert_true(ans.recreated && ans.learning);
	assert_string_not_equal(ans.epoch, old);
	assert_true(ans.units == 0);                 /* no burst while it learns */
	assert_true(fabs(ans.rate - 333) < 1e-6);    /* the rate the node reports */
	assert_true(ans.fleet_level <= 1e-6);        /* recreated empty */
	assert_int_equal(ans.recoveries, 1);
	sleep_s(2.5 * T_S);
	c = mkcall(3, ans.epoch, 100, 1500);
	assert_true(grant(a, "t5", &c, &ans, NULL));
	double since_s = (double)(mono_ns() - t0) / 1e9;
	assert_false(ans.learning);
	/* only what refilled since it was recreated empty (bounded by the time
	 * measured, so a slow machine does not read as a burst), never the depth */
	assert_true(ans.units <= P.rate * since_s + 1e-6);
	assert_true(ans.units < 0.5 * P.depth);
}

static void a_silent_node_keeps_its_fallback(void **state)
{
	(void)state;
	SKIP_WITHOUT_REDIS();
	struct node a, b;
	struct fg_fleet_answer ans;
	struct fg_fleet_req req;
	char epoch[FG_FLEET_EPOCH_MAX];

	flush();
	node_start(&a, "a");
	node_start(&b, "b");
	struct fg_fleet_call c = mkcall(1, "", 500, 0);
	assert_true(grant(&a, "t6", &c, &ans, NULL));
	snprintf(epoch, sizeof(epoch), "%s", ans.epoch);
	c = mkcall(1, epoch, 500, 0);
	assert_true(grant(&b, "t6", &c, &ans, NULL));
	/* b goes silent, busy: after 2T it runs at contract / 2; a may not have it */
	sleep_s(2.5 * T_S);
	c = mkcall(2, epoch, 5000, 0);
	assert_true(grant(&a, "t6", &c, &ans, &req));
	assert_true(ans.rate <= P.rate / 2 + 1e-6);
	assert_int_equal(req.n_peers, 1);
	assert_string_equal(req.peers[0].state, "fallback");
	assert_true(fabs(req.peers[0].rate - P.rate / 2) < 1e-6);
	/* b said it was idle before going silent: only its floor is kept */
	c = mkcall(2, epoch, 0, 0);
	c.idle = true;
	assert_true(grant(&b, "t6", &c, &ans, NULL));
	sleep_s(2.5 * T_S);
	c = mkcall(3, epoch, 5000, 0);
	assert_true(grant(&a, "t6", &c, &ans, &req));
	assert_string_equal(req.peers[0].state, "idle");
	assert_true(ans.rate >= P.rate * (1 - 2 * FG_FLEET_MIN_SHARE) - 1e-6);
	/* b leaves: its record goes */
	struct fg_fleet_batch lb = { .n = 1, .reqs = &req, .leave = true };
	snprintf(req.tenant, sizeof(req.tenant), "t6");
	assert_true(fg_fleet_client_submit(b.client, &lb));
	assert_true(fg_fleet_client_wait(b.client, 3000000000ull));
	fg_fleet_client_take(b.client);
	c = mkcall(4, epoch, 5000, 0);
	assert_true(grant(&a, "t6", &c, &ans, &req));
	assert_int_equal(req.n_peers, 0);
	assert_int_equal(ans.live_nodes, 1);
	node_stop(&a);
	node_stop(&b);
}

static void a_restored_snapshot_is_noticed(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	struct fg_fleet_answer ans;

	struct fg_fleet_call c = mkcall(1, "", 100, 0);
	assert_true(grant(a, "t7", &c, &ans, NULL));
	for (uint64_t s = 2; s <= 3; s++) {
		c = mkcall(s, ans.epoch, 100, 0);
		assert_true(grant(a, "t7", &c, &ans, NULL));
	}
	/* the store comes back from a snapshot older than call 2: seq 4 follows
	 * a record at seq 1 */
	redisContext *r = admin();
	redisReply *rec = redisCommand(r, "HGET fg:{t7}:n a");
	assert_true(rec && rec->type == REDIS_REPLY_STRING);
	char inc[40];
	assert_int_equal(sscanf(rec->str, "%39s", inc), 1);
	char rest[256];
	const char *p = strchr(strchr(rec->str, ' ') + 1, ' '); /* after "inc seq" */
	snprintf(rest, sizeof(rest), "%s 1%s", inc, p);
	freeReplyObject(redisCommand(r, "HSET fg:{t7}:n a %s", rest));
	freeReplyObject(rec);
	redisFree(r);
	c = mkcall(4, ans.epoch, 100, 1000);
	assert_true(grant(a, "t7", &c, &ans, NULL));
	assert_int_equal(ans.recoveries, 1);
	assert_true(ans.learning && ans.units == 0);
	assert_true(ans.fleet_level < 20); /* no surplus kept: what refilled since the last call, ms */
}

/* One report answered, then past the 0.3 s window it fell in. */
static void report_then_next_window(struct node *a, struct fg_fleet_batch *b)
{
	assert_true(fg_fleet_client_submit(a->client, b));
	assert_true(fg_fleet_client_wait(a->client, 3000000000ull));
	fg_fleet_client_take(a->client);
	assert_true(b->report.ok);
	sleep_s(0.31);
}

static void peaks_fleet_wide(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	char tenants[2][FG_NAME_MAX] = { "x", "y" };
	double units[2], peak[2];
	struct fg_fleet_batch b = { 0 };

	b.report = (struct fg_fleet_report){ .send = true, .window_s = 0.3, .node_timeout_s = 5,
					     .n = 2, .tenant = tenants, .units = units, .peak = peak };
	/* x peaks in one window, y in the next: each tenant's peak is 100 units
	 * / 0.3 s; the fleet's never more than one of them */
	double plan[3][2] = { { 30, 0 }, { 0, 30 }, { 0, 0 } };
	for (int w = 0; w < 3; w++) {
		units[0] = plan[w][0];
		units[1] = plan[w][1];
		b.report.seq = (uint64_t)w + 1;
		report_then_next_window(a, &b);
	}
	assert_int_equal(b.report.live_nodes, 1);
	assert_true(b.report.windows_closed >= 2);
	assert_true(fabs(b.report.fleet_peak - 100) < 1e-6);
	assert_true(fabs(b.report.sum_tenant_peaks - 200) < 1e-6);
	assert_true(fabs(peak[0] - 100) < 1e-6 && fabs(peak[1] - 100) < 1e-6);
	/* a retried report is not counted twice */
	units[0] = 30;
	units[1] = 0;
	assert_true(fg_fleet_client_submit(a->client, &b));
	assert_true(fg_fleet_client_wait(a->client, 3000000000ull));
	fg_fleet_client_take(a->client);
	assert_true(fabs(b.report.sum_tenant_peaks - 200) < 1e-6);
}

/* A node reports only the tenants that billed since its last report: x
 * bills in the first window and goes quiet, y keeps billing a little. When
 * the fleet's first window closes, x's closes with it, so the sum of the
 * tenants' peaks never falls under the fleet's peak (a ratio under 1 was
 * what e2e_fleet_share caught when its load ended). */
static void a_quiet_tenants_window_closes_with_the_fleets(void **state)
{
	SKIP_WITHOUT_REDIS();
	struct node *a = *state;
	char tenants[2][FG_NAME_MAX] = { "x", "y" };
	double units[2] = { 30, 30 }, peak[2];
	struct fg_fleet_batch b = { 0 };

	b.report = (struct fg_fleet_report){ .send = true, .window_s = 0.3, .node_timeout_s = 5,
					     .n = 2, .tenant = tenants, .units = units, .peak = peak };
	for (int w = 0; w < 3; w++) {
		if (w > 0) { /* x quiet: only y is in the report */
			units[1] = 3;
			b.report.n = 1;
			b.report.tenant = &tenants[1];
			b.report.units = &units[1];
		}
		b.report.seq = (uint64_t)w + 1;
		report_then_next_window(a, &b);
	}
	assert_true(b.report.windows_closed >= 2);
	assert_true(fabs(b.report.fleet_peak - 200) < 1e-6);            /* 60 units / 0.3 s */
	assert_true(fabs(b.report.sum_tenant_peaks - 200) < 1e-6);      /* x 100 + y 100 */
	assert_true(b.report.sum_tenant_peaks >= b.report.fleet_peak - 1e-9);
}

/* Three nodes that admit everything their bucket holds, as fast as they
 * can, each running the node-side rules against the real store: over the
 * run the fleet admits at most one bucket of the contract (depth + rate x
 * time) plus the per-node slivers, and, with demand far above it, nearly
 * all of it. One node is far busier than the others. */
static void greedy_nodes_stay_within_the_bound(void **state)
{
	(void)state;
	SKIP_WITHOUT_REDIS();
	struct node n[3];
	struct fg_bucket b[3];
	struct fg_fleet_tenant ft[3];
	struct fg_fleet_books bk[3];
	struct fg_fleet_req req[3];
	const double cost = 20;                /* every request 20 units */
	const double appetite[3] = { 8, 1, 1 };/* requests tried per tick */
	double admitted = 0;

	flush();
	uint64_t t0 = mono_ns();
	for (int i = 0; i < 3; i++) {
		char name[4] = { (char)('a' + i), 0 };
		node_start(&n[i], name);
		memset(&bk[i], 0, sizeof(bk[i]));
		bk[i].typical_cost = cost;
		fg_bucket_init(&b[i], P.rate, P.depth, t0);
		b[i].level = 0;
		fg_fleet_tenant_init(&ft[i], &b[i], &bk[i], t0);
		fg_fleet_shape(&ft[i], &b[i], &P, cost, t0);
	}
	double run_s = 3;
	uint64_t end = t0 + (uint64_t)(run_s * 1e9);
	struct fg_fleet_batch batch[3];
	bool out[3] = { false };
	while (mono_ns() < end) {
		uint64_t now = mono_ns();
		for (int i = 0; i < 3; i++) {
			if (out[i] && fg_fleet_client_take(n[i].client)) {
				out[i] = false;
				now = mono_ns();
				if (batch[i].connected && req[i].ok)
					fg_fleet_apply(&ft[i], &b[i], &P, &bk[i], &req[i].ans, now);
				else
					fg_fleet_failed(&ft[i], now);
			}
			for (double k = 0; k < appetite[i]; k++) {
				if (fg_bucket_reserve(&b[i], cost, now)) {
					bk[i].consumed += cost;
					bk[i].billed += cost;
					admitted += cost;
				} else {
					bk[i].refused += cost;
					bk[i].refused_peak = cost;
				}
			}
			fg_fleet_observe(&ft[i], &b[i], &P, &bk[i], now);
			bk[i].refused_peak = 0;
			fg_fleet_shape(&ft[i], &b[i], &P, cost, now);
			if (!out[i] && fg_fleet_due(&ft[i], &b[i], &P, cost, now)) {
				memset(&req[i], 0, sizeof(req[i]));
				snprintf(req[i].tenant, sizeof(req[i].tenant), "greedy");
				req[i].params = P;
				req[i].call = *fg_fleet_prepare(&ft[i], &b[i], &P, &bk[i], now);
				batch[i] = (struct fg_fleet_batch){ .n = 1, .reqs = &req[i] };
				out[i] = fg_fleet_client_submit(n[i].client, &batch[i]);
			}
		}
		sleep_s(0.002);
	}
	double secs = (double)(mono_ns() - t0) / 1e9;
	double bound = fg_fleet_bound_units(&P, 3, secs, 0);
	print_message("greedy: %.0f units admitted in %.2f s; bound %.0f, one bucket %.0f\n",
		      admitted, secs, bound, P.depth + P.rate * secs);
	assert_true(admitted <= bound);
	assert_true(admitted >= 0.9 * (P.depth + P.rate * secs));
	for (int i = 0; i < 3; i++) {
		if (out[i])
			fg_fleet_client_wait(n[i].client, 3000000000ull);
		node_stop(&n[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(fresh_bucket_is_full, one_node_up, one_node_down),
		cmocka_unit_test(shares_follow_demand_within_the_contract),
		cmocka_unit_test_setup_teardown(a_retried_call_is_answered_once, one_node_up, one_node_down),
		cmocka_unit_test_setup_teardown(reports_charge_only_their_epoch, one_node_up, one_node_down),
		cmocka_unit_test_setup_teardown(a_lost_store_relearns_without_burst, one_node_up, one_node_down),
		cmocka_unit_test(a_silent_node_keeps_its_fallback),
		cmocka_unit_test_setup_teardown(a_restored_snapshot_is_noticed, one_node_up, one_node_down),
		cmocka_unit_test_setup_teardown(peaks_fleet_wide, one_node_up, one_node_down),
		cmocka_unit_test_setup_teardown(a_quiet_tenants_window_closes_with_the_fleets, one_node_up,
						one_node_down),
		cmocka_unit_test(greedy_nodes_stay_within_the_bound),
	};
	return cmocka_run_group_tests_name("fleet_store", tests, start_redis, stop_redis);
}
