/* fairgate_limits.h — the sizes the kernel ABI fixes and a policy must fit:
 * the maps' entries and the node's fixed arrays. Defined here once;
 * policy/policy.h names them for the policy (FG_MAX_TENANTS and friends are
 * these, not copies), so a policy that parses always fits the maps.
 *
 * No types, no includes: policy/ and the BPF programs both take it. */
#ifndef FAIRGATE_LIMITS_H
#define FAIRGATE_LIMITS_H

#define FG_MAP_MAX_TENANTS  65536  /* tenants, tenant_stats: ids 0..65535 */
#define FG_MAP_MAX_LEARNED  65536  /* src_learned */
#define FG_MAP_MAX_STATIC   16384  /* src_tenant: every CIDR of a policy */
#define FG_NAME_LEN         32     /* tenant and tier names, NUL included */
#define FG_MAX_PROTECTED_PORTS 8   /* fg_node_state.protected_ports */
#define FG_MAX_GATE_IFACES  8      /* fg_node_state.gate_ifindex */

#endif
