/* kernel.c — fairgated owns the BPF datapath: mount bpffs, load `gate`
 * with its maps pinned by name (reused across restarts, so deny windows and
 * counters survive), fill them from the policy, attach XDP to the policy's
 * interfaces (or where the default route goes: `interfaces: auto`; one that
 * is missing turns off gate there only), drain sampled shed events, and
 * detach on exit. The publish functions the proxy calls are thin wrappers
 * over kernel_maps.c. */
#include "agent/kernel/kernel.h"

#include <errno.h>
#include <limits.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/kernel/default_route.h"
#include "agent/kernel/kernel_internal.h"
#include "maps/kernel_maps.h"
#include "maps/src_index.h"
#include "gate.skel.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif
#define BPFFS_ROOT "/sys/fs/bpf"
#define GATE_PROG_NAME "fg_gate"

int fg_kernel_mount_bpffs(char *err, size_t errlen)
{
	struct statfs sfs;

	if (!statfs(BPFFS_ROOT, &sfs) && sfs.f_type == BPF_FS_MAGIC)
		return 0;
	mkdir(BPFFS_ROOT, 0700);
	if (mount("bpf", BPFFS_ROOT, "bpf", 0, "mode=0700")) {
		snprintf(err, errlen,
			 "mounting bpffs at " BPFFS_ROOT ": %s — fairgated needs "
			 "CAP_SYS_ADMIN to mount it, or mount it beforehand "
			 "(`fairgated --mount-bpffs`, the DaemonSet's init container)",
			 strerror(errno));
		return -1;
	}
	return 1;
}

static int prepare_pin_dir(const char *pin_dir, char *err, size_t errlen)
{
	struct statfs sfs;

	if (fg_kernel_mount_bpffs(err, errlen) < 0)
		return -1;
	if (mkdir(pin_dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "creating pin dir %s: %s", pin_dir, strerror(errno));
		return -1;
	}
	if (statfs(pin_dir, &sfs) || sfs.f_type != BPF_FS_MAGIC) {
		snprintf(err, errlen, "pin dir %s is not on a bpffs mount", pin_dir);
		return -1;
	}
	return 0;
}

/* Pins left by a build whose maps have another layout cannot be reused
 * (libbpf refuses them, and loading fails with a bare EINVAL). Find them
 * before loading: with --cleanup the operator has asked to drop the pins,
 * so they go; otherwise one line saying what to do. */
static int check_pinned_layouts(struct bpf_object *obj, const char *pin_dir, bool cleanup,
				char *err, size_t errlen)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		const char *path = bpf_map__pin_path(map);
		struct bpf_map_info info = { 0 };
		uint32_t len = sizeof(info);
		bool same;
		int fd;

		if (!path || (fd = bpf_obj_get(path)) < 0)
			continue;
		same = !bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == bpf_map__type(map) &&
		       info.key_size == bpf_map__key_size(map) &&
		       info.value_size == bpf_map__value_size(map) &&
		       info.max_entries == bpf_map__max_entries(map) &&
		       info.map_flags == bpf_map__map_flags(map);
		close(fd);
		if (same)
			continue;
		if (!cleanup) {
			snprintf(err, errlen,
				 "pinned map %s has another layout (left by a different fairgate "
				 "version): start fairgated once with --cleanup, or remove %s (either "
				 "drops deny windows, counters and learned sources)", path, pin_dir);
			return -1;
		}
		if (unlink(path)) {
			snprintf(err, errlen, "removing %s: %s", path, strerror(errno));
			return -1;
		}
		fprintf(stderr, "fairgated: --cleanup: removed %s, pinned by another fairgate "
			"version with another layout\n", path);
	}
	return 0;
}

/* ---- XDP attachment ---- */

