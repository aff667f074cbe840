/* policy_yaml.h — a policy file as a small tree of positioned YAML nodes.
 *
 * libyaml's event stream, collected into scalars, sequences and mappings that
 * remember their 1-based line and column, so every later error can point at
 * the node it is about. Policy files are plain data: anchors, aliases, tags
 * and multi-document streams are refused here, with their position, rather
 * than half-supported. JSON is YAML flow style and loads the same way.
 */
#ifndef FAIRGATE_POLICY_YAML_H
#define FAIRGATE_POLICY_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include "policy.h"

#define FG_YAML_MAX_BYTES (16u << 20) /* 65,536 tenants with a key and a source each: ~11 MiB */
#define FG_YAML_MAX_DEPTH 32
#define FG_YAML_MAX_NODES (1u << 21) /* 65,536 tenants of ~17 nodes (8 keys), with room */

enum fg_ynode_type { FG_Y_SCALAR, FG_Y_SEQ, FG_Y_MAP };

struct fg_ynode {
	enum fg_ynode_type type;
	unsigned line, col;        /* 1-based */
	unsigned char source;      /* which input it came from: 0 the policy file,
				    * 1 its tenants file (fg_yaml_set_source) */
	/* scalars */
	char *str;                 /* NUL-terminated copy; may hold inner NULs */
	size_t len;
	bool plain;                /* unquoted: may be a number or null */
	/* sequences: items[0..n); mappings: key, value, key, value, ... */
	struct fg_ynode **items;
	size_t n, cap;
};

/* Load buf into a tree. Returns 0 with *root set (NULL never), or -1 with
 * err->line/col/message filled (err->file is left to the caller). */
int fg_yaml_load(const char *buf, size_t len, struct fg_ynode **root,
		 struct fg_policy_error *err);
void fg_yaml_free(struct fg_ynode *node);
/* Mark a tree as loaded from input `source` (errors then name that file). */
void fg_yaml_set_source(struct fg_ynode *node, unsigned char source);

/* Mapping helpers: number of pairs, i-th key/value, value by key (NULL). */
static inline size_t fg_ymap_len(const struct fg_ynode *m) { return m->n / 2; }
static inline struct fg_ynode *fg_ymap_key(const struct fg_ynode *m, size_t i) { return m->items[2 * i]; }
static inline struct fg_ynode *fg_ymap_val(const struct fg_ynode *m, size_t i) { return m->items[2 * i + 1]; }
struct fg_ynode *fg_ymap_get(const struct fg_ynode *m, const char *key);
/* The key node of `key` (for errors about a key itself), or NULL. */
struct fg_ynode *fg_ymap_key_node(const struct fg_ynode *m, const char *key);

/* A plain scalar that YAML reads as null: empty, "~", "null". */
bool fg_ynode_is_null(const struct fg_ynode *n);

#endif
