/* ctl_agent.c — control-socket handlers about the agent itself (health)
 * and status's gate and policy-watch blocks; see ctl_agent.h. */
#include "agent/ctl/ctl_agent.h"
#include "agent/ctl/ctl_commands.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/ctl/ctl_server.h"
#include "agent/kernel/kernel.h"
#include "agent/policy_watch.h"
#include "agent/proxy/proxy_internal.h"

static json_t *cmd_health(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "";
	int port = 0, family = 0;
	(void)req;
	(void)err;
	(void)errlen;

	if (st->proxy && st->proxy->listen_fd >= 0 &&
	    !getsockname(st->proxy->listen_fd, (struct sockaddr *)&ss, &len)) {
		if (ss.ss_family == AF_INET) {
			const struct sockaddr_in *in4 = (const struct sockaddr_in *)&ss;
			port = ntohs(in4->sin_port);
			family = 4;
			inet_ntop(AF_INET, &in4->sin_addr, addr, sizeof(addr));
		} else if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
			port = ntohs(in6->sin6_port);
			family = 6;
			inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		}
	}
	return json_pack("{s:b, s:i, s:i, s:s, s:s, s:b, s:b}", "proxy", port != 0, "listen_port",
			 port, "listen_family", family, "listen_address", addr, "mode",
			 st->policy->agent.mode == FG_MODE_TRANSPARENT ? "transparent" : "front",
			 "kernel_enforcement", st->kernel != NULL, "steering",
			 fg_kernel_steering(st));
}

void fg_ctl_agent_register(void)
{
	fg_ctl_register("health", cmd_health);
}

json_t *fg_ctl_gate_json(const struct fg_agent_state *st)
{
	struct fg_gate_status g;
	json_t *ifaces = json_array();

	fg_kernel_gate_status(st, &g);
	for (int i = 0; i < g.n; i++) {
		const struct fg_gate_iface *f = &g.ifaces[i];
		json_t *o = json_pack("{s:s, s:b}", "name", f->ifname, "attached", f->attached);
		if (f->attached)
			json_object_set_new(o, "mode", json_string(f->native ? "native" : "generic"));
		else
			json_object_set_new(o, "error", json_string(f->why));
		json_array_append_new(ifaces, o);
	}
	json_t *r = json_pack("{s:b, s:o}", "auto", g.auto_ifaces, "interfaces", ifaces);
	if (g.note[0])
		json_object_set_new(r, "note", json_string(g.note));
	return r;
}

json_t *fg_ctl_watch_json(const struct fg_agent_state *st)
{
	struct fg_policy_watch_status w;
	json_t *files = json_array();

	fg_policy_watch_get(st, &w);
	json_array_append_new(files, json_string(st->opts.policy_path ? st->opts.policy_path : ""));
	if (st->opts.tenants_path)
		json_array_append_new(files, json_string(st->opts.tenants_path));
	json_t *r = json_pack("{s:b, s:o, s:I, s:I}", "on", w.on, "files", files, "applied",
			      (json_int_t)w.applied, "refused", (json_int_t)w.refused);
	if (w.last_change_age_s >= 0) {
		json_object_set_new(r, "last_change_age_s", json_real(w.last_change_age_s));
		json_object_set_new(r, "last_ok", json_boolean(w.last_ok));
		json_object_set_new(r, "last_result", json_string(w.last_result));
	}
	return r;
}
