/* policy_decode.h — table-driven decoding of YAML mappings into C structs.
 *
 * A schema is a table of fields (key, kind, offset, range, flags). One
 * function walks a mapping against it and enforces what every block of the
 * policy needs: keys are strings, no key twice, no unknown key (with "did you
 * mean"), required keys present, values of the right shape, numbers finite and
 * in range, integers integral, strings without control characters. The first
 * error wins and is positioned at the node it is about.
 */
#ifndef FAIRGATE_POLICY_DECODE_H
#define FAIRGATE_POLICY_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy.h"
#include "policy_yaml.h"

#define FG_PATH_TEXT 160 /* "tenants[1023].sources[15]" and friends */

struct fg_pctx {
	struct fg_policy *p;
	struct fg_policy_error *err;
	const struct fg_ynode *root;
	const char *files[2];    /* by fg_ynode.source: the policy file, its tenants file */
};

enum fg_kind {
	FG_K_DOUBLE,
	FG_K_UINT,      /* size 1, 2, 4 or 8 */
	FG_K_INT,       /* int32_t */
	FG_K_TEXT,      /* char[size]: any printable text */
	FG_K_NAME,      /* char[size]: [A-Za-z0-9._-]+ */
	FG_K_PATH,      /* char[size]: an absolute file path */
	FG_K_ENUM,      /* int-sized enum, names in `enums` */
	FG_K_HOSTPORT,  /* struct fg_hostport */
	FG_K_CIDRS,     /* struct fg_cidr[max] + uint32_t count */
	FG_K_PORTS,     /* uint16_t[max] + uint32_t count */
	FG_K_IFACES,    /* char[max][size] + uint32_t count */
	FG_K_MAP,       /* nested schema over base + off */
	FG_K_CUSTOM,    /* decode() does it */
};

#define FG_F_REQUIRED 1u
#define FG_F_GT_MIN   2u  /* min is exclusive: value must be > min */
#define FG_F_OFF      4u  /* the word `off` turns it off: FG_K_HOSTPORT stores host "",
			    * port 0; FG_K_DOUBLE stores 0 (so its range should exclude 0) */

struct fg_enum_name {
	const char *name;
	int value;
};

struct fg_schema;
typedef int (*fg_decode_fn)(struct fg_pctx *c, const struct fg_ynode *val, void *base,
			    const char *path);

struct fg_field {
	const char *key;
	enum fg_kind kind;
	size_t off;
	size_t size;
	double min, max;
	unsigned flags;
	const struct fg_enum_name *enums;  /* FG_K_ENUM, NULL-name terminated */
	const struct fg_schema *sub;       /* FG_K_MAP */
	fg_decode_fn decode;               /* FG_K_CUSTOM */
	size_t count_off;                  /* lists: uint32_t count */
	unsigned max_count;                /* lists */
};

struct fg_schema {
	const struct fg_field *fields;
	size_t n;
};

/* Fail at a node (or the whole file if NULL); returns -1. */
int fg_pfail(struct fg_pctx *c, const struct fg_ynode *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Decode mapping `map` into base. *seen (may be NULL) gets bit i for each
 * fields[i] present. Keys are decoded in table order, so a table lists
 * fields that others depend on first. */
int fg_decode_map(struct fg_pctx *c, const struct fg_ynode *map, const struct fg_schema *s,
		  void *base, const char *path, uint64_t *seen);

/* Building blocks, also used by custom decoders. */
/* One value against one field of a schema (as fg_decode_map would). */
int fg_decode_value(struct fg_pctx *c, const struct fg_ynode *v, const struct fg_field *f,
		    void *base, const char *path);
int fg_decode_number(struct fg_pctx *c, const struct fg_ynode *n, const char *path, double *out);
int fg_decode_string(struct fg_pctx *c, const struct fg_ynode *n, const char *path,
		     const char **out);
int fg_decode_name(struct fg_pctx *c, const struct fg_ynode *n, const char *path, char *out,
		   size_t size);
int fg_expect(struct fg_pctx *c, const struct fg_ynode *n, enum fg_ynode_type type,
	      const char *path);
/* snprintf for error paths ("tenants[3].keys[1]"); a path too long for
 * FG_PATH_TEXT is cut short, which only shortens a message. */
void fg_path(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A scalar's text, quoted, escaped and shortened for an error message. */
const char *fg_quote(const struct fg_ynode *n, char *buf, size_t len);
const char *fg_ynode_kind(const struct fg_ynode *n);

#endif
