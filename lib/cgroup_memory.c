/* cgroup_memory.c — this cgroup's memory limit; see cgroup_memory.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cgroup_memory.h"

/* v1 reports "no limit" as the largest page-aligned long */
#define V1_UNLIMITED_ABOVE (1ull << 62)

static uint64_t read_limit(const char *path)
{
	char text[64];
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	if (!strncmp(text, "max", 3))
		return 0;
	char *end;
	unsigned long long v = strtoull(text, &end, 10);
	if (end == text || (*end && *end != '\n') || v >= V1_UNLIMITED_ABOVE)
		return 0;
	return v;
}

uint64_t fg_cgroup_memory_limit(const char *root, const char *self_cgroup)
{
	char path[4096];
	const char *line = self_cgroup;

	/* lines "ID:CONTROLLERS:PATH"; v2's is "0::PATH", v1's memory one
	 * names memory among its controllers */
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		if (c2) {
			const char *ctl = c1 + 1, *cg = c2 + 1;
			int ctl_len = (int)(c2 - ctl), cg_len = (int)(len - (size_t)(cg - line));
			uint64_t v = 0;
			if (ctl_len == 0 && !strncmp(line, "0:", 2)) {
				snprintf(path, sizeof(path), "%s/%.*s/memory.max", root, cg_len, cg);
				v = read_limit(path);
				/* a container without its own cgroup namespace sees the
				 * host's path, with its own cgroup mounted at the root */
				if (!v) {
					snprintf(path, sizeof(path), "%s/memory.max", root);
					v = read_limit(path);
				}
			} else {
				for (const char *w = ctl; w < c2;) {
					const char *comma = memchr(w, ',', (size_t)(c2 - w));
					size_t wl = comma ? (size_t)(comma - w) : (size_t)(c2 - w);
					if (wl == 6 && !memcmp(w, "memory", 6)) {
						snprintf(path, sizeof(path), "%s/memory/%.*s/memory.limit_in_bytes",
							 root, cg_len, cg);
						v = read_limit(path);
						if (!v) {
							snprintf(path, sizeof(path),
								 "%s/memory/memory.limit_in_bytes", root);
							v = read_limit(path);
						}
					}
					w += wl + (comma ? 1 : 0);
				}
			}
			if (v)
				return v;
		}
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

uint64_t fg_cgroup_memory_limit_self(void)
{
	char text[4096];
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return 0;
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	return fg_cgroup_memory_limit("/sys/fs/cgroup", text);
}
