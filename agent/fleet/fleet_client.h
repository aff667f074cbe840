/* fleet_client.h — the grant thread: the only code that talks to Redis.
 *
 * hiredis' blocking API on a thread of its own, so no Redis round trip is
 * ever on the request path: agent/fleet/fleet.c hands it a batch (one fg_grant
 * per tenant due, one fg_report), the thread pipelines them as FCALLs on
 * one connection and writes the notify fd when the answers are in. One
 * batch at a time; the glue does not touch a batch while the thread has it.
 *
 * The connection is made lazily and again after any failure (connect,
 * AUTH, FUNCTION LOAD REPLACE of agent/fleet/fleet_store.lua, which every
 * connect does so a restarted Redis gets the library back); every read
 * and write is bounded by agent.fleet.call_timeout_s, so a Redis that
 * stops answering costs a batch that long, never the proxy. */
#ifndef FAIRGATE_FLEET_CLIENT_H
#define FAIRGATE_FLEET_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/fleet_grant.h"
#include "policy/policy.h"

#define FG_FLEET_VIEW_MAX 16 /* other nodes' figures kept per tenant, for display */

/* Another node's record for a tenant, as the store sees it. */
struct fg_fleet_peer {
	char node[FG_FLEET_NODE_MAX];
	double demand, rate, age_ms;
	char state[12];           /* lease | fallback | idle */
};

struct fg_fleet_req {
	char tenant[FG_NAME_MAX];
	struct fg_fleet_params params;
	struct fg_fleet_call call;
	/* filled by the thread */
	bool ok;
	struct fg_fleet_answer ans;
	uint32_t n_peers;         /* more than FG_FLEET_VIEW_MAX are counted, not kept */
	struct fg_fleet_peer peers[FG_FLEET_VIEW_MAX];
};

/* The fleet-wide report: billed units per tenant since the last answered
 * one, into the store's peak windows. Resent unchanged until answered. */
struct fg_fleet_report {
	bool send;
	uint64_t seq;
	double window_s, node_timeout_s;
	uint32_t n;
	char (*tenant)[FG_NAME_MAX];
	double *units;
	/* filled by the thread */
	bool ok;
	uint32_t live_nodes, windows_closed;
	double fleet_peak, fleet_last, sum_tenant_peaks;
	double *peak;             /* per tenant of this report, n entries */
};

struct fg_fleet_batch {
	uint32_t n;
	struct fg_fleet_req *reqs;
	struct fg_fleet_report report;
	bool leave;               /* shutting down: fg_leave for every tenant in reqs */
	/* filled by the thread */
	bool connected;           /* the store answered this batch */
	double seconds;           /* wall time the thread spent on it */
	char error[256];          /* why not, when !connected */
};

struct fg_fleet_client_stats {
	uint64_t batches, calls, call_errors, connects, connect_failures;
	double busy_s;            /* thread time spent on batches (CLOCK_THREAD_CPUTIME_ID) */
	bool connected;
};

struct fg_fleet_client;

/* node and incarnation name this process in every call; notify_fd (an
 * eventfd) is written once per finished batch. The library text is loaded
 * on every connect. */
struct fg_fleet_client *fg_fleet_client_start(const struct fg_fleet_cfg *cfg, const char *node,
					      const char *incarnation, const char *password,
					      int notify_fd, char *err, size_t errlen);
/* Give the thread a batch; false if it still has one. */
bool fg_fleet_client_submit(struct fg_fleet_client *c, struct fg_fleet_batch *b);
/* The finished batch, if any (the caller owns it again). */
struct fg_fleet_batch *fg_fleet_client_take(struct fg_fleet_client *c);
/* Wait up to timeout_ns for the batch in flight to finish; true if it did. */
bool fg_fleet_client_wait(struct fg_fleet_client *c, uint64_t timeout_ns);
void fg_fleet_client_stats(struct fg_fleet_client *c, struct fg_fleet_client_stats *out);
/* Stops and joins the thread (after at most the batch in flight). */
void fg_fleet_client_stop(struct fg_fleet_client *c);

/* The library agent/fleet/fleet_store.lua, embedded at build time (fleet_lua.c). */
extern const char fg_fleet_lua[];
extern const unsigned int fg_fleet_lua_len;

#endif
