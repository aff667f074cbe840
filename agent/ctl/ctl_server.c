/* ctl_server.c — the control socket: a unix stream socket (0600) on the
 * agent's epoll loop speaking newline-delimited JSON, a command registry
 * that modules fill before (or after) the server starts, and the blocking
 * client fairgatectl uses (fg_ctl_call). */
#include "agent/ctl/ctl_server.h"
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

#define MAX_COMMANDS 64
#define MAX_CONNS 64

static struct {
	char cmd[48];
	fg_ctl_handler handler;
} commands[MAX_COMMANDS];
static int n_commands;

struct ctl_conn {
	int fd;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off;
	int closing;          /* close once `out` is flushed */
	struct fg_ctl_server *srv;
	struct ctl_conn *next;
};

struct fg_ctl_server {
	struct fg_agent_state *st;
	int lfd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct ctl_conn *conns;
	int n_conns;
};

int fg_ctl_register(const char *cmd, fg_ctl_handler handler)
{
	for (int i = 0; i < n_commands; i++) {
		if (!strcmp(commands[i].cmd, cmd)) {
			commands[i].handler = handler;
			return 0;
		}
	}
	if (n_commands == MAX_COMMANDS || strlen(cmd) >= sizeof(commands[0].cmd))
		return -1;
	snprintf(commands[n_commands].cmd, sizeof(commands[0].cmd), "%s", cmd);
	commands[n_commands++].handler = handler;
	return 0;
}

static json_t *cmd_ping(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	(void)req;
	(void)err;
	(void)errlen;
	return json_pack("{s:b, s:i, s:b}", "pong", 1, "pid", (json_int_t)getpid(), "kernel",
			 st->kernel != NULL);
}

static json_t *cmd_commands(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	json_t *list = json_array();

	(void)st;
	(void)req;
	(void)err;
	(void)errlen;
	for (int i = 0; i < n_commands; i++)
		json_array_append_new(list, json_string(commands[i].cmd));
	return json_pack("{s:o}", "commands", list);
}

/* ---- one connection ---- */

static void conn_free(struct ctl_conn *c)
{
	struct fg_ctl_server *srv = c->srv;

	for (struct ctl_conn **pp = &srv->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	srv->n_conns--;
	fg_loop_del(srv->st->loop, c->fd);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

static int conn_queue(struct ctl_conn *c, const char *s, size_t len)
{
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	char *n = realloc(c->out, c->out_len + len);

	if (!n)
		return -1;
	c->out = n;
	memcpy(c->out + c->out_len, s, len);
	c->out_len += len;
	return 0;
}

/* Returns -1 if the connection is gone. */
static int conn_flush(struct ctl_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				fg_loop_mod(c->srv->st->loop, c->fd, EPOLLIN | EPOLLOUT);
				return 0;
			}
			if (errno == EINTR)
				continue;
			return -1;
		}
		c->out_off += (size_t)n;
	}
	fg_loop_mod(c->srv->st->loop, c->fd, EPOLLIN);
	return c->closing ? -1 : 0;
}

static json_t *dispatch(struct fg_ctl_server *srv, const char *line, size_t len)
{
	char err[512] = "";
	json_error_t jerr;
	json_t *req = json_loadb(line, len, 0, &jerr), *reply = NULL;
	const char *cmd;

	if (!req) {
		snprintf(err, sizeof(err), "request is not JSON: %s", jerr.text);
		goto fail;
	}
	cmd = json_string_value(json_object_get(req, "cmd"));
	if (!json_is_object(req) || !cmd) {
		snprintf(err, sizeof(err), "request needs a \"cmd\" string");
		goto fail;
	}
	for (int i = 0; i < n_commands; i++) {
		if (!strcmp(commands[i].cmd, cmd)) {
			reply = commands[i].handler(srv->st, req, err, sizeof(err));
			if (!reply && !err[0])
				snprintf(err, sizeof(err), "%s failed", cmd);
			break;
		}
	}
	if (!reply && !err[0])
		snprintf(err, sizeof(err), "unknown command '%s'", cmd);
	if (!reply)
		goto fail;
	if (!json_is_object(reply)) {
		json_decref(reply);
		snprintf(err, sizeof(err), "%s returned no object", cmd);
		goto fail;
	}
	json_object_set_new(reply, "ok", json_true());
	json_decref(req);
	return reply;
fail:
	json_decref(req);
	return json_pack("{s:b, s:s}", "ok", 0, "error", err);
}

