/* test_steer.c — the sk_lookup `steer` program with real sockets: the test
 * enters a network namespace of its own, runs an "engine" listening on the
 * protected port and an "agent" listening on another port (in the
 * SOCKMAP), and checks where real TCP connects land: steered to the agent
 * (IPv4 and IPv6), the engine path and the exempt source ports left alone
 * only for connections made here (source == destination address), other
 * ports untouched, a shed tenant refused (allowance aside, and not when
 * gate already judged its interface), a delayed tenant still steered,
 * fail-open when the agent's socket is missing or closed, fail-closed when
 * asked, and the agent's private port reachable only from here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "maps/kernel_maps.h"
#include "selftests/common/percpu_zero.h"
#include "steer.skel.h"

#define PORT 8000        /* protected: the engine listens here */
#define AGENT_PORT 18000 /* the agent's own listener */
#define OTHER_PORT 9000
#define S_NS 1000000000ull

static struct steer_bpf *skel;
static struct bpf_link *steer_link;
static struct fg_maps maps;
static struct fg_policy *pol;
static int engine_fd = -1, agent_fd = -1, other_fd = -1;

enum { ALPHA = 0 };
enum where { NOWHERE, ENGINE, AGENT, OTHER, REFUSED };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * S_NS + (uint64_t)ts.tv_nsec;
}

static int listen_on(int port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), off = 0, one = 1;

	if (fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64)) {
		perror("listen_on");
		return -1;
	}
	return fd;
}

static int accepted(int lfd)
{
	int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (c < 0)
		return 0;
	close(c);
	return 1;
}

/* Connect from src[:sport] to dst:port; report which listener took it. */
static enum where connect_to(const char *src, int sport, const char *dst, int port)
{
	struct sockaddr_storage d = { 0 }, s = { 0 };
	int v6 = strchr(dst, ':') != NULL, fd, rc, err = 0, one = 1;
	socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	socklen_t elen = sizeof(err);
	enum where w = NOWHERE;

	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&d, *b = (struct sockaddr_in6 *)&s;

		a->sin6_family = b->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		b->sin6_port = htons((uint16_t)sport);
		inet_pton(AF_INET6, dst, &a->sin6_addr);
		inet_pton(AF_INET6, src ? src : "::1", &b->sin6_addr);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&d, *b = (struct sockaddr_in *)&s;

		a->sin_family = b->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		b->sin_port = htons((uint16_t)sport);
		inet_pton(AF_INET, dst, &a->sin_addr);
		inet_pton(AF_INET, src ? src : "127.0.0.1", &b->sin_addr);
	}
	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (src || sport)
		assert_int_equal(bind(fd, (struct sockaddr *)&s, len), 0);
	rc = connect(fd, (struct sockaddr *)&d, len);
	if (rc)
		err = errno;
	else
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
	close(fd);
	if (err == ECONNREFUSED)
		return REFUSED;
	if (err) {
		fprintf(stderr, "connect %s:%d: %s\n", dst, port, strerror(err));
		return NOWHERE;
	}
	/* Loopback handshakes finish inside connect(): the child is queued. */
	if (accepted(engine_fd))
		w = ENGINE;
	if (agent_fd >= 0 && accepted(agent_fd))
		w = w ? NOWHERE : AGENT;
	if (accepted(other_fd))
		w = w ? NOWHERE : OTHER;
	return w;
}

static struct fg_tenant_counters counters(uint32_t id)
{
	struct fg_tenant_counters c;

	assert_int_equal(fg_maps_tenant_counters(&maps, id, &c), 0);
	return c;
}

static struct fg_node_counters node_counters(void)
{
	struct fg_node_counters c;

	assert_int_equal(fg_maps_node_counters(&maps, &c), 0);
	return c;
}

static int set_listener(int fd)
{
	uint32_t zero = 0;
	uint64_t v = (uint64_t)fd;
	int mfd = bpf_map__fd(skel->maps.FG_MAP_STEER_SOCK);

	if (fd < 0)
		return bpf_map_delete_elem(mfd, &zero);
	return bpf_map_update_elem(mfd, &zero, &v, BPF_ANY);
}

