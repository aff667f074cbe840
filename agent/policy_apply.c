/* policy_apply.c — parse a policy for this agent and swap it in, all or
 * nothing; see policy_apply.h. */
#include "agent/policy_apply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kernel/kernel.h"
#include "agent/proxy/proxy.h"
#include "policy/policy_addr.h"

struct fg_policy *fg_agent_parse_policy(const struct fg_agent_opts *o, const char *text,
					size_t len, const char *file, const char *tenants_text,
					size_t tenants_len, const char *tenants_file, char *err,
					size_t errlen)
{
	struct fg_policy *np = calloc(1, sizeof(*np));
	struct fg_policy_error perr;

	if (!np) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (fg_policy_parse_split(text, len, file ? file : "<policy>", tenants_text, tenants_len,
				  tenants_file, np, &perr)) {
		fg_policy_error_format(&perr, err, errlen);
		fg_policy_free(np);
		return NULL;
	}
	/* --metrics-address: the node's own address (the downward API's
	 * status.hostIP in the DaemonSet), which one ConfigMap for every node
	 * cannot name. The port stays the policy's; `off` stays off. */
	if (o->metrics_address && np->agent.metrics_listen.host[0])
		snprintf(np->agent.metrics_listen.host, sizeof(np->agent.metrics_listen.host), "%s",
			 o->metrics_address);
	return np;
}

static bool same_hostport(const struct fg_hostport *a, const struct fg_hostport *b)
{
	return a->port == b->port && !strcmp(a->host, b->host);
}

static bool same_interfaces(const struct fg_agent *a, const struct fg_agent *b)
{
	if (a->interfaces_auto != b->interfaces_auto || a->n_interfaces != b->n_interfaces ||
	    a->xdp_mode != b->xdp_mode)
		return false;
	for (uint32_t i = 0; i < a->n_interfaces; i++)
		if (strcmp(a->interfaces[i], b->interfaces[i]))
			return false;
	return true;
}

/* What a running agent cannot change in place; NULL if nothing. */
static const char *needs_restart(const struct fg_policy *old, const struct fg_policy *np)
{
	if (old->agent.mode != np->agent.mode)
		return "agent.mode";
	if (!same_hostport(&old->agent.listen, &np->agent.listen))
		return "agent.listen";
	if (!same_hostport(&old->agent.metrics_listen, &np->agent.metrics_listen))
		return "agent.metrics_listen";
	if (old->agent.workers != np->agent.workers)
		return "agent.workers";
	if (strcmp(old->agent.salt_secret_file, np->agent.salt_secret_file))
		return "agent.salt_secret_file";
	if (memcmp(&old->agent.fleet, &np->agent.fleet, sizeof(old->agent.fleet)))
		return "agent.fleet";
	/* gate is attached once, at start */
	if (!same_interfaces(&old->agent, &np->agent))
		return "agent.interfaces (or agent.xdp_mode)";
	return NULL;
}

json_t *fg_agent_apply_policy(struct fg_agent_state *st, struct fg_policy *np, const char *file,
			      char *err, size_t errlen)
{
	const char *what = needs_restart(st->policy, np);
	if (what) {
		snprintf(err, errlen, "%s differs from the running agent's; it takes a restart "
				      "(nothing was changed)", what);
		fg_policy_free(np);
		return NULL;
	}
	struct sockaddr_storage ss;
	socklen_t sslen;
	if (fg_hostport_sockaddr(&np->agent.engine, &ss, &sslen)) {
		snprintf(err, errlen, "agent.engine: '%s' is not a numeric address (nothing was changed)",
			 np->agent.engine.host);
		fg_policy_free(np);
		return NULL;
	}

	/* by name order: a search per tenant, not a scan of the other policy */
	json_t *added = json_array(), *removed = json_array();
	uint32_t *old_order = fg_policy_name_order(st->policy), *new_order = fg_policy_name_order(np);
	if ((st->policy->n_tenants && !old_order) || (np->n_tenants && !new_order)) {
		snprintf(err, errlen, "out of memory (nothing was changed)");
		json_decref(added);
		json_decref(removed);
		free(old_order);
		free(new_order);
		fg_policy_free(np);
		return NULL;
	}
	for (uint32_t i = 0; i < np->n_tenants; i++)
		if (!fg_policy_find_sorted(st->policy, old_order, np->tenants[i].name))
			json_array_append_new(added, json_string(np->tenants[i].name));
	for (uint32_t i = 0; i < st->policy->n_tenants; i++)
		if (!fg_policy_find_sorted(np, new_order, st->policy->tenants[i].name))
			json_array_append_new(removed, json_string(st->policy->tenants[i].name));
	free(old_order);
	free(new_order);

	/* proxy first: the only step that can fail (memory, the engine key
	 * file) leaves it unchanged */
	char why[256];
	if (fg_proxy_apply_policy(st, np, why, sizeof(why))) {
		snprintf(err, errlen, "%s (nothing was changed)", why);
		json_decref(added);
		json_decref(removed);
		fg_policy_free(np);
		return NULL;
	}
	if (st->kernel && fg_kernel_apply_policy(st, np))
		fprintf(stderr, "fairgated: policy apply: kernel maps not fully updated\n");
	struct fg_policy *old = st->policy;
	st->policy = np;
	fg_cost_model_init_policy(&st->cm, np);
	fg_policy_free(old);
	fg_proxy_publish_all(st);
	fprintf(stderr, "fairgated: applied policy %s: %u tenants (%zu added, %zu removed)\n",
		file ? file : "", np->n_tenants, json_array_size(added), json_array_size(removed));
	return json_pack("{s:s, s:i, s:o, s:o}", "file", file ? file : "", "tenants",
			 (int)np->n_tenants, "added", added, "removed", removed);
}
