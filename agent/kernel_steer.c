/* kernel_steer.c — sk_lookup steering for transparent mode: load `steer`
 * on the same pins as `gate`, attach it to fairgated's network namespace
 * (a bpf_link, gone when fairgated is), and tell it which connections are
 * the agent's own upstream path. The proxy hands over its listening socket
 * with fg_kernel_steer_listener(); without one, steer falls through to the
 * engine (fail-open). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/kernel.h"
#include "agent/kernel_internal.h"
#include "steer.skel.h"

static void set_engine_path(struct fg_node_state *n, const struct fg_hostport *engine)
{
	struct fg_src_key k;

	memset(n->steer_engine_addr, 0, sizeof(n->steer_engine_addr));
	n->steer_engine_port = 0;
	if (!engine->host[0] || fg_src_key_parse(engine->host, &k))
		return;
	memcpy(n->steer_engine_addr, k.addr, sizeof(k.addr));
	n->steer_engine_port = engine->port;
}

int fg_kernel_steer_open(struct fg_agent_state *st, char *err, size_t errlen)
{
	struct fg_kernel *k = st->kernel;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = k->pin_dir);
	struct fg_node_state *n = k->maps.node;
	int netns, rc;

	if (st->policy->agent.mode != FG_MODE_TRANSPARENT)
		return 0;
	k->steer = steer_bpf__open_opts(&oo);
	if (!k->steer) {
		fg_kernel_explain(err, errlen, "opening the steer program", errno);
		return -1;
	}
	rc = steer_bpf__load(k->steer);
	if (rc) {
		fg_kernel_explain(err, errlen, "loading the steer program (sk_lookup)", rc);
		goto fail;
	}
	netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (netns < 0) {
		snprintf(err, errlen, "/proc/self/ns/net: %s", strerror(errno));
		goto fail;
	}
	k->steer_link = bpf_program__attach_netns(k->steer->progs.fg_steer, netns);
	close(netns);
	if (!k->steer_link) {
		fg_kernel_explain(err, errlen, "attaching sk_lookup to this network namespace",
				  errno);
		goto fail;
	}
	set_engine_path(n, &st->policy->agent.engine);
	__atomic_store_n(&n->steer_flags, FG_STEER_ON, __ATOMIC_RELEASE);
	fprintf(stderr, "fairgated: steer attached (sk_lookup); engine path %s:%u exempt\n",
		st->policy->agent.engine.host, st->policy->agent.engine.port);
	return 0;
fail:
	steer_bpf__destroy(k->steer);
	k->steer = NULL;
	return -1;
}

void fg_kernel_steer_close(struct fg_agent_state *st)
{
	struct fg_kernel *k = st->kernel;

	if (!k || !k->steer)
		return;
	__atomic_store_n(&k->maps.node->steer_flags, 0, __ATOMIC_RELEASE);
	bpf_link__destroy(k->steer_link);
	k->steer_link = NULL;
	steer_bpf__destroy(k->steer);
	k->steer = NULL;
	k->steer_listen_fd = -1;
}

int fg_kernel_steer_listener(struct fg_agent_state *st, int listen_fd)
{
	struct fg_kernel *k = st->kernel;
	uint32_t zero = 0;
	uint64_t fd = (uint64_t)listen_fd;
	int map_fd;

	if (!k)
		return 0;
	if (!k->steer) {
		errno = EOPNOTSUPP; /* agent.mode is not transparent, or steer failed */
		return -1;
	}
	map_fd = bpf_map__fd(k->steer->maps.steer_sock);
	if (listen_fd < 0) {
		if (bpf_map_delete_elem(map_fd, &zero) && errno != ENOENT)
			return -1;
		k->steer_listen_fd = -1;
		return 0;
	}
	if (bpf_map_update_elem(map_fd, &zero, &fd, BPF_ANY))
		return -1;
	k->steer_listen_fd = listen_fd;
	return 0;
}
