/* policy_conflicts.h — what must be unique across the whole policy.
 *
 * An API key names one tenant and a source address belongs to one tenant,
 * or the proxy and the kernel would charge the wrong tenant. Checked by sorting, so a 1024-tenant policy stays cheap to check.
 */
#ifndef FAIRGATE_POLICY_CONFLICTS_H
#define FAIRGATE_POLICY_CONFLICTS_H

#include "policy_decode.h"

/* After a successful decode of c->root into c->p: 0, or -1 with the error at
 * the later of the two conflicting entries. */
int fg_policy_check_conflicts(struct fg_pctx *c);

#endif
