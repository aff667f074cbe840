/* ctl_protocol.c — the control socket's client side (fairgatectl): one
 * request line out, one reply line back; see ctl_protocol.h. */
#include "lib/ctl_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CALL_TIMEOUT_S 10

const char *fg_ctl_path(const char *flag)
{
	const char *env = getenv("FAIRGATE_CTL");

	if (flag)
		return flag;
	return env && *env ? env : FG_CTL_SOCK_PATH;
}

json_t *fg_ctl_call(const char *sock_path, json_t *req, char *err, size_t errlen)
{
	return fg_ctl_call_within(sock_path, req, CALL_TIMEOUT_S * 1000u, err, errlen);
}

json_t *fg_ctl_call_within(const char *sock_path, json_t *req, unsigned timeout_ms, char *err,
			   size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	char *line = NULL, *s;
	size_t len = 0, cap = 0;
	json_error_t jerr;
	json_t *reply = NULL;
	int fd;

	if (!sock_path)
		sock_path = FG_CTL_SOCK_PATH;
	if (strlen(sock_path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path %s is too long", sock_path);
		return NULL;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(err, errlen, "cannot reach fairgated at %s: %s%s", sock_path, strerror(errno),
			 errno == ENOENT || errno == ECONNREFUSED ? " (is fairgated running?)" : "");
		close(fd);
		return NULL;
	}
	s = json_dumps(req, JSON_COMPACT);
	if (!s) {
		snprintf(err, errlen, "cannot encode the request");
		close(fd);
		return NULL;
	}
	size_t slen = strlen(s), off = 0;
	while (off < slen) {
		ssize_t n = send(fd, s + off, slen - off, MSG_NOSIGNAL);
		if (n <= 0) {
			snprintf(err, errlen, "writing to %s: %s", sock_path, strerror(errno));
			goto out;
		}
		off += (size_t)n;
	}
	if (send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
		snprintf(err, errlen, "writing to %s: %s", sock_path, strerror(errno));
		goto out;
	}
	for (;;) {
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		char *nl;

		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				snprintf(err, errlen, "%s: no answer from fairgated within %u ms",
					 sock_path, timeout_ms);
			else
				snprintf(err, errlen, "%s: %s", sock_path,
					 n == 0 ? "fairgated closed the connection without answering"
						: strerror(errno));
			goto out;
		}
		if (len + (size_t)n > FG_CTL_MAX_LINE) {
			snprintf(err, errlen, "%s: answer too long", sock_path);
			goto out;
		}
		if (len + (size_t)n + 1 > cap) {
			cap = (len + (size_t)n + 1) * 2;
			char *nb = realloc(line, cap);
			if (!nb) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			line = nb;
		}
		memcpy(line + len, buf, (size_t)n);
		len += (size_t)n;
		line[len] = '\0';
		nl = memchr(line, '\n', len);
		if (nl) {
			reply = json_loadb(line, (size_t)(nl - line), 0, &jerr);
			if (!reply)
				snprintf(err, errlen, "%s: unreadable answer: %s", sock_path, jerr.text);
			break;
		}
	}
out:
	free(s);
	free(line);
	close(fd);
	return reply;
}
