/* sim_cli.h — what the command lines of fairgate-sim and fg-load share.
 *
 * Addresses (--listen, --target): "HOST:PORT" or "[IPV6]:PORT", numeric
 * only, read by the policy's own parser (policy/policy_addr.h) so that every
 * fairgate tool reads an address the same way (fg_hostport_sockaddr turns
 * one into a sockaddr).
 */
#ifndef FAIRGATE_SIM_CLI_H
#define FAIRGATE_SIM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/policy_addr.h"

/* 0, or -1 with a reason in why. Port 0 (any free port) only if allowed. */
int sim_cli_parse_addr(const char *arg, bool allow_port0, struct fg_hostport *out, char *why,
		       size_t whylen);

/* Hundreds of connections need more descriptors than the usual soft limit:
 * raise it to the hard one. */
void sim_cli_raise_fd_limit(void);

#endif
