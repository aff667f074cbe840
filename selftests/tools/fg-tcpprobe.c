/* fg-tcpprobe — real TCP connects and listens for the datapath tests, with
 * what shell tools lack: a chosen source address, a millisecond timeout and
 * an outcome that tells "refused" (an RST came back) from "timeout" (the SYN
 * went unanswered).
 *
 *   fg-tcpprobe connect HOST PORT [--src ADDR] [--timeout-ms N] [--count N]
 *       one line per connect: "connected MS" | "refused MS" | "timeout MS",
 *       then with --count a summary "connected=X refused=Y timeout=Z".
 *       Exit 0 if the (last) connect succeeded, 3 refused, 4 timeout, 1 error.
 *   fg-tcpprobe listen HOST PORT
 *       accept and close connections until killed ("listening" when ready).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTED = 0, REFUSED = 3, TIMEOUT = 4, FAILED = 1 };

static int resolve(const char *host, const char *port, int passive, struct sockaddr_storage *ss,
		   socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | (passive ? AI_PASSIVE : 0) };
	struct addrinfo *ai;
	int rc = getaddrinfo(host, port, &hints, &ai);

	if (rc) {
		fprintf(stderr, "fg-tcpprobe: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int connect_once(const struct sockaddr_storage *dst, socklen_t dlen, const char *src,
			int timeout_ms)
{
	struct timespec t0;
	int fd = socket(dst->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), rc, err = 0;
	socklen_t elen = sizeof(err);
	struct pollfd p;

	if (fd < 0) {
		perror("fg-tcpprobe: socket");
		return FAILED;
	}
	if (src) {
		struct sockaddr_storage ss;
		socklen_t slen;

		if (resolve(src, "0", 1, &ss, &slen) || bind(fd, (struct sockaddr *)&ss, slen)) {
			fprintf(stderr, "fg-tcpprobe: bind %s: %s\n", src, strerror(errno));
			close(fd);
			return FAILED;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = connect(fd, (const struct sockaddr *)dst, dlen);
	if (rc && errno != EINPROGRESS) {
		err = errno;
	} else if (rc) {
		p.fd = fd;
		p.events = POLLOUT;
		rc = poll(&p, 1, timeout_ms);
		if (rc == 0) {
			printf("timeout %.1f\n", ms_since(&t0));
			close(fd);
			return TIMEOUT;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
	}
	close(fd);
	if (!err) {
		printf("connected %.1f\n", ms_since(&t0));
		return CONNECTED;
	}
	if (err == ECONNREFUSED) {
		printf("refused %.1f\n", ms_since(&t0));
		return REFUSED;
	}
	printf("error %.1f %s\n", ms_since(&t0), strerror(err));
	return FAILED;
}

static int do_connect(int argc, char **argv)
{
	const char *src = NULL;
	int timeout_ms = 3000, count = 1, rc = FAILED, n[5] = { 0 };
	struct sockaddr_storage dst;
	socklen_t dlen;

	if (argc < 4)
		return 2;
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--src") && i + 1 < argc)
			src = argv[++i];
		else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
			timeout_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = atoi(argv[++i]);
		else
			return 2;
	}
	if (count < 1 || count > 100000 || timeout_ms < 1)
		return 2;
	if (resolve(argv[2], argv[3], 0, &dst, &dlen))
		return FAILED;
	for (int i = 0; i < count; i++) {
		rc = connect_once(&dst, dlen, src, timeout_ms);
		n[rc]++;
		fflush(stdout);
	}
	if (count > 1)
		printf("connected=%d refused=%d timeout=%d error=%d\n", n[CONNECTED], n[REFUSED],
		       n[TIMEOUT], n[FAILED]);
	return rc;
}

static int do_listen(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if (argc != 4 || resolve(argv[2], argv[3], 1, &ss, &len))
		return 2;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 128)) {
		fprintf(stderr, "fg-tcpprobe: listen %s:%s: %s\n", argv[2], argv[3], strerror(errno));
		return FAILED;
	}
	printf("listening\n");
	fflush(stdout);
	for (;;) {
		int c = accept(fd, NULL, NULL);

		if (c >= 0)
			close(c);
		else if (errno != EINTR && errno != ECONNABORTED)
			return FAILED;
	}
}

int main(int argc, char **argv)
{
	int rc = 2;

	if (argc >= 2 && !strcmp(argv[1], "connect"))
		rc = do_connect(argc, argv);
	else if (argc >= 2 && !strcmp(argv[1], "listen"))
		rc = do_listen(argc, argv);
	if (rc == 2)
		fprintf(stderr, "usage: fg-tcpprobe connect HOST PORT [--src ADDR] [--timeout-ms N] "
				"[--count N]\n       fg-tcpprobe listen HOST PORT\n");
	return rc;
}
