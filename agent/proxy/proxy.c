/* proxy.c — the admission proxy's lifecycle: listen (front mode on
 * agent.listen; transparent mode: proxy_transparent.c), the workers that
 * accept (workers.c), policy hot reload, and shutdown. The request path
 * itself is proxy_client.c (admission) and proxy_upstream.c (forwarding and
 * settlement); each connection's timeouts are its own timer there. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/kernel/bucket_restore.h"
#include "lib/cgroup_memory.h"
#include "agent/fleet/fleet.h"
#include "agent/http/engine_scrape.h"
#include "agent/kernel/kernel.h"
#include "agent/proxy/proxy.h"
#include "agent/proxy/proxy_internal.h"
#include "agent/proxy/workers.h"

#define OVERLOAD_LOG_NS 1000000000ull
/* How soon a quota deny window closes once its tenant has refilled (a walk
 * over the tenants, never the connections). */
#define DENY_TICK_NS 100000000ull

void fg_overload_log(struct fg_proxy *px, const char *what)
{
	uint64_t now = fg_now_ns();

	if (px->overload_log_ns && now - px->overload_log_ns < OVERLOAD_LOG_NS) {
		px->overload_quiet++;
		return;
	}
	fprintf(stderr, "fairgated: overload: refused past the %s (%" PRIu64 " more not logged since the last line)\n",
		what, px->overload_quiet);
	px->overload_log_ns = now;
	px->overload_quiet = 0;
}

static void deny_tick(struct fg_loop *loop, void *ctx)
{
	struct fg_proxy *px = ctx;

	fg_tenants_tick(px->st, &px->tenants, fg_now_ns());
	px->deny_tick_timer = fg_loop_timer(loop, DENY_TICK_NS, deny_tick, px);
}

/* Deadlines already set keep their time; the ones counted from an event
 * (a slow reader's last write, a request's start, a pause) follow the new
 * idle_s and request_s, so a shorter one pulls every timer in: a walk over
 * the connections, once per reload. */
static void timers_follow_reload(struct fg_proxy *px, uint64_t old_idle_ns, uint64_t old_request_ns)
{
	struct fg_link *l;

	if (px->idle_ns >= old_idle_ns && px->request_ns >= old_request_ns)
		return;
	for (l = px->clients.next; l != &px->clients; l = l->next) {
		struct fg_client *c = fg_container_of(l, struct fg_client, link);
		/* a client its worker reads, parses or sends for without the
		 * lock re-arms its timers when it takes the lock back
		 * (fg_client_back) */
		if (!c->alone)
			fg_client_timer_due(c);
	}
	for (l = px->busy.next; l != &px->busy; l = l->next) {
		struct fg_upstream *u = fg_container_of(l, struct fg_upstream, link);
		/* nor its engine connection, sending without the lock */
		if (!u->client || !u->client->alone)
			fg_upstream_timer_due(u);
	}
}

static void take_config(struct fg_proxy *px, const struct fg_policy *p)
{
	const struct fg_agent *a = &p->agent;

	px->header_ns = (uint64_t)(a->header_timeout_s * 1e9);
	px->body_ns = (uint64_t)(a->body_timeout_s * 1e9);
	px->idle_ns = (uint64_t)(a->idle_timeout_s * 1e9);
	px->upstream_ns = (uint64_t)(a->upstream_timeout_s * 1e9);
	px->tokenize_ns = (uint64_t)(a->tokenize_timeout_s * 1e9);
	px->request_ns = (uint64_t)(a->request_timeout_s * 1e9);
	px->max_body = a->max_body_bytes ? a->max_body_bytes : (8u << 20);
	px->max_connections = a->limits.max_connections ? a->limits.max_connections
							: px->derived_connections;
	/* Half the total by default: one address cannot take every slot, and
	 * clients behind one NAT or load balancer are not cut at a small
	 * number the operator never chose. */
	px->max_per_source = a->limits.max_connections_per_source
				     ? a->limits.max_connections_per_source
				     : (px->max_connections / 2 ? px->max_connections / 2 : 1);
	uint64_t max_buffered = a->limits.max_buffered_bytes ? a->limits.max_buffered_bytes
							: px->derived_buffered;
	/* the largest body allowed can always be held; stored once, as a
	 * worker's parse reads it without the lock */
	px->max_buffered = max_buffered < px->max_body ? px->max_body : max_buffered;
}

/* The engine's Authorization line from agent.engine_api_key_file, read
 * again on every apply so a rotated key takes effect on reload. */
