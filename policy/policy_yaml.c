/* policy_yaml.c — libyaml events into a positioned node tree; see policy_yaml.h.
 *
 * The event API rather than yaml_document_t because the document loader
 * resolves aliases silently and drops the alias's own position; here an alias,
 * an anchor or a tag is an error at the exact place it was written. Input is
 * forced to UTF-8, so UTF-16 or stray Latin-1 bytes fail in libyaml's reader
 * with a byte offset that we turn back into a line and column.
 */
#include "policy_yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct loader {
	const char *buf;
	size_t len;
	struct fg_policy_error *err;
	struct fg_ynode *stack[FG_YAML_MAX_DEPTH];
	unsigned depth;
	size_t nodes;
};

static int fail_at(struct loader *l, unsigned line, unsigned col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_at(struct loader *l, unsigned line, unsigned col, const char *fmt, ...)
{
	va_list ap;

	l->err->line = line ? line : 1;
	l->err->col = col ? col : 1;
	va_start(ap, fmt);
	vsnprintf(l->err->message, sizeof(l->err->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* 1-based line and column (in characters, like libyaml's marks) of a byte offset. */
static void position_of_offset(const char *buf, size_t len, size_t off, unsigned *line,
			       unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c == '\n') {
			++*line;
			*col = 1;
		} else if ((c & 0xc0) != 0x80) {
			++*col;
		}
	}
}

/* Byte at a 0-based line/column mark, or -1 past the end. */
static int byte_at_mark(const char *buf, size_t len, size_t line, size_t col)
{
	size_t i = 0;

	for (; line && i < len; i++)
		if (buf[i] == '\n')
			line--;
	for (; i < len; i++) {
		if ((buf[i] & 0xc0) == 0x80)
			continue;
		if (!col--)
			return (unsigned char)buf[i];
	}
	return -1;
}

/* At the end of input without a final line break libyaml counts one more
 * line (column 0 of a line the file does not have): point at the end of
 * the last line instead. Breaks as libyaml counts them: LF, CR, CRLF, NEL,
 * LS, PS. */
static void clamp_to_input(const char *buf, size_t len, unsigned *line, unsigned *col)
{
	unsigned lines = 1, tail = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		bool crlf = c == '\r' && i + 1 < len && buf[i + 1] == '\n';
		bool nel = c == 0xc2 && i + 1 < len && (unsigned char)buf[i + 1] == 0x85;
		bool ls_ps = c == 0xe2 && i + 2 < len && (unsigned char)buf[i + 1] == 0x80 &&
			     ((unsigned char)buf[i + 2] == 0xa8 || (unsigned char)buf[i + 2] == 0xa9);
		if (c == '\n' || c == '\r' || nel || ls_ps) {
			lines++;
			tail = 0;
			i += crlf || nel ? 1 : ls_ps ? 2 : 0;
		} else if ((c & 0xc0) != 0x80) {
			tail++;
		}
	}
	if (*line > lines && *col == 1) {
		*line = lines;
		*col = tail + 1;
	}
}

static int syntax_error(struct loader *l, const yaml_parser_t *p)
{
	unsigned line, col;

	if (p->error == YAML_MEMORY_ERROR)
		return fail_at(l, 1, 1, "out of memory while reading YAML");
	if (p->error == YAML_READER_ERROR) {
		position_of_offset(l->buf, l->len, p->problem_offset, &line, &col);
		const char *what = p->problem ? p->problem : "unreadable input";
		unsigned value = p->problem_value >= 0 ? (unsigned)p->problem_value : 0;
		if (strstr(what, "UTF-8"))
			return fail_at(l, line, col, "not valid UTF-8: %s (byte 0x%02x)", what,
				       value & 0xff);
		return fail_at(l, line, col, "invalid character U+%04X: %s", value, what);
	}
	line = (unsigned)p->problem_mark.line + 1;
	col = (unsigned)p->problem_mark.column + 1;
	clamp_to_input(l->buf, l->len, &line, &col);
	if (byte_at_mark(l->buf, l->len, p->problem_mark.line, p->problem_mark.column) == '\t')
		return fail_at(l, line, col, "invalid YAML: a tab cannot indent or separate YAML here; use spaces");
	if (p->context)
		return fail_at(l, line, col, "invalid YAML: %s (%s at line %zu)", p->problem,
			       p->context, p->context_mark.line + 1);
	return fail_at(l, line, col, "invalid YAML: %s", p->problem ? p->problem : "syntax error");
}

static int append(struct fg_ynode *parent, struct fg_ynode *child)
{
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : 8;
		struct fg_ynode **items = realloc(parent->items, cap * sizeof(*items));
		if (!items)
			return -1;
		parent->items = items;
		parent->cap = cap;
	}
	parent->items[parent->n++] = child;
	return 0;
}

/* A new node at the event's position, attached to the open container (or as
 * the root). Attaching at once means freeing the root frees everything, even
 * when loading stops half way. */
static struct fg_ynode *new_node(struct loader *l, struct fg_ynode **root,
				 enum fg_ynode_type type, const yaml_event_t *ev)
{
	unsigned line = (unsigned)ev->start_mark.line + 1, col = (unsigned)ev->start_mark.column + 1;

	if (++l->nodes > FG_YAML_MAX_NODES) {
		fail_at(l, line, col, "policy has more than %u YAML nodes", FG_YAML_MAX_NODES);
		return NULL;
	}
	struct fg_ynode *n = calloc(1, sizeof(*n));
	if (!n) {
		fail_at(l, line, col, "out of memory");
		return NULL;
	}
	n->type = type;
	n->line = line;
	n->col = col;
	if (l->depth == 0)
		*root = n;
	else if (append(l->stack[l->depth - 1], n)) {
		free(n);
		fail_at(l, line, col, "out of memory");
		return NULL;
	}
	return n;
}

static int refuse_anchor_or_tag(struct loader *l, const yaml_event_t *ev,
				const yaml_char_t *anchor, const yaml_char_t *tag)
{
	unsigned line = (unsigned)ev->start_mark.line + 1, col = (unsigned)ev->start_mark.column + 1;

	if (anchor)
		return fail_at(l, line, col,
			       "YAML anchors (&%.40s) are not supported in a policy; write the value out",
			       (const char *)anchor);
	if (tag)
		return fail_at(l, line, col, "YAML tags (%.60s) are not supported in a policy",
			       (const char *)tag);
	return 0;
}

static int on_scalar(struct loader *l, struct fg_ynode **root, const yaml_event_t *ev)
{
	if (refuse_anchor_or_tag(l, ev, ev->data.scalar.anchor, ev->data.scalar.tag))
		return -1;
	struct fg_ynode *n = new_node(l, root, FG_Y_SCALAR, ev);
	if (!n)
		return -1;
	n->len = ev->data.scalar.length;
	n->str = malloc(n->len + 1);
	if (!n->str)
		return fail_at(l, n->line, n->col, "out of memory");
	memcpy(n->str, ev->data.scalar.value, n->len);
	n->str[n->len] = '\0';
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	return 0;
}

static int on_open(struct loader *l, struct fg_ynode **root, const yaml_event_t *ev,
		   enum fg_ynode_type type)
{
	const yaml_char_t *anchor, *tag;

	if (type == FG_Y_SEQ) {
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
	} else {
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
	}
	if (refuse_anchor_or_tag(l, ev, anchor, tag))
		return -1;
	if (l->depth == FG_YAML_MAX_DEPTH)
		return fail_at(l, (unsigned)ev->start_mark.line + 1, (unsigned)ev->start_mark.column + 1,
			       "YAML nested deeper than %d levels", FG_YAML_MAX_DEPTH);
	struct fg_ynode *n = new_node(l, root, type, ev);
	if (!n)
		return -1;
	l->stack[l->depth++] = n;
	return 0;
}

/* One event; 1 when the stream ended, 0 to go on, -1 on error. */
static int on_event(struct loader *l, struct fg_ynode **root, const yaml_event_t *ev, int *docs)
{
	unsigned line = (unsigned)ev->start_mark.line + 1, col = (unsigned)ev->start_mark.column + 1;

	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_DOCUMENT_START_EVENT:
		if (++*docs > 1)
			return fail_at(l, line, col,
				       "a policy file holds one YAML document; found a second '---'");
		return 0;
	case YAML_ALIAS_EVENT:
		return fail_at(l, line, col,
			       "YAML aliases (*%.40s) are not supported in a policy; write the value out",
			       (const char *)ev->data.alias.anchor);
	case YAML_SCALAR_EVENT:
		return on_scalar(l, root, ev);
	case YAML_SEQUENCE_START_EVENT:
		return on_open(l, root, ev, FG_Y_SEQ);
	case YAML_MAPPING_START_EVENT:
		return on_open(l, root, ev, FG_Y_MAP);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (l->depth)
			l->depth--;
		return 0;
	default:
		return 0;
	}
}

