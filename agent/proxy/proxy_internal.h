/* proxy_internal.h — the proxy's connections and exchanges, shared by
 * proxy.c (listeners, lifecycle, reload), proxy_client.c (the client side:
 * HTTP in, identity, admission, responses out), proxy_upstream.c (the
 * engine side: pools, forwarding, response relay), proxy_settle.c (the
 * end of every request) and proxy_sched.c (the gateway's clock: dispatch
 * pump, queue deadlines, the 1 s tick for overload, peaks and the engine's
 * metrics).
 *
 * One exchange per client connection at a time; pipelined requests wait in
 * the client's input buffer. Admission (fg_gw_admit in proxy_client.c) and
 * dispatch (fg_gw_dispatch in proxy_sched.c, then fg_proxy_dispatch) are
 * separate steps: the per-tenant fair queue sits between them. */
#ifndef FAIRGATE_PROXY_INTERNAL_H
#define FAIRGATE_PROXY_INTERNAL_H

#include <http_parser.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "agent/agent.h"
#include "lib/buf.h"
#include "lib/heap_give_back.h"
#include "lib/list.h"
#include "lib/listen.h"
#include "lib/secret_file.h"
#include "agent/http/http_headers.h"
#include "agent/http/engine_tokenize.h"
#include "agent/http/http_request.h"
#include "agent/http/http_sse.h"
#include "agent/proxy/calib_observer.h"
#include "agent/proxy/conn_limits.h"
#include "agent/proxy/metrics.h"
#include "agent/proxy/tenant_table.h"
#include "policy/policy_addr.h"
#include "policy/gateway.h"

#define FG_TENANT_HEADER "x-fairgate-tenant"
#define FG_ENGINE_AUTH_MAX (FG_SECRET_LINE_MAX + sizeof("Authorization: Bearer \r\n"))
#define FG_LINGER_NS 2000000000ull      /* drain a closing client this long */
#define FG_CONNECT_TIMEOUT_NS 5000000000ull
#define FG_POOL_IDLE_NS 30000000000ull  /* idle engine connections closed after */
#define FG_POOL_MAX_IDLE 512
/* The relay buffer to one client: the engine is not read while it holds
 * more than FG_OUT_HIGH, and is read again below FG_OUT_LOW; a client that
 * does not take it below FG_OUT_LOW within agent.timeouts.idle_s has its
 * request ended (proxy_upstream.c, end_held). */
#define FG_OUT_HIGH (256u << 10)
#define FG_OUT_LOW (64u << 10)
#define FG_PIPELINE_MAX (64u << 10)     /* buffered bytes of a next request */
/* What one read pass takes from a client before the parser consumes it:
 * a fast sender's bytes wait in its socket, not in the agent. */
#define FG_READ_AHEAD_MAX (256u << 10)
/* agent.limits.max_buffered_bytes when the policy leaves it out: this share
 * of the container's memory limit (the rest is the agent's baseline, its
 * maps, the rewritten copies and relay buffers, and the allocator's
 * slack), or a fixed budget when the agent runs under no limit. */
#define FG_BUFFERED_SHARE_OF_LIMIT 0.5
#define FG_BUFFERED_DEFAULT (256ull << 20)
#define FG_RESP_COPY_MAX (16u << 20)    /* non-stream body kept for usage */
#define FG_KEY_MEMO_MAX 128             /* longest bearer key a connection remembers */


struct fg_upstream;
struct fg_proxy;

enum fg_client_state {
	CL_READING = 0,   /* waiting for / parsing a request */
	CL_COUNTING,      /* waiting for the engine's /tokenize count before admission */
	CL_ADMITTED,      /* admitted, waiting in the gateway's fair queue */
	CL_UPSTREAM,      /* forwarded; relaying the response */
	CL_CLOSING,       /* flushing the last response, then lingering */
};

struct fg_exchange {
	bool started;             /* first byte of a request seen */
	bool headers_done, complete;
	uint32_t url, url_len;    /* offsets into hdrs.raw */
	struct fg_buf body;
	int reject_status;        /* set by parser callbacks: 413, 431... */
	bool heads_pending;       /* headers in, body to come: checked before it is read */
	uint64_t body_held;       /* bytes of body counted in px->buffered */
	/* a Content-Length body: its bytes the parser has not seen yet, and of
	 * those the ones read_input received straight into body's tail (past
	 * body.len, committed when the parser passes them to on_body) */
	uint64_t body_left;
	size_t body_fresh;
	bool want_continue;       /* Expect: 100-continue, answered once the key is known */
	uint64_t started_ns, decided_ns;