static int load_engine_auth(const struct fg_agent *a, char out[FG_ENGINE_AUTH_MAX], char *err,
			    size_t errlen)
{
	char key[FG_SECRET_LINE_MAX + 1];

	out[0] = 0;
	if (!a->engine_api_key_file[0])
		return 0;
	if (fg_secret_line_read(a->engine_api_key_file, "agent.engine_api_key_file", key, sizeof(key),
				err, errlen) < 0)
		return -1;
	snprintf(out, FG_ENGINE_AUTH_MAX, "Authorization: Bearer %s\r\n", key);
	explicit_bzero(key, sizeof(key));
	return 0;
}

static int load_metrics_token(const struct fg_agent *a, char out[FG_SECRET_LINE_MAX + 1], char *err,
			      size_t errlen)
{
	out[0] = 0;
	if (!a->metrics_token_file[0])
		return 0;
	return fg_secret_line_read(a->metrics_token_file, "agent.metrics_token_file", out,
				   FG_SECRET_LINE_MAX + 1, err, errlen) < 0 ? -1 : 0;
}

int fg_proxy_start(struct fg_agent_state *st, char *err, size_t errlen)
{
	const struct fg_agent *a = &st->policy->agent;
	struct fg_proxy *px = calloc(1, sizeof(*px));

	if (!px) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	px->st = st;
	px->listen_fd = -1;
	px->metrics.listen_fd = -1;
	px->started_ns = fg_now_ns();
	fg_link_init(&px->clients);
	fg_pool_init(&px->engine, "engine");
	fg_pool_init(&px->long_pool, "long-context pool");
	fg_link_init(&px->busy);
	st->proxy = px;
	px->derived_connections = fg_conn_default_max();
	uint64_t mem_limit = fg_cgroup_memory_limit_self();
	px->derived_buffered = mem_limit ? (uint64_t)((double)mem_limit * FG_BUFFERED_SHARE_OF_LIMIT)
					 : FG_BUFFERED_DEFAULT;
	take_config(px, st->policy);
	if (load_engine_auth(a, px->engine_auth, err, errlen) ||
	    load_metrics_token(a, px->metrics_token, err, errlen))
		goto fail;

	if (fg_pool_set(px, &px->engine, &a->engine)) {
		snprintf(err, errlen, "agent.engine: '%s' is not a numeric address", a->engine.host);
		goto fail;
	}
	if (fg_pool_set(px, &px->long_pool, &a->long_context_upstream)) {
		snprintf(err, errlen, "agent.long_context.upstream: '%s' is not a numeric address",
			 a->long_context_upstream.host);
		goto fail;
	}
	if (fg_sched_start(px, err, errlen))
		goto fail;
	if (fg_tenants_init(&px->tenants, px->gw, a->salt_secret_file, err, errlen))
		goto fail;
	if (fg_tenants_apply(&px->tenants, st->policy)) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	fg_bucket_restore(st, px->gw, fg_now_ns());
	fg_tenants_restore(st, &px->tenants);
	if (fg_fleet_start(px, err, errlen))
		goto fail;
	uint32_t n_workers = fg_workers_wanted(a);
	px->listen_fd = a->mode == FG_MODE_TRANSPARENT
				? fg_proxy_transparent_listen(st, n_workers > 1, err, errlen)
				: fg_proxy_listen(&a->listen, n_workers > 1, err, errlen, "agent.listen");
	if (px->listen_fd < 0)
		goto fail;
	if (fg_workers_start(px, n_workers, err, errlen))
		goto fail;
	if (fg_metrics_start(px, err, errlen))
		goto fail;
	px->deny_tick_timer = fg_loop_timer(st->loop, DENY_TICK_NS, deny_tick, px);
	fg_proxy_publish_all(st);
	char where[64];
	fg_socket_desc(px->listen_fd, where, sizeof(where));
	char engine[FG_HOSTPORT_MAX + 8], metrics[FG_HOSTPORT_MAX + 8];
	fprintf(stderr, "fairgated: client connections: at most %u in all (%s), %u per source address\n",
		px->max_connections,
		a->limits.max_connections ? "agent.limits.max_connections" : "from the fd limit",
		px->max_per_source);
	fprintf(stderr, "fairgated: request bodies held: at most %" PRIu64 " bytes in all (%s)\n",
		px->max_buffered,
		a->limits.max_buffered_bytes ? "agent.limits.max_buffered_bytes"
		: mem_limit ? "half the memory cgroup's limit" : "no memory cgroup limit: the fixed default");
	fprintf(stderr, "fairgated: proxy on %s (%s mode), engine %s, metrics %s\n", where,
		a->mode == FG_MODE_TRANSPARENT ? "transparent" : "front",
		fg_hostport_format(&a->engine, engine, sizeof(engine)),
		a->metrics_listen.host[0] ?
			fg_hostport_format(&a->metrics_listen, metrics, sizeof(metrics)) : "off");
	return 0;

fail:
	fg_proxy_stop(st);
	return -1;
}