static int lo_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	rc = rc ? rc : ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return rc;
}

static int setup(void **state)
{
	struct bpf_map *map;
	char err[256];
	int netns;

	(void)state;
	/* A namespace of our own: nothing here can reach or disturb others. */
	if (unshare(CLONE_NEWNET) || lo_up()) {
		perror("unshare/lo");
		return -1;
	}
	/* 10.9.9.9 primary, 10.9.9.8 secondary: stand-ins for a remote client
	 * (when bound as source) and for a secondary address, whose local route
	 * names the primary as preferred source. */
	if (system("ip addr add 10.9.9.9/24 dev lo && ip addr add 10.9.9.8/24 dev lo")) {
		fprintf(stderr, "ip addr add failed\n");
		return -1;
	}
	skel = steer_bpf__open();
	if (!skel)
		return -1;
	bpf_object__for_each_map(map, skel->obj)
		bpf_map__set_pin_path(map, NULL);
	if (steer_bpf__load(skel))
		return -1;
	netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	steer_link = bpf_program__attach_netns(skel->progs.fg_steer, netns);
	close(netns);
	if (!steer_link)
		return -1;
	if (fg_maps_from_object(&maps, skel->obj, err, sizeof(err))) {
		fprintf(stderr, "maps: %s\n", err);
		return -1;
	}
	pol = calloc(1, sizeof(*pol));
	engine_fd = listen_on(PORT);
	other_fd = listen_on(OTHER_PORT);
	return pol && engine_fd >= 0 && other_fd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	close(engine_fd);
	close(other_fd);
	if (agent_fd >= 0)
		close(agent_fd);
	fg_maps_close(&maps);
	bpf_link__destroy(steer_link);
	steer_bpf__destroy(skel);
	fg_policy_free(pol);
	return 0;
}

/* Every test: one tenant alpha = 127.0.0.9/32, 10.9.9.9/32 and ::1/128,
 * steer on, engine path 127.0.0.1:8000, the agent listening and in the
 * SOCKMAP. */
static int reset(void **state)
{
	char err[256];
	struct fg_cidr *c;
	struct fg_src_key k;

	(void)state;
	fg_policy_release(pol);
	fg_policy_defaults(pol);
	pol->n_tiers = 1;
	snprintf(pol->tiers[0].name, FG_NAME_MAX, "standard");
	if (!fg_policy_add_tenant(pol))
		return -1;
	snprintf(pol->tenants[ALPHA].name, FG_NAME_MAX, "alpha");
	c = &pol->tenants[ALPHA].sources[pol->tenants[ALPHA].n_sources++];
	c->family = AF_INET;
	c->prefixlen = 32;
	inet_pton(AF_INET, "127.0.0.9", c->addr);
	c = &pol->tenants[ALPHA].sources[pol->tenants[ALPHA].n_sources++];
	c->family = AF_INET;
	c->prefixlen = 32;
	inet_pton(AF_INET, "10.9.9.9", c->addr);
	c = &pol->tenants[ALPHA].sources[pol->tenants[ALPHA].n_sources++];
	c->family = AF_INET6;
	c->prefixlen = 128;
	inet_pton(AF_INET6, "::1", c->addr);
	pol->agent.n_protected_ports = 1;
	pol->agent.protected_ports[0] = PORT;
	pol->agent.deny_allowance_per_s = 0;
	if (fg_maps_apply_policy(&maps, pol, err, sizeof(err)))
		return -1;
	fg_maps_set_deny(&maps, ALPHA, 0, FG_VERDICT_ALLOW, 0);
	maps.tenants[ALPHA].allow_tat_ns = 0;
	if (fg_test_zero_percpu(skel->maps.FG_MAP_TENANT_STATS, ALPHA) ||
	    fg_test_zero_percpu(skel->maps.FG_MAP_NODE_STATS, 0))
		return -1;
	fg_src_key_parse("127.0.0.1", &k);
	memcpy(maps.node->steer_engine_addr, k.addr, 16);
	maps.node->steer_engine_port = PORT;
	maps.node->steer_exempt_lo = maps.node->steer_exempt_hi = 0;
	maps.node->n_gate_ifindex = 0;
	maps.node->steer_flags = FG_STEER_ON;
	skel->bss->private_port = 0;
	if (agent_fd < 0)
		agent_fd = listen_on(AGENT_PORT);
	return set_listener(agent_fd);
}