	enum fg_api api;
	struct fg_route route;    /* what the target names (policy/request_path) */
	struct fg_tenant_rt *tenant; /* referenced while set */
	struct fg_tokenize *tok;  /* the exact-count call under way, or NULL */
	uint64_t tok_started_ns;
	/* the engine's /tokenize counted this many prompt tokens: billed as
	 * a /tokenize if admission then refuses the request (an admitted one
	 * pays for its prompt) */
	uint64_t counted_tokens;
	struct fg_req_info info;
	struct fg_req_scan *scan; /* the body's check, read by read as it arrives, or NULL */
	struct fg_gw_request gwr; /* the gateway's request: price, queue, KV, window */
	bool reserved;            /* gwr is live in the gateway until settled */
	bool long_ctx;            /* goes to the long-context pool */
	bool json_body;           /* the body parsed: the rewrite applies to it */
	struct fg_fwd_body fwd;   /* the rewrite: its head and the ranges of body after it
				   * (fwd.head NULL: send body as it is) */

	struct fg_upstream *up;
	bool retried;

	/* response */
	int status;
	bool head_sent;           /* status line gone to the client: no more 502s */
	bool resp_chunked;        /* re-framed to the client as chunked */
	bool resp_until_close;    /* close-delimited to the client */
	bool resp_no_body;
	bool resp_done;
	bool sse;
	struct fg_sse sse_state;
	struct fg_buf resp_copy;
	bool resp_copy_overflow;
	uint64_t delivered_bytes;
	/* a stream the gateway ended at its first chunk: the engine's prompt
	 * count broke a limit the estimate had passed */
	bool cut_off;
	enum fg_outcome cut_outcome;
	char cut_code[32];
	char cut_reason[200];
	struct fg_pcal_req pcal;  /* what calibration follows of it at the engine */
	/* a whole answer's head read alone (upstream_recv): the gateway is
	 * told the engine is done with it once the lock is back */
	bool first_token_due;
	/* fg_exchange_read_usage ran: what the response body reported */
	bool usage_read, usage_known;
	struct fg_usage usage;

	struct fg_hdrs hdrs;
	struct fg_hdrs rhdrs;     /* the engine's response headers */
};

struct fg_client {
	struct fg_link link;
	struct fg_proxy *px;
	struct fg_loop *loop;     /* the worker's that accepted it: its fd and timer */
	int fd;
	/* the client's address (TCP: IPv4 or IPv6), not a sockaddr_storage:
	 * an idle connection is this struct, and 128 bytes of it matter */
	union {
		struct sockaddr sa;
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} peer;
	http_parser parser;
	enum fg_client_state state;
	struct fg_buf in, out;
	/* bytes of out, the response copy and the rewritten body counted in
	 * px->buffered (fg_client_account); the body is counted as it arrives */
	uint64_t held;
	uint32_t events;          /* epoll mask in force */
	/* its one timer, armed at accept and held until close, due no later
	 * than the nearest of its timeouts (proxy_client.c, client_due) */
	uint64_t timer;
	uint64_t deadline_ns;     /* reading or closing: UINT64_MAX = none */
	int timeout_status;       /* what to answer when deadline_ns passes (0 = just close) */
	uint64_t last_progress_ns;/* last successful write */
	/* its owner does its own I/O and parsing without the workers' shared
	 * lock (fg_client_go_alone): set and cleared under the lock, and while
	 * set no other thread touches it or its engine connection
	 * (timers_follow_reload skips both) */
	bool alone;
	bool parsed_alone;        /* and parsed body bytes then: process_input acts on it */
	bool keep_alive;          /* of the current request */
	bool closing_sent;        /* shutdown(SHUT_WR) done */
	bool read_eof;
	bool slow_close;          /* its request was ended for a full relay buffer: it has idle_s to take it */
	struct fg_tenant_rt *learned; /* tenant last published for this source */
	struct fg_conn_source *source; /* its count against the per-source cap */
	/* the last valid bearer key this connection sent and its SHA-256: a
	 * keep-alive client sends the same key with every request, and
	 * hashing it again cost ~7% of the request path (wiped at close);
	 * allocated once a key names a tenant, so a connection that never
	 * authenticated holds none of it */
	struct fg_key_memo *memo;
	/* the request under way, allocated at its first byte and freed at its
	 * end: an idle keep-alive connection holds none (nor any buffer) */
	struct fg_exchange *x;
};

