/* fairgated.c — the node agent's entry point: read the policy, take
 * ownership of the kernel state, serve the control socket and the proxy on
 * one epoll loop, watch the policy files, stop cleanly on SIGINT/SIGTERM. */
#include <arpa/inet.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/kernel/capabilities.h"
#include "agent/ctl/ctl_commands.h"
#include "agent/ctl/ctl_server.h"
#include "agent/kernel/kernel.h"
#include "agent/policy_apply.h"
#include "agent/policy_watch.h"
#include "agent/proxy/proxy.h"

/* the allocator's thresholds (main, after the start-up trim) */
#define FG_HEAP_KEEP (4 << 20)
#define FG_HEAP_MMAP_MIN (32 << 20) /* glibc's largest: bodies above it are mapped */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fairgated --policy FILE [--tenants FILE] [--metrics-address ADDR] [--ctl PATH]\n"
		"                 [--pin-dir DIR] [--cleanup] [--no-bpf] [--no-watch]\n"
		"       fairgated --capabilities | --mount-bpffs\n"
		"  --policy FILE   policy file (YAML or JSON)\n"
		"  --tenants FILE  the policy's tenants, in a file of their own (a mapping with\n"
		"                  the one key `tenants`; the policy file then has none)\n"
		"  --metrics-address ADDR\n"
		"                  serve metrics on ADDR (the node's address) at the port of\n"
		"                  agent.metrics_listen\n"
		"  --ctl PATH      control socket (default " FG_CTL_SOCK_PATH ")\n"
		"  --pin-dir DIR   where maps are pinned (default /sys/fs/bpf/fairgate)\n"
		"  --cleanup       unpin the maps on exit (default: keep them, so a restart\n"
		"                  keeps deny windows and counters)\n"
		"  --no-bpf        proxy and meter only, without kernel enforcement\n"
		"  --no-watch      do not re-apply the policy files when they change\n"
		"  --capabilities  print the capabilities kernel enforcement needs, and why\n"
		"  --mount-bpffs   mount bpffs at /sys/fs/bpf unless it is one, then exit\n");
}

static void on_signal(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct signalfd_siginfo si;
	(void)events;
	(void)ctx;
	if (read(fd, &si, sizeof(si)) == sizeof(si)) {
		fprintf(stderr, "fairgated: %s, shutting down\n", strsignal((int)si.ssi_signo));
		fg_loop_stop(loop);
	}
}

static bool numeric_address(const char *s)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* The DaemonSet's init container: a privileged, Bidirectional-propagation
 * mount of the node's /sys/fs/bpf, so the agent itself needs no
 * CAP_SYS_ADMIN and never mounts a private bpffs its pins would vanish with. */