static void on_conn(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct ctl_conn *c = ctx;
	char buf[4096];
	(void)loop;
	(void)fd;

	if ((events & EPOLLOUT) && conn_flush(c)) {
		conn_free(c);
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			/* Peer done: answer what is pending, then close. */
			c->closing = 1;
			if (conn_flush(c))
				conn_free(c);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (c->in_len + (size_t)n > FG_CTL_MAX_LINE) {
			static const char msg[] = "{\"ok\": false, \"error\": \"request too long\"}\n";

			c->closing = 1;
			conn_queue(c, msg, sizeof(msg) - 1);
			if (conn_flush(c))
				conn_free(c);
			return;
		}
		if (c->in_len + (size_t)n > c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
			char *in;

			while (cap < c->in_len + (size_t)n)
				cap *= 2;
			in = realloc(c->in, cap);
			if (!in) {
				conn_free(c);
				return;
			}
			c->in = in;
			c->in_cap = cap;
		}
		memcpy(c->in + c->in_len, buf, (size_t)n);
		c->in_len += (size_t)n;
	}

	size_t start = 0;
	for (size_t i = 0; i < c->in_len; i++) {
		if (c->in[i] != '\n')
			continue;
		if (i > start) {
			json_t *reply = dispatch(c->srv, c->in + start, i - start);
			char *s = json_dumps(reply, JSON_COMPACT);

			json_decref(reply);
			if (!s || conn_queue(c, s, strlen(s)) || conn_queue(c, "\n", 1)) {
				free(s);
				conn_free(c);
				return;
			}
			free(s);
		}
		start = i + 1;
	}
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
	if (conn_flush(c))
		conn_free(c);
}

static void on_accept(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_ctl_server *srv = ctx;
	(void)events;

	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ctl_conn *c;

		if (cfd < 0) {
			if (fg_loop_accept_failed(loop, fd, errno)) /* parks the listener on EMFILE */
				return;
			continue;
		}
		if (srv->n_conns >= MAX_CONNS) {
			close(cfd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c || fg_loop_add(loop, cfd, EPOLLIN, on_conn, c)) {
			free(c);
			close(cfd);
			continue;
		}
		c->fd = cfd;
		c->srv = srv;
		c->next = srv->conns;
		srv->conns = c;
		srv->n_conns++;
	}
}

/* ---- server ---- */

static int mkdir_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(dir, 0755);
		*p = '/';
	}
	return mkdir(dir, 0755) && errno != EEXIST ? -1 : 0;
}

int fg_ctl_server_start(struct fg_agent_state *st, char *err, size_t errlen)
{
	const char *path = st->opts.ctl_path ? st->opts.ctl_path : FG_CTL_SOCK_PATH;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct fg_ctl_server *srv;
	mode_t old_mask;
	int fd, rc;

	fg_ctl_register("ping", cmd_ping);
	fg_ctl_register("commands", cmd_commands);
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path %s is too long", path);
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (mkdir_parent(path)) {
		snprintf(err, errlen, "creating the directory of %s: %s", path, strerror(errno));
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* A socket file nobody answers on is left over from a crash; anything
	 * else at the path is somebody's file, never removed (lstat: a symlink
	 * is refused too, whatever it points at) */
	struct stat sb;
	if (!lstat(path, &sb) && !S_ISSOCK(sb.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket (%s): refusing to replace it", path,
			 S_ISLNK(sb.st_mode) ? "a symbolic link" : S_ISREG(sb.st_mode) ? "a regular file"
				: S_ISDIR(sb.st_mode) ? "a directory" : "another kind of file");
		close(fd);
		return -1;
	}
	if (!access(path, F_OK)) {
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (probe >= 0 && !connect(probe, (struct sockaddr *)&sa, sizeof(sa))) {
			close(probe);
			close(fd);
			snprintf(err, errlen, "another fairgated is serving %s", path);
			return -1;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	old_mask = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (rc || chmod(path, 0600) || listen(fd, 16)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv || fg_loop_add(st->loop, fd, EPOLLIN, on_accept, srv)) {
		snprintf(err, errlen, "control socket: out of memory");
		free(srv);
		close(fd);
		unlink(path);
		return -1;
	}
	srv->st = st;
	srv->lfd = fd;
	snprintf(srv->path, sizeof(srv->path), "%s", path);
	st->ctl = srv;
	return 0;
}

void fg_ctl_server_stop(struct fg_agent_state *st)
{
	struct fg_ctl_server *srv = st->ctl;

	if (!srv)
		return;
	while (srv->conns)
		conn_free(srv->conns);
	fg_loop_del(st->loop, srv->lfd);
	close(srv->lfd);
	unlink(srv->path);
	free(srv);
	st->ctl = NULL;
}