struct fg_key_memo {
	uint8_t len;
	char key[FG_KEY_MEMO_MAX];
	uint8_t hash[32];
};

/* Keep-alive connections to one upstream address. */
struct fg_pool {
	const char *what;         /* "engine" / "long-context pool", for errors */
	struct sockaddr_storage addr;
	socklen_t addr_len;       /* 0 = not configured */
	struct fg_link idle;      /* most recent first */
	uint32_t n_idle;
};

struct fg_upstream {
	struct fg_link link;      /* its pool's idle list or the proxy's busy list */
	struct fg_proxy *px;
	/* where its fd and timer are: its client's loop while it serves one
	 * (connect_new, pool_get), so one thread owns the pair */
	struct fg_loop *loop;
	struct fg_pool *pool;
	int fd;
	bool connecting;
	bool reused;
	bool idle;
	bool paused;              /* not reading: the client is slow */
	uint64_t paused_since_ns; /* when it last stopped reading for the client */
	uint32_t events;          /* epoll mask in force */
	/* its one timer, from connect to close, due no later than the nearest
	 * of its timeouts (proxy_upstream.c, upstream_due) */
	uint64_t timer;
	http_parser parser;
	struct fg_buf out;        /* request head; the body is sent from the exchange */
	size_t body_sent;
	bool body_sent_all;
	/* with workers (proxy_upstream.c, "send queues"): none, on its loop's
	 * send queue, or lent (being sent by a worker that is not its owner,
	 * without any lock); queued and lent are entered under the queue's
	 * mutex only */
	atomic_int send_state;
	struct fg_link send_link; /* on the queue, or on its owner's list while it sends */
	int send_errno;           /* the owner's send after its pass: 0 = in part, else what failed */
	struct fg_client *client;
	uint64_t deadline_ns;
	uint64_t idle_since_ns;
	bool got_bytes;
	bool fast;                /* its head was read by fg_resp_head_fast */
	uint64_t fast_left;       /* then: body bytes still to come */
};

/* With workers, one per loop (workers.c): the requests its thread sends
 * to the engine without the lock after its pass (proxy_upstream.c,
 * defer_send). Its own mutex: a thread holding the shared lock adds (or
 * a close removes one), the loop's own thread takes them all without it,
 * and so does a worker that dispatched one while this loop's thread may
 * sleep (it sends them after its own pass instead of waking this one). */
struct fg_send_queue {
	pthread_mutex_t mu;
	struct fg_link todo;      /* struct fg_upstream.send_link, oldest first */
	uint32_t n;               /* on todo */
	struct fg_loop *loop;     /* whose queue it is: woken for what is handed back */
	/* this loop's thread only: the queues of other loops it dispatched
	 * to while their threads may sleep, sent after its pass */
	uint32_t n_help;
	struct fg_send_queue *help[FG_MAX_WORKERS];
	/* written by this loop's thread only, read by the metrics: requests
	 * it sent after its pass for its own connections, for other loops'
	 * (send_for_others), and of those the ones it handed back unfinished */
	atomic_uint_fast64_t sent_own, sent_for_others, handed_back;
};

struct fg_engine_scrape;
struct fg_fleet;

struct fg_proxy {
	struct fg_agent_state *st;
	int listen_fd;            /* worker 0's, the one steer holds; the others: workers */
	struct fg_workers *workers; /* agent.workers (workers.c) */
	struct fg_pool engine;    /* agent.engine */
	struct fg_pool long_pool; /* agent.long_context.upstream */
	uint16_t exempt_lo, exempt_hi, exempt_next; /* transparent mode source ports */
	struct fg_gateway *gw;    /* bucket, queue, KV, engine window: the one source of truth */
	struct fg_tenant_table tenants;
	struct fg_fleet *fleet;   /* agent.fleet (agent/fleet/fleet.c); NULL alone */
	struct fg_link clients;
	struct fg_conn_limits conns; /* per source and in all (conn_limits.c) */
	uint32_t max_connections, max_per_source; /* from the policy, or derived */
	uint32_t derived_connections;
	struct fg_link busy;
	uint32_t n_clients, n_busy;
	/* requests begun (an exchange allocated; workers count without the
	 * lock): the tick gives the heap back once they stop (proxy_sched.c) */
	_Atomic uint64_t exchanges_begun;
	struct fg_heap_give_back heap;
	uint64_t deny_tick_timer; /* proxy.c: quota windows closed once refilled */
	struct fg_metrics metrics;
	struct fg_buf scratch;    /* one relay step's output, reused */
	uint64_t started_ns;