int fg_yaml_load(const char *buf, size_t len, struct fg_ynode **root,
		 struct fg_policy_error *err)
{
	struct loader l = { .buf = buf, .len = len, .err = err };
	yaml_parser_t parser;
	yaml_event_t ev;
	int docs = 0, rc = 0;

	*root = NULL;
	/* Forcing UTF-8 below also stops libyaml from eating a byte-order mark. */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) {
		buf += 3;
		len -= 3;
		l.buf = buf;
		l.len = len;
	}
	if (len > FG_YAML_MAX_BYTES)
		return fail_at(&l, 1, 1, "policy file is larger than %u bytes", FG_YAML_MAX_BYTES);
	if (!yaml_parser_initialize(&parser))
		return fail_at(&l, 1, 1, "out of memory");
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	while (rc == 0) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = syntax_error(&l, &parser);
			break;
		}
		rc = on_event(&l, root, &ev, &docs);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	if (rc < 0) {
		fg_yaml_free(*root);
		*root = NULL;
		return -1;
	}
	if (!*root || fg_ynode_is_null(*root)) {
		fg_yaml_free(*root);
		*root = NULL;
		return fail_at(&l, 1, 1, "policy file is empty (expected a mapping with replica, tiers, tenants, agent)");
	}
	return 0;
}