static void steers_to_the_agent(void **state)
{
	(void)state;
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), AGENT);
	assert_int_equal(connect_to(NULL, 0, "127.0.0.1", PORT), ENGINE); /* engine path */
	assert_int_equal(connect_to(NULL, 0, "::1", PORT), AGENT);
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", OTHER_PORT), OTHER);
	struct fg_node_counters nc = node_counters();
	assert_int_equal(nc.steered, 2);
	assert_int_equal(nc.steer_exempt, 1);
}

/* Only connections made on this node are exempt. A source that is neither
 * the destination, nor loopback, nor the node's source towards the engine
 * (10.9.9.9 on a dummy device stands in for a remote client) is steered. */
static void engine_path_only_from_here(void **state)
{
	(void)state;
	assert_int_equal(connect_to("10.9.9.9", 0, "127.0.0.1", PORT), AGENT);
	assert_int_equal(connect_to("127.0.0.7", 0, "127.0.0.1", PORT), ENGINE); /* loopback */
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", PORT), AGENT);
	/* agent.engine on a secondary address: its route names the primary
	 * as source, which the agent learned (engine_src) */
	struct fg_src_key k;
	fg_src_key_parse("10.9.9.8", &k);
	memcpy(maps.node->steer_engine_addr, k.addr, 16);
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", PORT), AGENT);
	fg_src_key_parse("10.9.9.9", &k);
	memcpy(skel->bss->engine_src, k.addr, 16);
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", PORT), ENGINE);
	assert_int_equal(connect_to("10.9.9.9", 0, "127.0.0.5", PORT), AGENT); /* not the engine */
	memset(skel->bss->engine_src, 0, 16);
}

static void exempt_source_ports_reach_the_engine(void **state)
{
	(void)state;
	maps.node->steer_exempt_lo = 40000;
	maps.node->steer_exempt_hi = 40009;
	assert_int_equal(connect_to("127.0.0.5", 40005, "127.0.0.5", PORT), ENGINE);
	assert_int_equal(connect_to("127.0.0.5", 40010, "127.0.0.5", PORT), AGENT);
	assert_int_equal(connect_to("10.9.9.9", 40006, "127.0.0.5", PORT), AGENT);
}

static void shed_tenant_refused(void **state)
{
	(void)state;
	fg_maps_set_deny(&maps, ALPHA, now_ns() + 60 * S_NS, FG_VERDICT_SHED, FG_DENY_OPERATOR);
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", PORT), REFUSED);
	assert_int_equal(connect_to("::1", 0, "::1", PORT), REFUSED);
	assert_int_equal(counters(ALPHA).steer_refused, 2);
	/* Others still steered; alpha's own connections to other ports fine. */
	assert_int_equal(connect_to("127.0.0.8", 0, "127.0.0.5", PORT), AGENT);
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", OTHER_PORT), OTHER);
	/* Delay is gate's business: steer hands those to the agent (→ 429). */
	fg_maps_set_deny(&maps, ALPHA, now_ns() + 60 * S_NS, FG_VERDICT_DELAY, FG_DENY_OPERATOR);
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", PORT), AGENT);
	/* A window that ended a second ago refuses nothing. */
	fg_maps_set_deny(&maps, ALPHA, now_ns() - S_NS, FG_VERDICT_SHED, FG_DENY_OPERATOR);
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", PORT), AGENT);
}