	/* from the policy, in ns / bytes; the atomic ones are read by a
	 * worker's parse without the shared lock while a reload writes them */
	_Atomic uint64_t header_ns, body_ns;
	uint64_t idle_ns, upstream_ns, tokenize_ns, request_ns;
	_Atomic uint64_t max_body;
	_Atomic uint64_t max_buffered; /* agent.limits.max_buffered_bytes, or derived at start */
	uint64_t derived_buffered; /* the default: from the cgroup's memory limit */
	/* bytes held for all clients now: bodies, their rewritten copies,
	 * relay buffers, response copies; workers add to it without the lock
	 * (fg_buffered_take) */
	_Atomic uint64_t buffered;
	uint64_t overload_log_ns; /* fg_overload_log: when it last wrote */
	uint64_t overload_quiet;  /* and how many it kept quiet since */
	/* "Authorization: Bearer <agent.engine_api_key_file>\r\n", or "" when
	 * the engine takes no key: the one Authorization the engine ever sees */
	char engine_auth[FG_ENGINE_AUTH_MAX];
	char metrics_token[FG_SECRET_LINE_MAX + 1]; /* agent.metrics_token_file; "" = open */

	/* proxy_sched.c */
	uint64_t pump_timer;      /* a dispatch pass is scheduled, */
	struct fg_loop *pump_loop; /* on this loop (fg_sched_kick) */
	uint64_t expire_timer, expire_at;
	uint64_t tick_timer;
	int overload_level;       /* published to the kernel; -1 none */
	uint64_t overload_changes;
	struct fg_engine_scrape *scrape;
	bool scrape_fast;         /* the window waits for the engine's counts */
	bool engine_metrics_known;
	uint64_t engine_metrics_ns; /* last successful scrape */
	double engine_waiting, engine_running, engine_kv_usage;
	double engine_preemptions_seen; /* the engine's counter when last read */
	bool preemptions_baseline;
	uint64_t engine_preemptions; /* preemptions seen since the agent started */
	struct fg_pcal *calib;    /* agent.calibration (calib_observer.c) */
};

/* Count n more bytes held in px->buffered unless that passes the budget
 * (false, nothing counted): exact between workers taking at once. */
static inline bool fg_buffered_take(struct fg_proxy *px, uint64_t n)
{
	uint64_t cur = atomic_load(&px->buffered), max = px->max_buffered;

	if (!n) /* only the check: no write to the line every worker shares */
		return cur <= max;
	do {
		if (cur + n > max)
			return false;
	} while (!atomic_compare_exchange_weak(&px->buffered, &cur, cur + n));
	return true;
}

/* A listener on a policy address (agent.listen, agent.metrics_listen),
 * through lib/listen.c; inline, so the files that listen call lib only. */
static inline int fg_proxy_listen(const struct fg_hostport *hp, bool reuseport, char *err,
				  size_t errlen, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (fg_hostport_sockaddr(hp, &ss, &len)) {
		snprintf(err, errlen, "%s: '%s' is not a numeric IPv4/IPv6 address", what, hp->host);
		return -1;
	}
	return fg_listen_tcp(&ss, len, reuseport, err, errlen, what);
}
/* proxy_transparent.c: transparent mode's listener (agent.listen, or an
 * ephemeral dual-stack loopback port), handed to steer; the first of an
 * SO_REUSEPORT group when `reuseport` (steer's sk_assign to it lets the
 * kernel pick a member of the group). */
int fg_proxy_transparent_listen(struct fg_agent_state *st, bool reuseport, char *err,
				size_t errlen);

/* proxy.c: one log line per second at most for refusals under overload
 * (a flood of them must not fill the log); WHAT names the limit. */
void fg_overload_log(struct fg_proxy *px, const char *what);

/* proxy_client.c */
/* libhttp-parser callbacks that collect a client's request into c->x
 * (parser.data = the fg_client): headers, URL, body within px->max_body,
 * 100-continue, the 4xx a callback refuses with (x.reject_status), and
 * a pause at each complete message. Public for the fuzz harness. */
extern const http_parser_settings fg_client_req_settings;
/* A connection LOOP's listener accepted; it lives on LOOP until it closes. */
void fg_client_accept(struct fg_proxy *px, struct fg_loop *loop, int fd,
		      const struct sockaddr_storage *peer, socklen_t peer_len);