void fg_yaml_free(struct fg_ynode *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->n; i++)
		fg_yaml_free(node->items[i]);
	free(node->items);
	free(node->str);
	free(node);
}

void fg_yaml_set_source(struct fg_ynode *node, unsigned char source)
{
	if (!node)
		return;
	node->source = source;
	for (size_t i = 0; i < node->n; i++)
		fg_yaml_set_source(node->items[i], source);
}

struct fg_ynode *fg_ymap_key_node(const struct fg_ynode *m, const char *key)
{
	if (m->type != FG_Y_MAP)
		return NULL;
	for (size_t i = 0; i < fg_ymap_len(m); i++) {
		struct fg_ynode *k = fg_ymap_key(m, i);
		if (k->type == FG_Y_SCALAR && !strcmp(k->str, key))
			return k;
	}
	return NULL;
}

struct fg_ynode *fg_ymap_get(const struct fg_ynode *m, const char *key)
{
	if (m->type != FG_Y_MAP)
		return NULL;
	for (size_t i = 0; i < fg_ymap_len(m); i++) {
		struct fg_ynode *k = fg_ymap_key(m, i);
		if (k->type == FG_Y_SCALAR && !strcmp(k->str, key))
			return fg_ymap_val(m, i);
	}
	return NULL;
}

bool fg_ynode_is_null(const struct fg_ynode *n)
{
	return n->type == FG_Y_SCALAR && n->plain &&
	       (n->len == 0 || !strcmp(n->str, "~") || !strcmp(n->str, "null") ||
		!strcmp(n->str, "Null") || !strcmp(n->str, "NULL"));
}
