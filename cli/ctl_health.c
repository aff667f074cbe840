/* ctl_health.c — `fairgatectl health [--ready] [--timeout S]`, the
 * DaemonSet's probes. Live: fairgated answers on its control socket within
 * the timeout, which it does from the one event loop the proxy runs on, so
 * a wedged loop fails it. Ready (--ready): live, and the proxy's listener
 * accepts a TCP connection (at the address and port fairgated reports,
 * loopback when it listens on every address; in transparent mode the port
 * is one fairgated chose), and in transparent mode with kernel enforcement
 * steer hands it the clients. Exit 0 yes, 1 no (one line saying why), 2
 * usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/ctl_commands.h"
#include "lib/ctl_protocol.h"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A TCP connect to the proxy's listener within ms: to its address, or to
 * loopback when it listens on every address (or did not say where);
 * 0, or -1 with why. */
static int connect_within(int family, const char *addr, int port, unsigned ms, char *why,
			  size_t len)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	int fd, rc = -1;

	if (family == 6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (!addr || inet_pton(AF_INET6, addr, &a->sin6_addr) != 1 ||
		    IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
			a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		if (!addr || inet_pton(AF_INET, addr, &a->sin_addr) != 1 ||
		    a->sin_addr.s_addr == htonl(INADDR_ANY))
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, len, "socket: %s", strerror(errno));
		return -1;
	}
	if (!connect(fd, (struct sockaddr *)&ss, sl)) {
		rc = 0;
	} else if (errno == EINPROGRESS) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int e = 0;
		socklen_t el = sizeof(e);
		int n = poll(&p, 1, (int)ms);
		if (n == 1 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) && !e)
			rc = 0;
		else
			snprintf(why, len, "%s", n == 0 ? "no answer in time" : strerror(e ? e : errno));
	} else {
		snprintf(why, len, "%s", strerror(errno));
	}
	close(fd);
	return rc;
}

int fg_cmd_health(int argc, char **argv)
{
	static const char usage[] =
		"usage: fairgatectl health [--ready] [--timeout SECONDS] [--json] [--ctl PATH]\n";
	static const struct option longopts[] = {
		{ "ready", no_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "ctl", required_argument, NULL, 'c' },
		{ 0 }
	};
	const char *ctl = NULL;
	int opt, ready = 0, json = 0;
	double timeout_s = 2;
	char err[512], *end;

	optind = 0;
	while ((opt = getopt_long(argc + 1, argv - 1, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': ready = 1; break;
		case 'j': json = 1; break;
		case 'c': ctl = optarg; break;
		case 't':
			timeout_s = strtod(optarg, &end);
			if (*end || end == optarg || !(timeout_s > 0 && timeout_s <= 600)) {
				fprintf(stderr, "fairgatectl: --timeout %s: seconds in (0, 600]\n", optarg);
				return 2;
			}
			break;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc + 1) {
		fputs(usage, stderr);
		return 2;
	}
	unsigned budget_ms = (unsigned)(timeout_s * 1000 + 0.5);
	uint64_t start = now_ms();
	json_t *req = json_pack("{s:s}", "cmd", "health");
	json_t *reply = fg_ctl_call_within(fg_ctl_path(ctl), req, budget_ms ? budget_ms : 1, err,
					   sizeof(err));
	json_decref(req);
	const char *verdict = NULL;
	char why[700] = "";
	int rc = 1;

	if (!reply) {
		snprintf(why, sizeof(why), "%s", err);
	} else if (!json_is_true(json_object_get(reply, "ok"))) {
		snprintf(why, sizeof(why), "%s", json_string_value(json_object_get(reply, "error"))
				? json_string_value(json_object_get(reply, "error")) : "refused");
	} else if (!ready) {
		verdict = "live: fairgated answers";
		rc = 0;
	} else {
		int port = (int)json_integer_value(json_object_get(reply, "listen_port"));
		int family = (int)json_integer_value(json_object_get(reply, "listen_family"));
		const char *addr = json_string_value(json_object_get(reply, "listen_address"));
		const char *mode = json_string_value(json_object_get(reply, "mode"));
		uint64_t spent = now_ms() - start;
		unsigned left = spent < budget_ms ? budget_ms - (unsigned)spent : 1;

		if (!json_is_true(json_object_get(reply, "proxy")))
			snprintf(why, sizeof(why), "the proxy is not listening");
		else if (mode && !strcmp(mode, "transparent") &&
			 json_is_true(json_object_get(reply, "kernel_enforcement")) &&
			 !json_is_true(json_object_get(reply, "steering")))
			snprintf(why, sizeof(why), "transparent mode, but steer does not hand the clients to the proxy");
		else if (connect_within(family, addr, port, left, err, sizeof(err)))
			snprintf(why, sizeof(why), "the proxy's port %d does not accept: %s", port, err);
		else {
			verdict = "ready: the proxy accepts";
			rc = 0;
		}
	}
	if (json) {
		json_t *o = json_pack("{s:b, s:s}", ready ? "ready" : "live", rc == 0, "detail",
				      rc == 0 ? verdict : why);
		if (reply && json_is_true(json_object_get(reply, "ok"))) {
			json_object_del(reply, "ok");
			json_object_set(o, "agent", reply);
		}
		json_dumpf(o, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		putchar('\n');
		json_decref(o);
	} else if (rc == 0) {
		printf("%s\n", verdict);
	} else {
		fprintf(stderr, "fairgatectl: not %s: %s\n", ready ? "ready" : "live", why);
	}
	json_decref(reply);
	return rc;
}