void fg_client_close(struct fg_client *c);
/* Its timer is due no later than its nearest timeout; after a reload that
 * shortened idle_s (proxy.c), as after any deadline moved closer. */
void fg_client_timer_due(struct fg_client *c);
/* The engine's answer is complete (or failed): settle, then serve the next
 * pipelined request or close. */
void fg_client_exchange_done(struct fg_client *c);
/* Returns -1 when the client is gone (closed and freed). */
int fg_client_flush(struct fg_client *c);
void fg_client_resume(struct fg_client *c);
/* Count what c holds of out, its response copy and its rewritten body in
 * the buffered-bytes budget (px->buffered) as it is now. */
void fg_client_account(struct fg_client *c);
/* One send of what is buffered, never closing: a failure is left to the
 * next flush, so c stays valid. Touches only c: callable alone. */
void fg_client_send_early(struct fg_client *c);
/* With workers, from a callback of c's own loop: let go of the shared lock
 * for I/O on c or its engine connection that touches only them (c->alone
 * set: no other thread touches either meanwhile), then fg_client_back
 * before anything else; false (nothing let go) without workers or on
 * another loop. fg_client_back takes the lock back and re-arms the timers
 * a reload's pull-in skipped. */
bool fg_client_go_alone(struct fg_client *c);
void fg_client_back(struct fg_client *c);
void fg_client_update_events(struct fg_client *c);
/* Append a proxy-made error response; ends the exchange. */
void fg_client_error(struct fg_client *c, int status, const char *type, const char *code,
		     const char *param, const char *message, const char *extra_headers);

/* proxy_upstream.c */
/* Send an admitted (or unmetered) exchange to its pool. -1: the client was
 * answered 503 (engine unavailable) and its exchange ended. */
int fg_proxy_dispatch(struct fg_client *c);
/* With workers, each loop's fg_loop_on_unlocked, ctx its send queue: the
 * requests dispatched to its engine connections since it last looked,
 * sent without the lock (what does not all go, or fails, is seen to
 * holding it again). */
bool fg_proxy_send_deferred(struct fg_loop *loop, void *ctx);
/* A non-blocking socket connecting to the pool's address (in transparent
 * mode from a source port steer exempts), or -1 with errno. */
int fg_pool_socket(struct fg_proxy *px, struct fg_pool *pool);
void fg_pool_init(struct fg_pool *pool, const char *what);
/* Point a pool at host:port ("" host = not configured); pooled connections
 * to a previous address are closed. -1 when the host is not numeric. */
int fg_pool_set(struct fg_proxy *px, struct fg_pool *pool, const struct fg_hostport *hp);
void fg_pool_drain(struct fg_pool *pool);
void fg_upstream_abort(struct fg_upstream *u);
void fg_upstream_resume(struct fg_upstream *u);
/* The same for an engine connection (idle_s, request_s). */
void fg_upstream_timer_due(struct fg_upstream *u);
void fg_upstream_close(struct fg_upstream *u);

/* proxy_settle.c: settle an exchange on whatever is known (usage,
 * delivered, failure); the one end of every request. */
void fg_exchange_settle(struct fg_client *c, enum fg_outcome o);
/* The usage a complete non-stream answer reports, read from its copy
 * ahead of fg_exchange_settle, which then takes it as read: it touches
 * only x, so a worker runs it without the shared lock. */
void fg_exchange_read_usage(struct fg_exchange *x);

/* proxy_sched.c */
int fg_sched_start(struct fg_proxy *px, char *err, size_t errlen);
void fg_sched_stop(struct fg_proxy *px);
/* The gateway's policy changed (after fg_gw_reload): engine scrape target,
 * orphaned requests answered, a dispatch pass. */
void fg_sched_apply_policy(struct fg_proxy *px, const struct fg_policy *old,
			   const struct fg_policy *p);
/* Run a dispatch pass soon (from the loop, never inside the caller). */
void fg_sched_kick(struct fg_proxy *px);
/* Progress of a dispatched exchange: first token, output so far. */
void fg_sched_first_token(struct fg_client *c);
void fg_sched_output(struct fg_client *c, double completion_tokens);
/* Sent to the engine: a non-streamed request waits for the engine's counts,
 * so they are read often until they show it started. */
void fg_sched_sent(struct fg_client *c);

#endif
