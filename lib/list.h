/* list.h — an intrusive doubly linked list (a ring with a head node): the
 * proxy's clients, busy and idle engine connections. */
#ifndef FAIRGATE_LIST_H
#define FAIRGATE_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct fg_link {
	struct fg_link *prev, *next;
};

static inline void fg_link_init(struct fg_link *l) { l->prev = l->next = l; }
static inline bool fg_link_empty(const struct fg_link *l) { return l->next == l; }
static inline void fg_link_add(struct fg_link *head, struct fg_link *l)
{
	l->next = head->next;
	l->prev = head;
	head->next->prev = l;
	head->next = l;
}
/* at the end: a queue, oldest first from head->next */
static inline void fg_link_add_tail(struct fg_link *head, struct fg_link *l) { fg_link_add(head->prev, l); }
static inline void fg_link_del(struct fg_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}
#define fg_container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

#endif
