/* cgroup_memory.h — the memory limit of this process's own cgroup (v2
 * memory.max, else v1 memory.limit_in_bytes), which in a container is the
 * container's limit: what the agent derives its buffered-bytes budget from. */
#ifndef FAIRGATE_CGROUP_MEMORY_H
#define FAIRGATE_CGROUP_MEMORY_H

#include <stdint.h>

/* The limit in bytes, or 0 when there is none ("max", v1's "unlimited"
 * near 2^63) or it cannot be read. ROOT is the cgroup mount ("/sys/fs/cgroup"
 * in production; a directory of the same shape in tests); SELF_CGROUP is
 * /proc/self/cgroup's text. */
uint64_t fg_cgroup_memory_limit(const char *root, const char *self_cgroup);
/* The same for this process, from /proc/self/cgroup and /sys/fs/cgroup. */
uint64_t fg_cgroup_memory_limit_self(void);

#endif
