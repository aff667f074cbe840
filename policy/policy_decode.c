/* policy_decode.c — the schema walker; see policy_decode.h. */
#include "policy_decode.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "policy_addr.h"
#include "policy_suggest.h"

int fg_pfail(struct fg_pctx *c, const struct fg_ynode *at, const char *fmt, ...)
{
	va_list ap;

	c->err->line = at ? at->line : 1;
	c->err->col = at ? at->col : 1;
	if (at && at->source < 2 && c->files[at->source])
		snprintf(c->err->file, sizeof(c->err->file), "%s", c->files[at->source]);
	va_start(ap, fmt);
	vsnprintf(c->err->message, sizeof(c->err->message), fmt, ap);
	va_end(ap);
	return -1;
}

const char *fg_ynode_kind(const struct fg_ynode *n)
{
	switch (n->type) {
	case FG_Y_MAP: return "a mapping";
	case FG_Y_SEQ: return "a list";
	default: break;
	}
	if (fg_ynode_is_null(n))
		return "nothing";
	return n->plain ? "a scalar" : "a string";
}

const char *fg_quote(const struct fg_ynode *n, char *buf, size_t len)
{
	size_t o = 0, max = len > 48 ? 40 : len / 2;

	if (n->type != FG_Y_SCALAR) {
		snprintf(buf, len, "%s", fg_ynode_kind(n));
		return buf;
	}
	buf[o++] = '\'';
	for (size_t i = 0; i < n->len && o + 8 < len; i++) {
		unsigned char ch = (unsigned char)n->str[i];
		if (i == max) {
			o += (size_t)snprintf(buf + o, len - o, "...");
			break;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '\'')
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
		else
			buf[o++] = (char)ch;
	}
	snprintf(buf + o, len - o, "'");
	return buf;
}

void fg_path(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, len, fmt, ap);
	va_end(ap);
}

static const char *shown(const char *path)
{
	return path[0] ? path : "the policy";
}

int fg_expect(struct fg_pctx *c, const struct fg_ynode *n, enum fg_ynode_type type,
	      const char *path)
{
	static const char *const want[] = {
		[FG_Y_SCALAR] = "a single value", [FG_Y_SEQ] = "a list", [FG_Y_MAP] = "a mapping",
	};
	if (n->type == type && !(type == FG_Y_SCALAR && fg_ynode_is_null(n)))
		return 0;
	if (type == FG_Y_SCALAR && fg_ynode_is_null(n))
		return fg_pfail(c, n, "%s has no value", shown(path));
	return fg_pfail(c, n, "%s must be %s, got %s", shown(path), want[type], fg_ynode_kind(n));
}

int fg_decode_number(struct fg_pctx *c, const struct fg_ynode *n, const char *path, double *out)
{
	char q[64];
	char *end;

	if (fg_expect(c, n, FG_Y_SCALAR, path))
		return -1;
	if (!n->plain)
		return fg_pfail(c, n, "%s must be a number, got the quoted string %s", path,
				fg_quote(n, q, sizeof(q)));
	/* Decimal only: strtod would also take hex, "inf" and "nan". */
	if (strspn(n->str, "0123456789+-.eE") != n->len || !strpbrk(n->str, "0123456789"))
		return fg_pfail(c, n, "%s must be a number, got %s", path, fg_quote(n, q, sizeof(q)));
	double v = strtod(n->str, &end);
	if (*end != '\0' || end == n->str)
		return fg_pfail(c, n, "%s must be a number, got %s", path, fg_quote(n, q, sizeof(q)));
	if (!isfinite(v))
		return fg_pfail(c, n, "%s is out of range: %s", path, fg_quote(n, q, sizeof(q)));
	*out = v;
	return 0;
}