int fg_proxy_apply_policy(struct fg_agent_state *st, const struct fg_policy *p, char *err,
			  size_t errlen)
{
	struct fg_proxy *px = st->proxy;
	struct sockaddr_storage ss;
	socklen_t len;
	const struct fg_hostport *lc = &p->agent.long_context_upstream;
	char engine_auth[FG_ENGINE_AUTH_MAX], metrics_token[FG_SECRET_LINE_MAX + 1];

	if (!px)
		return 0;
	if (fg_hostport_sockaddr(&p->agent.engine, &ss, &len) ||
	    (lc->host[0] && fg_hostport_sockaddr(lc, &ss, &len))) {
		snprintf(err, errlen, "agent.engine or agent.long_context.upstream is not a numeric address");
		return -1;
	}
	if (load_engine_auth(&p->agent, engine_auth, err, errlen))
		return -1;
	if (load_metrics_token(&p->agent, metrics_token, err, errlen)) {
		explicit_bzero(engine_auth, sizeof(engine_auth));
		return -1;
	}
	/* the gateway's state for the new tenants is taken first, so running
	 * out of memory leaves the table and the gateway on the old policy */
	struct fg_gw_tenant_state gw_next = { 0 };
	if (fg_gw_reload_prepare(px->gw, p, &gw_next) || fg_fleet_prepare_policy(px, p) ||
	    fg_tenants_apply(&px->tenants, p)) {
		if (gw_next.policy)
			fg_gw_reload_cancel(&gw_next);
		fg_fleet_cancel_policy(px);
		explicit_bzero(engine_auth, sizeof(engine_auth));
		explicit_bzero(metrics_token, sizeof(metrics_token));
		snprintf(err, errlen, "out of memory for %u tenants", p->n_tenants);
		return -1;
	}
	/* nothing fails from here: the gateway follows tenants by name; a new
	 * engine address lets connections in use finish and drops pooled ones */
	const struct fg_policy *old = px->gw->policy;
	uint64_t old_idle_ns = px->idle_ns, old_request_ns = px->request_ns;
	fg_gw_reload_commit(px->gw, &gw_next, fg_now_ns());
	fg_fleet_apply_policy(px, p);
	take_config(px, p);
	timers_follow_reload(px, old_idle_ns, old_request_ns);
	memcpy(px->engine_auth, engine_auth, sizeof(engine_auth));
	explicit_bzero(engine_auth, sizeof(engine_auth));
	memcpy(px->metrics_token, metrics_token, sizeof(metrics_token));
	explicit_bzero(metrics_token, sizeof(metrics_token));
	fg_engine_scrape_set_auth(px->scrape, px->engine_auth);
	fg_pool_set(px, &px->engine, &p->agent.engine);
	fg_pool_set(px, &px->long_pool, lc);
	fg_sched_apply_policy(px, old, p);
	return 0;
}

void fg_proxy_publish_all(struct fg_agent_state *st)
{
	struct fg_proxy *px = st->proxy;
	uint64_t now = fg_now_ns();

	for (uint32_t i = 0; px && i < px->tenants.n; i++)
		fg_tenants_publish(st, &px->tenants, px->tenants.by_id[i], now);
}

void fg_proxy_stop(struct fg_agent_state *st)
{
	struct fg_proxy *px = st->proxy;

	if (!px)
		return;
	fg_workers_stop(px); /* the other threads gone: what is left runs on this one */
	if (px->deny_tick_timer)
		fg_loop_timer_cancel(st->loop, px->deny_tick_timer);
	if (px->listen_fd >= 0) {
		if (st->policy->agent.mode == FG_MODE_TRANSPARENT && st->kernel)
			fg_kernel_steer_listener(st, -1);
		fg_loop_del(st->loop, px->listen_fd);
		close(px->listen_fd);
	}
	fg_metrics_stop(px);
	while (!fg_link_empty(&px->clients))
		fg_client_close(fg_container_of(px->clients.next, struct fg_client, link));
	while (!fg_link_empty(&px->busy))
		fg_upstream_close(fg_container_of(px->busy.next, struct fg_upstream, link));
	fg_pool_drain(&px->engine);
	fg_pool_drain(&px->long_pool);
	fg_fleet_stop(px); /* hands the leases back while the gateway still has them */
	if (px->gw)
		fg_sched_stop(px); /* after the clients: they settle into the gateway */
	fg_tenants_free(&px->tenants);
	fg_conn_limits_free(&px->conns);
	fg_buf_free(&px->scratch);
	fg_workers_free(px); /* after the clients: they were on the workers' loops */
	free(px);
	st->proxy = NULL;
}