static void allowance_and_gated_interfaces(void **state)
{
	(void)state;
	maps.node->allow_interval_ns = 10 * S_NS;
	maps.node->allow_burst = 1;
	fg_maps_set_deny(&maps, ALPHA, now_ns() + 60 * S_NS, FG_VERDICT_SHED, FG_DENY_OPERATOR);
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", PORT), AGENT);
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", PORT), REFUSED);
	assert_int_equal(counters(ALPHA).allowance_used, 1);
	/* Arriving where gate runs (here: lo), the SYN was judged already:
	 * from a "remote" source (10.9.9.9), not charged again... */
	maps.node->gate_ifindex[0] = if_nametoindex("lo");
	maps.node->n_gate_ifindex = 1;
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", PORT), AGENT);
	assert_int_equal(counters(ALPHA).allowance_used, 1);
	/* ...but a connection made on this node never passed gate: judged. */
	assert_int_equal(connect_to("127.0.0.9", 0, "127.0.0.5", PORT), REFUSED);
	maps.node->allow_interval_ns = 0;
	maps.node->allow_burst = 0;
}

static void fails_open_without_the_agent(void **state)
{
	(void)state;
	assert_int_equal(set_listener(-1), 0);
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), ENGINE);
	assert_int_equal(node_counters().steer_no_listener, 1);
	/* The agent's socket closing removes it from the SOCKMAP by itself. */
	assert_int_equal(set_listener(agent_fd), 0);
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), AGENT);
	close(agent_fd);
	agent_fd = -1;
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), ENGINE);
	assert_int_equal(connect_to(NULL, 0, "::1", PORT), ENGINE);
	/* Steering switched off (fairgated stopping): engine. */
	agent_fd = listen_on(AGENT_PORT);
	assert_int_equal(set_listener(agent_fd), 0);
	maps.node->steer_flags = 0;
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), ENGINE);
}

static void fails_closed_when_asked(void **state)
{
	(void)state;
	maps.node->steer_flags = FG_STEER_ON | FG_STEER_FAIL_CLOSED;
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), AGENT);
	assert_int_equal(set_listener(-1), 0);
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", PORT), REFUSED);
	assert_int_equal(connect_to(NULL, 0, "::1", PORT), REFUSED);
	assert_int_equal(node_counters().steer_no_listener, 2);
	/* The agent's own path to the engine still works, other ports too. */
	assert_int_equal(connect_to(NULL, 0, "127.0.0.1", PORT), ENGINE);
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", OTHER_PORT), OTHER);
	/* An IPv4-only agent socket: IPv6 connections are refused, not leaked. */
	int v4 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(AGENT_PORT + 1),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_true(v4 >= 0);
	setsockopt(v4, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(v4, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(v4, 8), 0);
	assert_int_equal(set_listener(v4), 0);
	assert_int_equal(connect_to(NULL, 0, "::1", PORT), REFUSED);
	assert_true(connect_to(NULL, 0, "127.0.0.5", PORT) == NOWHERE && accepted(v4));
	close(v4);
}

static void private_port_only_from_here(void **state)
{
	(void)state;
	skel->bss->private_port = AGENT_PORT;
	assert_int_equal(connect_to(NULL, 0, "127.0.0.5", AGENT_PORT), AGENT);
	assert_int_equal(connect_to(NULL, 0, "::1", AGENT_PORT), AGENT);
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.9", AGENT_PORT), AGENT);
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", AGENT_PORT), REFUSED);
	/* Steered connections still reach it, whoever makes them. */
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", PORT), AGENT);
	/* Steering off (fairgated stopping): no guard either. */
	maps.node->steer_flags = 0;
	assert_int_equal(connect_to("10.9.9.9", 0, "10.9.9.8", AGENT_PORT), AGENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(steers_to_the_agent, reset),
		cmocka_unit_test_setup(engine_path_only_from_here, reset),
		cmocka_unit_test_setup(exempt_source_ports_reach_the_engine, reset),
		cmocka_unit_test_setup(shed_tenant_refused, reset),
		cmocka_unit_test_setup(allowance_and_gated_interfaces, reset),
		cmocka_unit_test_setup(fails_open_without_the_agent, reset),
		cmocka_unit_test_setup(fails_closed_when_asked, reset),
		cmocka_unit_test_setup(private_port_only_from_here, reset),
	};

	if (geteuid() != 0) {
		printf("1..1\nok 1 - test_steer # SKIP needs root (sk_lookup, namespaces)\n");
		return 0;
	}
	return cmocka_run_group_tests_name("steer", tests, setup, teardown);
}
