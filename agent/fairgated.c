/* fairgated.c — the node agent's entry point: read the policy, take
 * ownership of the kernel state, serve the control socket and the proxy on
 * one epoll loop, stop cleanly on SIGINT/SIGTERM. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/ctl_server.h"
#include "agent/kernel.h"
#include "agent/proxy.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fairgated --policy FILE [--ctl PATH] [--pin-dir DIR] [--cleanup] [--no-bpf]\n"
		"  --policy FILE   policy file (YAML or JSON)\n"
		"  --ctl PATH      control socket (default " FG_CTL_SOCK_PATH ")\n"
		"  --pin-dir DIR   where maps are pinned (default /sys/fs/bpf/fairgate)\n"
		"  --cleanup       unpin the maps on exit (default: keep them, so a restart\n"
		"                  keeps deny windows and counters)\n"
		"  --no-bpf        proxy and meter only, without kernel enforcement\n");
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "pin-dir", required_argument, NULL, 'd' },
		{ "cleanup", no_argument, NULL, 'C' },
		{ "no-bpf", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct fg_agent_state st = { 0 };
	char err[512];
	int opt, rc = 1;

	st.opts.ctl_path = FG_CTL_SOCK_PATH;
	while ((opt = getopt_long(argc, argv, "p:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': st.opts.policy_path = optarg; break;
		case 'c': st.opts.ctl_path = optarg; break;
		case 'd': st.opts.pin_dir = optarg; break;
		case 'C': st.opts.cleanup = true; break;
		case 'N': st.opts.no_bpf = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!st.opts.policy_path || optind != argc) {
		usage(stderr);
		return 2;
	}

	struct fg_policy_error perr;
	st.policy = malloc(sizeof(*st.policy));
	if (!st.policy || fg_policy_parse_file(st.opts.policy_path, st.policy, &perr)) {
		if (st.policy) {
			fg_policy_error_format(&perr, err, sizeof(err));
			fprintf(stderr, "%s\n", err);
		}
		free(st.policy);
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
	} else if (fg_kernel_open(&st, err, sizeof(err))) {
		fprintf(stderr, "fairgated: kernel enforcement off: %s\n", err);
	}
	if (fg_ctl_server_start(&st, err, sizeof(err))) {
		fprintf(stderr, "fairgated: control socket: %s\n", err);
		goto out;
	}
	if (fg_proxy_start(&st, err, sizeof(err))) {
		fprintf(stderr, "fairgated: proxy: %s\n", err);
		goto out;
	}
	fprintf(stderr, "fairgated: running with %u tenants, %u tiers\n", st.policy->n_tenants,
		st.policy->n_tiers);
	rc = fg_loop_run(st.loop) ? 1 : 0;

out:
	fg_proxy_stop(&st);
	fg_ctl_server_stop(&st);
	fg_kernel_close(&st);
	fg_loop_free(st.loop);
	free(st.policy);
	return rc;
}
