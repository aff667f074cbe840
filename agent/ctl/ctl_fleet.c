/* ctl_fleet.c — the control socket's "fleet" command (agent.fleet's view
 * from this node), answered by agent/fleet/fleet.c. */
#include "agent/ctl/ctl_commands.h"
#include "agent/ctl/ctl_server.h"
#include "agent/fleet/fleet.h"

static json_t *cmd_fleet(struct fg_agent_state *st, json_t *req, char *err, size_t errlen)
{
	(void)req;
	return fg_fleet_status_json(st->proxy, err, errlen);
}

void fg_ctl_fleet_register(void)
{
	fg_ctl_register("fleet", cmd_fleet);
}
