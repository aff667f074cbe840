/* kernel_steer.c — sk_lookup steering for transparent mode: load `steer`
 * on the same pins as `gate`, attach it to fairgated's network namespace,
 * and tell it which connections are the agent's own upstream path. The
 * proxy hands over its listening socket with fg_kernel_steer_listener().
 *
 * Without an agent socket steer fails open (connections reach the engine)
 * or, with agent.steer_fail_open: false, closed (they are refused). Failing
 * closed must outlive fairgated, so then the bpf_link is pinned
 * (<pin dir>/steer_link) and a restarted fairgated takes it over by
 * swapping in its own program; failing open it is not pinned and goes away
 * with the process, however that ends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/kernel/kernel.h"
#include "agent/kernel/kernel_internal.h"
#include "steer.skel.h"

static void link_pin_path(const struct fg_kernel *k, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/%s", k->pin_dir, FG_PIN_STEER_LINK);

	if (n < 0 || (size_t)n >= len)
		path[0] = '\0'; /* an impossible pin path: no pinned link found or made */
}

static void set_engine_path(struct fg_node_state *n, const struct fg_hostport *engine)
{
	struct fg_src_key k;

	n->steer_engine_port = 0;
	memset(n->steer_engine_addr, 0, sizeof(n->steer_engine_addr));
	if (!engine->host[0] || fg_src_key_parse(engine->host, &k))
		return;
	memcpy(n->steer_engine_addr, k.addr, sizeof(k.addr));
	n->steer_engine_port = engine->port;
}

/* The source address the kernel picks for this node's connections to the
 * engine (a UDP connect sends nothing), for steer to recognise them by. */
static void set_engine_source(struct steer_bpf *skel, const struct fg_hostport *engine)
{
	struct sockaddr_in d4 = { .sin_family = AF_INET, .sin_port = htons(engine->port) };
	struct sockaddr_in6 d6 = { .sin6_family = AF_INET6, .sin6_port = htons(engine->port) };
	struct sockaddr *dst = NULL;
	struct sockaddr_storage src;
	socklen_t dlen = 0, slen = sizeof(src);
	struct fg_src_key key;
	uint32_t w[4] = { 0 };
	int fd = -1;

	if (inet_pton(AF_INET, engine->host, &d4.sin_addr) == 1)
		dst = (struct sockaddr *)&d4, dlen = sizeof(d4);
	else if (inet_pton(AF_INET6, engine->host, &d6.sin6_addr) == 1)
		dst = (struct sockaddr *)&d6, dlen = sizeof(d6);
	if (dst)
		fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && !connect(fd, dst, dlen) &&
	    !getsockname(fd, (struct sockaddr *)&src, &slen) &&
	    !fg_src_key_from_sockaddr((struct sockaddr *)&src, &key))
		memcpy(w, key.addr, sizeof(w));
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 4; i++)
		__atomic_store_n(&skel->bss->engine_src[i], w[i], __ATOMIC_RELEASE);
}

static uint32_t steer_flags(const struct fg_agent *a)
{
	return FG_STEER_ON | (a->steer_fail_open ? 0 : FG_STEER_FAIL_CLOSED);
}

/* The inode of this process's network namespace (what link info reports). */
static uint64_t own_netns_ino(void)
{
	struct stat sb;

	return stat("/proc/self/ns/net", &sb) ? 0 : (uint64_t)sb.st_ino;
}

/* A steer link pinned by an earlier fairgated failing closed: 1 and *out
 * if it steers this namespace, 0 if there is none (a dead one, whose
 * namespace is gone, is unpinned), -1 if it steers another namespace. */
static int pinned_link(struct fg_kernel *k, struct bpf_link **out)
{
	struct bpf_link_info info;
	uint32_t len = sizeof(info);
	char path[PATH_MAX];
	struct bpf_link *l;

	*out = NULL;
	link_pin_path(k, path, sizeof(path));
	l = bpf_link__open(path);
	if (!l)
		return 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_link__fd(l), &info, &len) ||
	    info.type != BPF_LINK_TYPE_NETNS || !info.netns.netns_ino) {
		bpf_link__unpin(l);
		bpf_link__destroy(l);
		return 0;
	}
	if (info.netns.netns_ino != own_netns_ino()) {
		bpf_link__destroy(l);
		return -1;
	}
	*out = l;
	return 1;
}

/* Pinned iff failing closed. */
static void pin_as_needed(struct fg_kernel *k, bool fail_open)
{
	char path[PATH_MAX];

	link_pin_path(k, path, sizeof(path));
	if (fail_open && bpf_link__pin_path(k->steer_link)) {
		if (bpf_link__unpin(k->steer_link))
			fprintf(stderr, "fairgated: unpinning %s: %s\n", path, strerror(errno));
	} else if (!fail_open && !bpf_link__pin_path(k->steer_link)) {
		if (bpf_link__pin(k->steer_link, path))
			fprintf(stderr, "fairgated: pinning %s: %s; steer fails open when fairgated stops\n",
				path, strerror(errno));
	}
}