static int prog_name_by_id(uint32_t id, char *name, size_t len)
{
	struct bpf_prog_info info = { 0 };
	uint32_t ilen = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);

	if (fd < 0)
		return -1;
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen)) {
		close(fd);
		return -1;
	}
	close(fd);
	snprintf(name, len, "%s", info.name);
	return 0;
}

static void gate_pin_path(const struct fg_kernel *k, char *path, size_t len)
{
	if (snprintf(path, len, "%s/%s", k->pin_dir, FG_PIN_GATE_PROG) >= (int)len)
		path[0] = '\0';
}

/* The id of the gate program a predecessor pinned while it was attached. */
static uint32_t pinned_gate_id(const struct fg_kernel *k)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	char path[PATH_MAX];
	int fd;

	gate_pin_path(k, path, sizeof(path));
	if (!path[0] || (fd = bpf_obj_get(path)) < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		info.id = 0;
	close(fd);
	return info.id;
}

/* While gate is attached its program is pinned beside the maps (the id a
 * restarted fairgated recognises it by); with nothing attached, no pin. */
static void pin_gate_as_needed(struct fg_kernel *k)
{
	char path[PATH_MAX];

	gate_pin_path(k, path, sizeof(path));
	if (!path[0])
		return;
	if (unlink(path) && errno != ENOENT)
		fprintf(stderr, "fairgated: removing %s: %s\n", path, strerror(errno));
	if (k->n_links && bpf_obj_pin(bpf_program__fd(k->gate->progs.fg_gate), path))
		fprintf(stderr, "fairgated: pinning %s: %s; a fairgated restarted after a crash "
			"needs CAP_SYS_ADMIN to replace this gate\n", path, strerror(errno));
}

/* A gate left attached by a fairgated that died without cleaning up is ours
 * to replace; anybody else's program is not. Ours is the one pinned beside
 * the maps; an older fairgated's (which pinned none) is known by name,
 * which takes CAP_SYS_ADMIN to read. */
static int clear_stale_gate(struct fg_kernel *k, int ifindex, const char *ifname, char *err,
			    size_t errlen)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	char name[BPF_OBJ_NAME_LEN] = "";
	uint32_t id, flags;

	if (bpf_xdp_query(ifindex, 0, &q))
		return 0;
	if (q.attach_mode == XDP_ATTACHED_NONE)
		return 0;
	id = q.attach_mode == XDP_ATTACHED_SKB ? q.skb_prog_id : q.drv_prog_id;
	if (!id)
		id = q.prog_id;
	if (id != k->stale_gate_id &&
	    (prog_name_by_id(id, name, sizeof(name)) || strcmp(name, GATE_PROG_NAME))) {
		snprintf(err, errlen,
			 "XDP attach to %s failed: program '%s' (id %u) is already attached; "
			 "fairgated does not replace another program", ifname, name[0] ? name : "?",
			 id);
		return -1;
	}
	flags = q.attach_mode == XDP_ATTACHED_SKB ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	bpf_xdp_detach(ifindex, flags, NULL);
	return 0;
}

_Static_assert(FG_IFNAME_MAX == IF_NAMESIZE, "the policy's interface names are the kernel's");

