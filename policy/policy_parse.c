/* policy_parse.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
#include <string.h>
#include "policy.h"
int fg_policy_parse_buffer(const char *buf, size_t len, const char *filename, struct fg_policy *out, struct fg_policy_error *err)
{ (void)buf; (void)len; (void)out; snprintf(err->file, sizeof(err->file), "%s", filename); err->line = 0; err->col = 0; snprintf(err->message, sizeof(err->message), "policy parser not built yet"); return -1; }
int fg_policy_parse_file(const char *path, struct fg_policy *out, struct fg_policy_error *err) { return fg_policy_parse_buffer("", 0, path, out, err); }
void fg_policy_error_format(const struct fg_policy_error *err, char *buf, size_t len) { snprintf(buf, len, "%s:%u:%u: %s", err->file, err->line, err->col, err->message); }
const struct fg_tenant *fg_policy_tenant_by_name(const struct fg_policy *p, const char *name) { for (unsigned i = 0; i < p->n_tenants; i++) if (!strcmp(p->tenants[i].name, name)) return &p->tenants[i]; return NULL; }
const struct fg_tenant *fg_policy_tenant_by_key_hash(const struct fg_policy *p, const uint8_t hash[32]) { for (unsigned i = 0; i < p->n_tenants; i++) for (unsigned k = 0; k < p->tenants[i].n_keys; k++) if (!memcmp(p->tenants[i].keys[k], hash, 32)) return &p->tenants[i]; return NULL; }
int fg_policy_tier_by_name(const struct fg_policy *p, const char *name) { for (unsigned i = 0; i < p->n_tiers; i++) if (!strcmp(p->tiers[i].name, name)) return (int)i; return -1; }