/* Not in transparent mode: a link an earlier fairgated left failing closed
 * would refuse every client, so it goes. */
static void drop_leftover(struct fg_kernel *k)
{
	struct bpf_link *l;

	if (pinned_link(k, &l) <= 0)
		return;
	bpf_link__unpin(l);
	bpf_link__destroy(l);
	__atomic_store_n(&k->maps.node->steer_flags, 0, __ATOMIC_RELEASE);
	fprintf(stderr, "fairgated: removed the steer link a transparent-mode fairgated left pinned\n");
}

static int attach(struct fg_kernel *k, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int netns, rc;

	rc = pinned_link(k, &k->steer_link);
	if (rc < 0) {
		link_pin_path(k, path, sizeof(path));
		snprintf(err, errlen, "%s steers another network namespace: another fairgated uses "
			 "this pin dir (give each namespace its own --pin-dir)", path);
		return -1;
	}
	if (rc > 0) {
		/* Atomic swap: no connection slips past between two programs. */
		if (!bpf_link__update_program(k->steer_link, k->steer->progs.fg_steer))
			return 0;
		fg_kernel_explain(err, errlen, "taking over the pinned steer link", errno);
		bpf_link__destroy(k->steer_link);
		k->steer_link = NULL;
		return -1;
	}
	netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (netns < 0) {
		snprintf(err, errlen, "/proc/self/ns/net: %s", strerror(errno));
		return -1;
	}
	k->steer_link = bpf_program__attach_netns(k->steer->progs.fg_steer, netns);
	close(netns);
	if (!k->steer_link) {
		fg_kernel_explain(err, errlen, "attaching sk_lookup to this network namespace", errno);
		return -1;
	}
	return 0;
}

int fg_kernel_steer_open(struct fg_agent_state *st, char *err, size_t errlen)
{
	const struct fg_agent *a = &st->policy->agent;
	struct fg_kernel *k = st->kernel;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = k->pin_dir);
	struct fg_node_state *n = k->maps.node;
	int rc;

	if (a->mode != FG_MODE_TRANSPARENT) {
		drop_leftover(k);
		return 0;
	}
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
	set_engine_path(n, &a->engine);
	set_engine_source(k->steer, &a->engine);
	__atomic_store_n(&n->steer_flags, steer_flags(a), __ATOMIC_RELEASE);
	if (attach(k, err, errlen))
		goto fail;
	pin_as_needed(k, a->steer_fail_open);
	fprintf(stderr, "fairgated: steer attached (sk_lookup); engine path %s:%u exempt; "
			"no agent socket → %s\n", a->engine.host, a->engine.port,
		a->steer_fail_open ? "engine (fail-open)" : "refused (fail-closed)");
	return 0;
fail:
	__atomic_store_n(&n->steer_flags, 0, __ATOMIC_RELEASE);
	steer_bpf__destroy(k->steer);
	k->steer = NULL;
	return -1;
}

void fg_kernel_steer_apply(struct fg_agent_state *st, const struct fg_policy *p)
{
	struct fg_kernel *k = st->kernel;

	if (!k || !k->steer)
		return;
	set_engine_path(k->maps.node, &p->agent.engine);
	set_engine_source(k->steer, &p->agent.engine);
	__atomic_store_n(&k->maps.node->steer_flags, steer_flags(&p->agent), __ATOMIC_RELEASE);
	pin_as_needed(k, p->agent.steer_fail_open);
}

void fg_kernel_steer_close(struct fg_agent_state *st)
{
	struct fg_kernel *k = st->kernel;
	bool keep;

	if (!k || !k->steer)
		return;
	/* Failing closed, the pinned link and its flags stay: with the agent's
	 * socket gone (the SOCKMAP drops it on close) clients are refused
	 * until a fairgated takes over. --cleanup removes everything. */
	keep = !st->policy->agent.steer_fail_open && !st->opts.cleanup &&
	       bpf_link__pin_path(k->steer_link);
	if (!keep) {
		__atomic_store_n(&k->maps.node->steer_flags, 0, __ATOMIC_RELEASE);
		if (bpf_link__pin_path(k->steer_link))
			bpf_link__unpin(k->steer_link);
	}
	bpf_link__destroy(k->steer_link); /* closes our fd; a pinned link lives on */
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
	map_fd = bpf_map__fd(k->steer->maps.FG_MAP_STEER_SOCK);
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

int fg_kernel_steer_private_port(struct fg_agent_state *st, uint16_t port)
{
	struct fg_kernel *k = st->kernel;

	if (!k || !k->steer || !k->steer->bss) {
		errno = EOPNOTSUPP;
		return -1;
	}
	__atomic_store_n(&k->steer->bss->private_port, port, __ATOMIC_RELEASE);
	return 0;
}

bool fg_kernel_steering(const struct fg_agent_state *st)
{
	return st->kernel && st->kernel->steer;
}