static void copy_ifname(char dst[FG_IFNAME_MAX], const char *src)
{
	size_t n = strnlen(src, FG_IFNAME_MAX - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Attach gate to one interface: 0, or -1 with err; *denied when the kernel
 * refused for want of privilege (then nothing else of the datapath works). */
static int attach_one(struct fg_kernel *k, const char *ifname, enum fg_xdp_mode mode, char *err,
		      size_t errlen, bool *denied)
{
	int prog_fd = bpf_program__fd(k->gate->progs.fg_gate);
	int ifindex = (int)if_nametoindex(ifname);
	uint32_t flags = XDP_FLAGS_UPDATE_IF_NOEXIST;
	struct fg_xdp_link *l;
	int rc;

	if (!ifindex) {
		snprintf(err, errlen, "XDP attach to %s failed: no such interface", ifname);
		return -1;
	}
	if (clear_stale_gate(k, ifindex, ifname, err, errlen))
		return -1;
	if (mode == FG_XDP_NATIVE) {
		rc = bpf_xdp_attach(ifindex, prog_fd, flags | XDP_FLAGS_DRV_MODE, NULL);
		if (!rc) {
			flags |= XDP_FLAGS_DRV_MODE;
			goto attached;
		}
		if (rc == -EPERM || rc == -EACCES) {
			fg_kernel_explain(err, errlen, "XDP attach", rc);
			*denied = true;
			return -1;
		}
		fprintf(stderr, "fairgated: %s: native XDP failed (%s), falling back to generic\n",
			ifname, strerror(-rc));
	}
	rc = bpf_xdp_attach(ifindex, prog_fd, flags | XDP_FLAGS_SKB_MODE, NULL);
	if (rc) {
		char what[64];

		snprintf(what, sizeof(what), "XDP attach to %.16s", ifname);
		fg_kernel_explain(err, errlen, what, rc);
		*denied = rc == -EPERM || rc == -EACCES;
		return -1;
	}
	flags |= XDP_FLAGS_SKB_MODE;
attached:
	l = &k->links[k->n_links++];
	l->ifindex = ifindex;
	l->flags = flags & ~XDP_FLAGS_UPDATE_IF_NOEXIST;
	copy_ifname(l->ifname, ifname);
	fprintf(stderr, "fairgated: gate attached to %s (%s)\n", ifname,
		(flags & XDP_FLAGS_DRV_MODE) ? "native" : "generic");
	return 0;
}

/* steer leaves SYNs that arrived where gate runs to gate. */
static void publish_gate_ifindexes(struct fg_kernel *k)
{
	struct fg_node_state *n = k->maps.node;
	int count = 0;

	if (!n)
		return;
	__atomic_store_n(&n->n_gate_ifindex, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < k->n_links && count < FG_MAX_GATE_IFACES; i++)
		n->gate_ifindex[count++] = (uint32_t)k->links[i].ifindex;
	__atomic_store_n(&n->n_gate_ifindex, count, __ATOMIC_RELEASE);
}

static void detach_all(struct fg_kernel *k)
{
	int prog_fd = k->gate ? bpf_program__fd(k->gate->progs.fg_gate) : -1;

	for (int i = 0; i < k->n_links; i++) {
		LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = prog_fd);

		/* Replace-with-nothing only if ours is still the one attached. */
		if (bpf_xdp_detach(k->links[i].ifindex, k->links[i].flags | XDP_FLAGS_REPLACE, &o))
			fprintf(stderr, "fairgated: detaching gate from %s: %s\n",
				k->links[i].ifname, strerror(errno));
	}
	k->n_links = 0;
	publish_gate_ifindexes(k);
}

/* Every interface of the policy, or where the default routes go. One that
 * cannot take gate (missing, another program there, no XDP) is one log
 * line and gate off there only: steer, the maps and the proxy go on. Only
 * a refusal for want of privilege fails the whole datapath. */
static int attach_gates(struct fg_kernel *k, const struct fg_agent *ag, char *err, size_t errlen)
{
	char names[FG_MAX_IFACES][FG_IFNAME_MAX];
	int n = 0;

	if (ag->interfaces_auto) {
		n = fg_default_route_ifaces(names, FG_MAX_IFACES, k->gate_note, sizeof(k->gate_note));
		if (n <= 0) {
			fprintf(stderr, "fairgated: gate (XDP) off: interfaces: auto: %s\n", k->gate_note);
			return 0;
		}
		k->gate_note[0] = '\0';
	} else {
		for (uint32_t i = 0; i < ag->n_interfaces && i < FG_MAX_IFACES; i++)
			copy_ifname(names[n++], ag->interfaces[i]);
	}
	for (int i = 0; i < n; i++) {
		struct fg_xdp_off *off = &k->off[k->n_off];
		bool denied = false;

		if (!attach_one(k, names[i], ag->xdp_mode, off->why, sizeof(off->why), &denied))
			continue;
		if (denied) {
			snprintf(err, errlen, "%s", off->why);
			return -1;
		}
		copy_ifname(off->ifname, names[i]);
		k->n_off++;
		fprintf(stderr, "fairgated: gate (XDP) off on %s: %s\n", names[i], off->why);
	}
	return 0;
}

void fg_kernel_gate_status(const struct fg_agent_state *st, struct fg_gate_status *out)
{
	const struct fg_kernel *k = st->kernel;

	memset(out, 0, sizeof(*out));
	out->auto_ifaces = st->policy && st->policy->agent.interfaces_auto;
	if (!k) {
		snprintf(out->note, sizeof(out->note), "kernel enforcement is off");
		return;
	}
	for (int i = 0; i < k->n_links && out->n < FG_MAX_IFACES; i++) {
		struct fg_gate_iface *g = &out->ifaces[out->n++];
		copy_ifname(g->ifname, k->links[i].ifname);
		g->attached = true;
		g->native = k->links[i].flags & XDP_FLAGS_DRV_MODE;
	}
	for (int i = 0; i < k->n_off && out->n < FG_MAX_IFACES; i++) {
		struct fg_gate_iface *g = &out->ifaces[out->n++];
		copy_ifname(g->ifname, k->off[i].ifname);
		snprintf(g->why, sizeof(g->why), "%s", k->off[i].why);
	}
	snprintf(out->note, sizeof(out->note), "%s", k->gate_note);
}

/* ---- shed events ---- */

static int on_shed_event(void *ctx, void *data, size_t len)
{
	struct fg_kernel *k = ctx;
	const struct fg_shed_event *ev = data;

	if (len < sizeof(*ev))
		return 0;
	k->shed_events++;
	k->last_shed = *ev;
	return 0;
}

static void on_shed_ready(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_kernel *k = ctx;
	uint64_t now = fg_now_ns();

	(void)loop;
	(void)fd;
	(void)events;
	ring_buffer__consume(k->shed_rb);
	/* One summary line at most every 10 s: sheds are the kernel doing its
	 * job, not news, but an operator tailing the log should see them. */
	if (k->shed_events && now - k->shed_logged_ns >= 10ull * 1000000000ull) {
		char addr[64];
		const char *who = "?";

		if (k->last_shed.tenant_id < FG_MAP_MAX_TENANTS)
			who = k->maps.tenants[k->last_shed.tenant_id].name;
		fg_src_key_format((const struct fg_src_key *)k->last_shed.saddr, addr, sizeof(addr));
		fprintf(stderr,
			"fairgated: %llu sampled shed events; last: tenant %s from %s:%u (%s)\n",
			(unsigned long long)k->shed_events, who, addr, k->last_shed.sport,
			k->last_shed.reason == FG_SHED_DELAY ? "delay" :
			k->last_shed.reason == FG_SHED_OVERLOAD ? "overload" :
			k->last_shed.reason == FG_SHED_RST_BUDGET ? "dropped: RST budget spent" : "rst");
		k->shed_events = 0;
		k->shed_logged_ns = now;
	}
}

/* ---- lifecycle ---- */

int fg_kernel_open(struct fg_agent_state *st, char *err, size_t errlen)
{
	const char *pin_dir = st->opts.pin_dir ? st->opts.pin_dir : FG_PIN_DIR;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = pin_dir);
	const struct fg_agent *ag = &st->policy->agent;
	struct fg_kernel *k;
	int rc;

	fg_kernel_quiet_libbpf();
	if (prepare_pin_dir(pin_dir, err, errlen))
		return -1;
	k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(k->pin_dir, sizeof(k->pin_dir), "%s", pin_dir);
	k->steer_listen_fd = -1;

	k->gate = gate_bpf__open_opts(&oo);
	if (!k->gate) {
		fg_kernel_explain(err, errlen, "opening the gate program", errno);
		goto fail;
	}
	if (check_pinned_layouts(k->gate->obj, pin_dir, st->opts.cleanup, err, errlen))
		goto fail;
	rc = gate_bpf__load(k->gate);
	if (rc) {
		fg_kernel_explain(err, errlen, "loading the gate program", rc);
		goto fail;
	}
	if (fg_maps_from_object(&k->maps, k->gate->obj, err, errlen))
		goto fail;
	if (fg_maps_apply_policy(&k->maps, st->policy, err, errlen))
		goto fail;
	/* Overload is a live measurement, not state worth keeping: the
	 * controller republishes it. Deny windows and counters are kept. */
	fg_maps_set_overload_rank(&k->maps, -1, 0);
	k->maps.node->agent_started_ns = fg_now_ns();
	/* Without the index gate is as exact, only slower on new sources. */
	if (fg_src_index_start(&k->maps, err, errlen)) {
		fprintf(stderr, "fairgated: %s: gate asks the maps for every new source\n", err);
		err[0] = '\0';
	}

	k->stale_gate_id = pinned_gate_id(k);
	if (attach_gates(k, ag, err, errlen))
		goto fail;
	pin_gate_as_needed(k);
	publish_gate_ifindexes(k);

	k->shed_rb = ring_buffer__new(k->maps.shed_events_fd, on_shed_event, k, NULL);
	if (k->shed_rb && st->loop)
		fg_loop_add(st->loop, ring_buffer__epoll_fd(k->shed_rb), EPOLLIN, on_shed_ready, k);

	st->kernel = k;
	if (fg_kernel_steer_open(st, err, errlen)) {
		fprintf(stderr, "fairgated: steer (sk_lookup) off: %s\n", err);
		err[0] = '\0';
	}
	return 0;

fail:
	detach_all(k);
	fg_maps_close(&k->maps);
	gate_bpf__destroy(k->gate);
	free(k);
	return -1;
}