static int mount_bpffs(void)
{
	char err[256];
	int rc = fg_kernel_mount_bpffs(err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "fairgated: %s\n", err);
		return 1;
	}
	fprintf(stderr, "fairgated: %s\n", rc ? "mounted bpffs at /sys/fs/bpf"
					     : "/sys/fs/bpf is a bpffs already");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "pin-dir", required_argument, NULL, 'd' },
		{ "cleanup", no_argument, NULL, 'C' },
		{ "no-bpf", no_argument, NULL, 'N' },
		{ "tenants", required_argument, NULL, 't' },
		{ "metrics-address", required_argument, NULL, 'm' },
		{ "no-watch", no_argument, NULL, 'W' },
		{ "capabilities", no_argument, NULL, 'K' },
		{ "mount-bpffs", no_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct fg_agent_state st = { 0 };
	char err[512];
	int opt, rc = 1;

	st.opts.ctl_path = FG_CTL_SOCK_PATH;
	st.opts.watch = true;
	while ((opt = getopt_long(argc, argv, "p:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': st.opts.policy_path = optarg; break;
		case 'c': st.opts.ctl_path = optarg; break;
		case 'd': st.opts.pin_dir = optarg; break;
		case 'C': st.opts.cleanup = true; break;
		case 'N': st.opts.no_bpf = true; break;
		case 't': st.opts.tenants_path = optarg; break;
		case 'm': st.opts.metrics_address = optarg; break;
		case 'W': st.opts.watch = false; break;
		case 'K': fg_caps_print(); return 0;
		case 'B': return mount_bpffs();
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!st.opts.policy_path || optind != argc) {
		usage(stderr);
		return 2;
	}

	if (st.opts.metrics_address && !numeric_address(st.opts.metrics_address)) {
		fprintf(stderr, "fairgated: --metrics-address %s: not a numeric IPv4 or IPv6 address\n",
			st.opts.metrics_address);
		return 2;
	}
	/* The texts the running policy comes from, for the watch to compare. */
	struct fg_policy_error perr;
	char *text = NULL, *ttext = NULL;
	size_t len = 0, tlen = 0;
	if (fg_policy_read_file(st.opts.policy_path, &text, &len, &perr) ||
	    (st.opts.tenants_path && fg_policy_read_file(st.opts.tenants_path, &ttext, &tlen, &perr))) {
		fg_policy_error_format(&perr, err, sizeof(err));
		fprintf(stderr, "%s\n", err);
		free(text);
		return 2;
	}
	st.policy = fg_agent_parse_policy(&st.opts, text, len, st.opts.policy_path, ttext, tlen,
					  st.opts.tenants_path, err, sizeof(err));
	if (!st.policy) {
		fprintf(stderr, "%s\n", err);
		free(text);
		free(ttext);
		return 2;
	}
	fg_cost_model_init_policy(&st.cm, st.policy);

	st.loop = fg_loop_new();
	if (!st.loop) {
		perror("fairgated: epoll");
		goto out;
	}

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || fg_loop_add(st.loop, sfd, EPOLLIN, on_signal, NULL)) {
		perror("fairgated: signalfd");
		goto out;
	}

	if (st.opts.no_bpf) {
		fprintf(stderr, "fairgated: kernel enforcement off (--no-bpf); proxying and metering only\n");
		snprintf(st.kernel_off, sizeof(st.kernel_off), "--no-bpf");
	} else if (fg_kernel_open(&st, err, sizeof(err))) {
		fprintf(stderr, "fairgated: kernel enforcement off: %s\n", err);
		snprintf(st.kernel_off, sizeof(st.kernel_off), "%s", err);
	}
	/* every command, once: the rooms below never register themselves */
	fg_ctl_agent_register();
	fg_ctl_proxy_register();
	fg_ctl_kernel_register();
	fg_ctl_fleet_register();
	if (fg_ctl_server_start(&st, err, sizeof(err))) {
		fprintf(stderr, "fairgated: control socket: %s\n", err);
		goto out;
	}
	if (fg_proxy_start(&st, err, sizeof(err))) {
		fprintf(stderr, "fairgated: proxy: %s\n", err);
		goto out;
	}
	if (st.opts.watch && fg_policy_watch_start(&st, text, ttext, err, sizeof(err)))
		fprintf(stderr, "fairgated: policy watch off: %s; apply changes with "
			"`fairgatectl policy apply`\n", err);
	free(text);
	free(ttext);
	text = ttext = NULL;
	/* the parse's tree is gone: its pages go back rather than stay as
	 * the allocator's slack (tens of MB for a large policy) */
	malloc_trim(0);
	/* Then fixed thresholds: glibc's defaults give a request's blocks back
	 * to the kernel at its end (the heap's top trimmed past 128 KiB, a
	 * body past the mmap threshold unmapped) and fault them in again at
	 * the next one, a page fault per 4 KiB of every body; up to
	 * FG_HEAP_KEEP of freed top stays for the next requests instead, and
	 * bodies up to the largest allowed come from the heap. */
	mallopt(M_TRIM_THRESHOLD, FG_HEAP_KEEP);
	mallopt(M_MMAP_THRESHOLD, FG_HEAP_MMAP_MIN);
	fprintf(stderr, "fairgated: running with %u tenants, %u tiers\n", st.policy->n_tenants,
		st.policy->n_tiers);
	rc = fg_loop_run(st.loop) ? 1 : 0;

out:
	free(text);
	free(ttext);
	fg_policy_watch_stop(&st);
	fg_proxy_stop(&st);
	fg_ctl_server_stop(&st);
	fg_kernel_close(&st);
	fg_loop_free(st.loop);
	fg_policy_free(st.policy);
	return rc;
}
