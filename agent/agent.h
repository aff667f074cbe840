/* agent.h — the state one fairgated process owns, shared by its modules.
 *
 * fairgated.c builds this once, then hands it to the kernel module
 * (kernel.h: maps and XDP), the control server (ctl_server.h) and the proxy
 * (proxy.h). Everything runs on `loop`, except the proxy's connections
 * when agent.workers > 1: those live on the workers' own loops, and then
 * every loop runs its callbacks under one shared lock (proxy/workers.h).
 */
#ifndef FAIRGATE_AGENT_H
#define FAIRGATE_AGENT_H

#include <stdbool.h>
#include "policy/policy.h"
#include "policy/cost_model.h"
#include "lib/event_loop.h"
#include "lib/ctl_protocol.h"

struct fg_kernel;
struct fg_ctl_server;
struct fg_proxy;
struct fg_policy_watch;

struct fg_agent_opts {
	const char *policy_path;
	const char *tenants_path;     /* --tenants: the policy's tenants in a file of their own */
	const char *metrics_address;  /* --metrics-address: replaces agent.metrics_listen's host */
	bool watch;                   /* re-apply the policy files when they change (default) */
	const char *ctl_path;     /* default FG_CTL_SOCK_PATH */
	const char *pin_dir;      /* default FG_PIN_DIR (maps/) */
	bool cleanup;             /* unpin maps on exit */
	bool no_bpf;              /* run without kernel enforcement */
};

struct fg_agent_state {
	struct fg_agent_opts opts;
	struct fg_policy *policy;    /* current policy; replaced whole on reload */
	struct fg_cost_model cm;
	struct fg_loop *loop;
	struct fg_kernel *kernel;    /* NULL when kernel enforcement is off */
	struct fg_ctl_server *ctl;
	struct fg_proxy *proxy;
	struct fg_policy_watch *watch; /* NULL with --no-watch */
	char kernel_off[512];          /* why kernel enforcement is off ("" when on) */
};

#endif
