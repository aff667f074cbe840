/* identity.h — who is asking: API keys hashed with SHA-256 (the policy
 * stores hashes only), the Bearer scheme, and trusted-proxy source checks. */
#ifndef FAIRGATE_IDENTITY_H
#define FAIRGATE_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "policy/policy.h"

/* SHA-256 of data; 0, or -1 if OpenSSL failed. */
int fg_sha256(const void *data, size_t len, uint8_t out[32]);
/* What fg_sha256 keeps for the calling thread, freed: a worker thread
 * calls it as it ends. */
void fg_sha256_thread_end(void);

/* The token of "Bearer <token>" (scheme case-insensitive, surrounding
 * blanks ignored); NULL when the value is not a non-empty Bearer token. */
const char *fg_bearer_token(const char *value, size_t len, size_t *token_len);

/* Does the CIDR hold the address? IPv4-mapped IPv6 peers match IPv4 CIDRs. */
bool fg_cidr_holds_peer(const struct fg_cidr *c, const struct sockaddr *sa);
bool fg_source_trusted(const struct fg_agent *a, const struct sockaddr *sa);

#endif