int fg_kernel_apply_policy(struct fg_agent_state *st, const struct fg_policy *p)
{
	char err[256];

	if (!st->kernel)
		return 0;
	if (fg_maps_apply_policy(&st->kernel->maps, p, err, sizeof(err))) {
		fprintf(stderr, "fairgated: applying policy to the maps: %s\n", err);
		return -1;
	}
	fg_kernel_steer_apply(st, p);
	return 0;
}

void fg_kernel_close(struct fg_agent_state *st)
{
	struct fg_kernel *k = st->kernel;

	if (!k)
		return;
	fg_kernel_steer_close(st);
	if (k->shed_rb) {
		if (st->loop)
			fg_loop_del(st->loop, ring_buffer__epoll_fd(k->shed_rb));
		ring_buffer__free(k->shed_rb);
	}
	detach_all(k);
	/* Only here: a start that failed leaves a dead predecessor's pin (and
	 * its gate) for the next start to recognise. */
	pin_gate_as_needed(k);
	fg_maps_close(&k->maps);
	if (st->opts.cleanup) {
		if (bpf_object__unpin_maps(k->gate->obj, NULL))
			fprintf(stderr, "fairgated: unpinning maps under %s: %s\n", k->pin_dir,
				strerror(errno));
		if (rmdir(k->pin_dir) && errno != ENOENT)
			fprintf(stderr, "fairgated: removing %s: %s\n", k->pin_dir, strerror(errno));
	}
	gate_bpf__destroy(k->gate);
	free(k);
	st->kernel = NULL;
}