int fg_decode_string(struct fg_pctx *c, const struct fg_ynode *n, const char *path,
		     const char **out)
{
	if (fg_expect(c, n, FG_Y_SCALAR, path))
		return -1;
	for (size_t i = 0; i < n->len; i++) {
		unsigned char ch = (unsigned char)n->str[i];
		if (ch < 0x20 || ch == 0x7f)
			return fg_pfail(c, n, "%s contains a control character (0x%02x)", path, ch);
	}
	*out = n->str;
	return 0;
}

static int copy_text(struct fg_pctx *c, const struct fg_ynode *n, const char *path, char *out,
		     size_t size)
{
	const char *s;

	if (fg_decode_string(c, n, path, &s))
		return -1;
	if (n->len >= size)
		return fg_pfail(c, n, "%s is too long: %zu bytes, at most %zu", path, n->len,
				size - 1);
	memcpy(out, s, n->len + 1);
	return 0;
}

int fg_decode_name(struct fg_pctx *c, const struct fg_ynode *n, const char *path, char *out,
		   size_t size)
{
	char q[64];

	if (copy_text(c, n, path, out, size))
		return -1;
	if (!n->len)
		return fg_pfail(c, n, "%s is empty", path);
	if (strspn(out, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n->len)
		return fg_pfail(c, n, "%s %s may only use letters, digits, '.', '_' and '-'", path,
				fg_quote(n, q, sizeof(q)));
	return 0;
}

/* "must be > 0", "must be in (0, 1]", ... for a field's range. */
static void describe_range(const struct fg_field *f, char *buf, size_t len)
{
	const char *lo = f->flags & FG_F_GT_MIN ? "(" : "[";

	if (isinf(f->max))
		snprintf(buf, len, "must be %s %.10g", f->flags & FG_F_GT_MIN ? ">" : ">=", f->min);
	else
		snprintf(buf, len, "must be in %s%.10g, %.10g]", lo, f->min, f->max);
}

static int check_range(struct fg_pctx *c, const struct fg_ynode *n, const struct fg_field *f,
		       const char *path, double v)
{
	char range[80];

	if ((f->flags & FG_F_GT_MIN) ? v > f->min : v >= f->min) {
		if (v <= f->max)
			return 0;
	}
	describe_range(f, range, sizeof(range));
	return fg_pfail(c, n, "%s %s, got %.10g", path, range, v);
}

static int decode_integer(struct fg_pctx *c, const struct fg_ynode *n, const struct fg_field *f,
			  const char *path, void *dst)
{
	double v;

	if (fg_decode_number(c, n, path, &v))
		return -1;
	if (v != floor(v))
		return fg_pfail(c, n, "%s must be a whole number, got %s", path, n->str);
	if (check_range(c, n, f, path, v))
		return -1;
	if (f->kind == FG_K_INT) {
		*(int32_t *)dst = (int32_t)v;
		return 0;
	}
	switch (f->size) {
	case 1: *(uint8_t *)dst = (uint8_t)v; break;
	case 2: *(uint16_t *)dst = (uint16_t)v; break;
	case 4: *(uint32_t *)dst = (uint32_t)v; break;
	default: *(uint64_t *)dst = (uint64_t)v; break;
	}
	return 0;
}

static int decode_enum(struct fg_pctx *c, const struct fg_ynode *n, const struct fg_field *f,
		       const char *path, int *dst)
{
	const char *names[16];
	char list[160] = "", q[64];
	size_t k = 0, o = 0;
	const char *s;

	if (fg_decode_string(c, n, path, &s))
		return -1;
	for (; f->enums[k].name && k < 16; k++) {
		if (!strcmp(s, f->enums[k].name)) {
			*dst = f->enums[k].value;
			return 0;
		}
		names[k] = f->enums[k].name;
		o += (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%s",
				      k ? " | " : "", names[k]);
	}
	const char *guess = fg_suggest(s, names, k);
	if (guess)
		return fg_pfail(c, n, "%s must be %s, got %s; did you mean '%s'?", path, list,
				fg_quote(n, q, sizeof(q)), guess);
	return fg_pfail(c, n, "%s must be %s, got %s", path, list, fg_quote(n, q, sizeof(q)));
}

/* The word `off` (FG_F_OFF), as a whole scalar: "off\0…" is not it. */
static bool is_off(const struct fg_ynode *n)
{
	return n->type == FG_Y_SCALAR && n->len == 3 && !memcmp(n->str, "off", 3);
}

static int decode_hostport(struct fg_pctx *c, const struct fg_ynode *n, const char *path,
			   struct fg_hostport *dst, bool may_be_off)
{
	char why[128], q[64];
	const char *s;

	if (may_be_off && is_off(n)) {
		memset(dst, 0, sizeof(*dst));
		return 0;
	}
	if (fg_decode_string(c, n, path, &s))
		return -1;
	if (n->len >= FG_HOSTPORT_MAX || fg_parse_hostport(s, dst, why, sizeof(why)))
		return fg_pfail(c, n, "%s %s: %s", path, fg_quote(n, q, sizeof(q)),
				n->len >= FG_HOSTPORT_MAX ? "too long" : why);
	return 0;
}

static int decode_list(struct fg_pctx *c, const struct fg_ynode *n, const struct fg_field *f,
		       const char *path, void *base)
{
	uint32_t *count = (uint32_t *)((char *)base + f->count_off);
	char *arr = (char *)base + f->off;
	char item[FG_PATH_TEXT], why[128], q[64];

	if (fg_expect(c, n, FG_Y_SEQ, path))
		return -1;
	if (n->n > f->max_count)
		return fg_pfail(c, n->items[f->max_count], "%s has more than %u entries", path,
				f->max_count);
	for (size_t i = 0; i < n->n; i++) {
		const struct fg_ynode *it = n->items[i];
		fg_path(item, sizeof(item), "%s[%zu]", path, i);
		if (f->kind == FG_K_PORTS) {
			static const struct fg_field port = { .kind = FG_K_UINT, .size = 2,
							      .min = 1, .max = 65535 };
			uint16_t *ports = (uint16_t *)arr;
			if (decode_integer(c, it, &port, item, &ports[i]))
				return -1;
			for (size_t j = 0; j < i; j++)
				if (ports[j] == ports[i])
					return fg_pfail(c, it, "%s: port %u is listed twice", item,
							ports[i]);
		} else if (f->kind == FG_K_IFACES) {
			char *name = arr + i * f->size;
			if (fg_decode_name(c, it, item, name, f->size))
				return -1;
			if (!strcmp(name, ".") || !strcmp(name, ".."))
				return fg_pfail(c, it, "%s: '%s' is not an interface name", item, name);
			for (size_t j = 0; j < i; j++)
				if (!strcmp(arr + j * f->size, name))
					return fg_pfail(c, it, "%s: interface %s is listed twice",
							item, name);
		} else {
			struct fg_cidr *cidrs = (struct fg_cidr *)arr;
			const char *s;
			if (fg_decode_string(c, it, item, &s))
				return -1;
			if (fg_parse_cidr(s, &cidrs[i], why, sizeof(why)))
				return fg_pfail(c, it, "%s %s: %s", item, fg_quote(it, q, sizeof(q)),
						why);
		}
	}
	*count = (uint32_t)n->n;
	return 0;
}

static int decode_field(struct fg_pctx *c, const struct fg_ynode *v, const struct fg_field *f,
			void *base, const char *path)
{
	void *dst = (char *)base + f->off;
	double d;
	char q[64];

	switch (f->kind) {
	case FG_K_DOUBLE:
		if ((f->flags & FG_F_OFF) && is_off(v)) {
			*(double *)dst = 0;
			return 0;
		}
		if (fg_decode_number(c, v, path, &d) || check_range(c, v, f, path, d))
			return -1;
		*(double *)dst = d;
		return 0;
	case FG_K_UINT:
	case FG_K_INT:
		return decode_integer(c, v, f, path, dst);
	case FG_K_TEXT:
		if (copy_text(c, v, path, dst, f->size))
			return -1;
		if (!v->len)
			return fg_pfail(c, v, "%s is empty", path);
		return 0;
	case FG_K_NAME:
		return fg_decode_name(c, v, path, dst, f->size);
	case FG_K_PATH:
		if (copy_text(c, v, path, dst, f->size))
			return -1;
		if (((const char *)dst)[0] != '/')
			return fg_pfail(c, v, "%s must be an absolute path, got %s", path,
					fg_quote(v, q, sizeof(q)));
		return 0;
	case FG_K_ENUM:
		return decode_enum(c, v, f, path, dst);
	case FG_K_HOSTPORT:
		return decode_hostport(c, v, path, dst, f->flags & FG_F_OFF);
	case FG_K_CIDRS:
	case FG_K_PORTS:
	case FG_K_IFACES:
		return decode_list(c, v, f, path, base);
	case FG_K_MAP:
		return fg_decode_map(c, v, f->sub, dst, path, NULL);
	case FG_K_CUSTOM:
		return f->decode(c, v, base, path);
	}
	return fg_pfail(c, v, "%s: internal error (unknown field kind)", path);
}

int fg_decode_value(struct fg_pctx *c, const struct fg_ynode *v, const struct fg_field *f,
		    void *base, const char *path)
{
	return decode_field(c, v, f, base, path);
}

static int check_keys(struct fg_pctx *c, const struct fg_ynode *map, const struct fg_schema *s,
		      const char *path, uint64_t *seen)
{
	const char *names[64];
	char q[64];

	for (size_t k = 0; k < s->n && k < 64; k++)
		names[k] = s->fields[k].key;
	for (size_t i = 0; i < fg_ymap_len(map); i++) {
		const struct fg_ynode *key = fg_ymap_key(map, i);
		if (key->type != FG_Y_SCALAR || fg_ynode_is_null(key))
			return fg_pfail(c, key, "keys in %s must be names, got %s", shown(path),
					fg_ynode_kind(key));
		for (size_t j = 0; j < i; j++) {
			const struct fg_ynode *prev = fg_ymap_key(map, j);
			if (prev->type == FG_Y_SCALAR && prev->len == key->len &&
			    !memcmp(prev->str, key->str, key->len))
				return fg_pfail(c, key, "duplicate key %s in %s (first at %u:%u)",
						fg_quote(key, q, sizeof(q)), shown(path), prev->line,
						prev->col);
		}
		size_t f = 0;
		while (f < s->n && strcmp(s->fields[f].key, key->str))
			f++;
		if (f == s->n) {
			const char *guess = fg_suggest(key->str, names, s->n < 64 ? s->n : 64);
			if (guess)
				return fg_pfail(c, key, "unknown key %s in %s; did you mean '%s'?",
						fg_quote(key, q, sizeof(q)), shown(path), guess);
			return fg_pfail(c, key, "unknown key %s in %s", fg_quote(key, q, sizeof(q)),
					shown(path));
		}
		if (seen && f < 64)
			*seen |= 1ull << f;
	}
	return 0;
}

int fg_decode_map(struct fg_pctx *c, const struct fg_ynode *map, const struct fg_schema *s,
		  void *base, const char *path, uint64_t *seen)
{
	char sub[FG_PATH_TEXT];
	uint64_t local = 0;

	if (fg_expect(c, map, FG_Y_MAP, path) || check_keys(c, map, s, path, &local))
		return -1;
	if (seen)
		*seen = local;
	for (size_t i = 0; i < s->n; i++) {
		const struct fg_field *f = &s->fields[i];
		const struct fg_ynode *v = fg_ymap_get(map, f->key);
		if (!v) {
			if (f->flags & FG_F_REQUIRED)
				return fg_pfail(c, map, "%s is missing required key '%s'",
						shown(path), f->key);
			continue;
		}
		fg_path(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", f->key);
		if (decode_field(c, v, f, base, sub))
			return -1;
	}
	return 0;
}
