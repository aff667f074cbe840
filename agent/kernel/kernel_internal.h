/* kernel_internal.h — what kernel*.c share inside fairgated: the state
 * behind st->kernel. Not for the proxy or fairgatectl (they use kernel.h
 * and kernel_maps.h). */
#ifndef FAIRGATE_KERNEL_INTERNAL_H
#define FAIRGATE_KERNEL_INTERNAL_H

#include <limits.h>
#include <stdint.h>
#include "agent/agent.h"
#include "maps/kernel_maps.h"

struct gate_bpf;
struct steer_bpf;
struct ring_buffer;
struct bpf_link;

struct fg_xdp_link {
	int ifindex;
	uint32_t flags;        /* XDP_FLAGS_*_MODE it was attached with */
	char ifname[FG_IFNAME_MAX];
};

/* An interface of the policy gate is not attached to, and why. */
struct fg_xdp_off {
	char ifname[FG_IFNAME_MAX];
	char why[320];
};

struct fg_kernel {
	char pin_dir[PATH_MAX];
	struct gate_bpf *gate;
	struct fg_maps maps;
	struct fg_xdp_link links[FG_MAX_IFACES];
	int n_links;
	struct fg_xdp_off off[FG_MAX_IFACES];
	int n_off;
	char gate_note[200];          /* interfaces: auto found none: why */
	uint32_t stale_gate_id;       /* the gate a predecessor left pinned (0: none) */

	struct ring_buffer *shed_rb;
	uint64_t shed_events;         /* since the last log line */
	uint64_t shed_logged_ns;
	struct fg_shed_event last_shed;

	struct steer_bpf *steer;
	struct bpf_link *steer_link;
	int steer_listen_fd;
};

/* kernel_errors.c: libbpf's output and one-line bpf() errors. */
void fg_kernel_quiet_libbpf(void);
const char *fg_kernel_libbpf_last(void);
void fg_kernel_explain(char *err, size_t errlen, const char *what, int e);

/* kernel_steer.c: sk_lookup steering (transparent mode). */
int fg_kernel_steer_open(struct fg_agent_state *st, char *err, size_t errlen);
void fg_kernel_steer_close(struct fg_agent_state *st);
/* After a policy reload: the engine path and the fail-open choice. */
void fg_kernel_steer_apply(struct fg_agent_state *st, const struct fg_policy *p);

#endif