bool fg_kernel_source_index(struct fg_agent_state *st, struct fg_src_index_stats *out)
{
	if (!st->kernel)
		return false;
	fg_src_index_get_stats(&st->kernel->maps, out);
	return true;
}

/* ---- what the proxy and controller publish ---- */

static int tenant_ok(struct fg_agent_state *st, uint32_t id)
{
	if (id >= FG_MAP_MAX_TENANTS || (st->policy && id >= st->policy->n_tenants)) {
		errno = ERANGE;
		return 0;
	}
	return 1;
}

static int64_t clamp_i64(double v)
{
	if (!(v == v))
		return 0;
	if (v > 9e18)
		return INT64_MAX;
	if (v < -9e18)
		return INT64_MIN;
	return (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
}

/* The books' fractional figures, in thousandths; never negative */
static uint64_t to_milli(double v)
{
	return v > 0 ? (uint64_t)clamp_i64(v * 1000) : 0;
}

int fg_kernel_publish_tenant(struct fg_agent_state *st, uint32_t tenant_id,
			     const struct fg_tenant_pub *pub)
{
	struct fg_tenant_quota *q;

	if (!st->kernel)
		return 0;
	if (!tenant_ok(st, tenant_id))
		return -1;
	q = &st->kernel->maps.tenants[tenant_id].quota;
	uint64_t prev = fg_quota_write_begin(q);
	q->bucket_units = clamp_i64(pub->bucket_units);
	q->rate_units_per_s = (uint64_t)(pub->rate_units_per_s > 0 ? clamp_i64(pub->rate_units_per_s) : 0);
	q->burst_units = (uint64_t)(pub->burst_units > 0 ? clamp_i64(pub->burst_units) : 0);
	q->reserved_units = (uint64_t)(pub->reserved_units > 0 ? clamp_i64(pub->reserved_units) : 0);
	q->kv_resident_tokens = pub->kv_resident_tokens;
	q->kv_cap_tokens = pub->kv_cap_tokens;
	q->inflight = pub->inflight;
	q->queued = pub->queued;
	q->admitted = pub->admitted;
	q->rejected = pub->rejected;
	q->settled = pub->settled;
	q->written_off = pub->written_off;
	q->long_context = pub->long_context;
	q->timed_out = pub->timed_out;
	q->exact_counts = pub->exact_counts;
	q->cut_off = pub->cut_off;
	q->usage_clamped = pub->usage_clamped;
	q->units_billed_milli = to_milli(pub->units_billed);
	q->units_refunded_milli = to_milli(pub->units_refunded);
	q->units_written_off_milli = to_milli(pub->units_written_off);
	q->output_tokens_billed_milli = to_milli(pub->output_tokens_billed);
	q->output_units_billed_milli = to_milli(pub->output_units_billed);
	q->typical_cost_milli = to_milli(pub->typical_cost);
	memcpy(q->outcomes, pub->outcomes, sizeof(q->outcomes));
	fg_quota_write_end(q, prev, fg_now_ns());
	return 0;
}

bool fg_kernel_read_quota(struct fg_agent_state *st, uint32_t tenant_id,
			  struct fg_tenant_quota *out)
{
	if (!st->kernel || !tenant_ok(st, tenant_id))
		return false;
	if (!fg_quota_snapshot(&st->kernel->maps.tenants[tenant_id].quota, out))
		return false;
	return out->updated_ns && out->updated_ns != FG_QUOTA_WRITING;
}

bool fg_kernel_read_pub(struct fg_agent_state *st, uint32_t tenant_id, struct fg_tenant_pub *out,
			uint64_t *updated_ns)
{
	struct fg_tenant_quota q;

	memset(out, 0, sizeof(*out));
	if (!fg_kernel_read_quota(st, tenant_id, &q))
		return false;
	*out = (struct fg_tenant_pub){
		.bucket_units = (double)q.bucket_units,
		.rate_units_per_s = (double)q.rate_units_per_s,
		.burst_units = (double)q.burst_units,
		.reserved_units = (double)q.reserved_units,
		.kv_resident_tokens = q.kv_resident_tokens,
		.kv_cap_tokens = q.kv_cap_tokens,
		.inflight = q.inflight,
		.queued = q.queued,
		.admitted = q.admitted,
		.rejected = q.rejected,
		.settled = q.settled,
		.written_off = q.written_off,
		.long_context = q.long_context,
		.timed_out = q.timed_out,
		.exact_counts = q.exact_counts,
		.cut_off = q.cut_off,
		.usage_clamped = q.usage_clamped,
		.units_billed = (double)q.units_billed_milli / 1000,
		.units_refunded = (double)q.units_refunded_milli / 1000,
		.units_written_off = (double)q.units_written_off_milli / 1000,
		.output_tokens_billed = (double)q.output_tokens_billed_milli / 1000,
		.output_units_billed = (double)q.output_units_billed_milli / 1000,
		.typical_cost = (double)q.typical_cost_milli / 1000,
	};
	memcpy(out->outcomes, q.outcomes, sizeof(out->outcomes));
	if (updated_ns)
		*updated_ns = q.updated_ns;
	return true;
}

int fg_kernel_set_deny_from(struct fg_agent_state *st, uint32_t tenant_id, uint64_t until_ns,
			    int verdict, int source)
{
	if (!st->kernel)
		return 0;
	if (!tenant_ok(st, tenant_id))
		return -1;
	return fg_maps_set_deny(&st->kernel->maps, tenant_id, until_ns, verdict, source);
}

int fg_kernel_set_deny(struct fg_agent_state *st, uint32_t tenant_id, uint64_t until_ns,
		       int verdict)
{
	return fg_kernel_set_deny_from(st, tenant_id, until_ns, verdict, FG_DENY_QUOTA);
}

int fg_kernel_get_deny_from(struct fg_agent_state *st, uint32_t tenant_id, uint64_t *until_ns,
			    int *source)
{
	const struct fg_tenant_state *t;
	uint64_t until;
	uint32_t verdict, from;

	if (until_ns)
		*until_ns = 0;
	if (source)
		*source = FG_DENY_NONE;
	if (!st->kernel || !tenant_ok(st, tenant_id))
		return FG_VERDICT_ALLOW;
	t = &st->kernel->maps.tenants[tenant_id];
	until = __atomic_load_n(&t->deny_until_ns, __ATOMIC_ACQUIRE);
	verdict = __atomic_load_n(&t->verdict, __ATOMIC_RELAXED);
	from = __atomic_load_n(&t->deny_source, __ATOMIC_RELAXED);
	if (until <= fg_now_ns() || (verdict != FG_VERDICT_DELAY && verdict != FG_VERDICT_SHED))
		return FG_VERDICT_ALLOW;
	if (until_ns)
		*until_ns = until;
	if (source)
		*source = (int)from;
	return (int)verdict;
}

int fg_kernel_get_deny(struct fg_agent_state *st, uint32_t tenant_id, uint64_t *until_ns)
{
	return fg_kernel_get_deny_from(st, tenant_id, until_ns, NULL);
}

int fg_kernel_learn_source(struct fg_agent_state *st, const struct sockaddr *peer,
			   uint32_t tenant_id)
{
	struct fg_src_key key;

	if (!st->kernel)
		return 0;
	if (!tenant_ok(st, tenant_id) || fg_src_key_from_sockaddr(peer, &key))
		return -1;
	return fg_maps_learn_source(&st->kernel->maps, &key, tenant_id, fg_now_ns()) < 0 ? -1 : 0;
}

int fg_kernel_set_overload_tier(struct fg_agent_state *st, int level)
{
	if (!st->kernel)
		return 0;
	return fg_maps_set_overload_rank(&st->kernel->maps, level, fg_now_ns() + FG_OVERLOAD_LEASE_NS);
}

int fg_kernel_tier_rank(const struct fg_policy *p, uint32_t tier)
{
	return fg_tier_rank(p, tier);
}
