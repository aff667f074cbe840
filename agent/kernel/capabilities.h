/* capabilities.h — the Linux capabilities fairgated needs, listed once.
 *
 * `fairgated --capabilities` prints this list; deploy/'s DaemonSet and
 * systemd unit grant exactly it (selftests/e2e/deploy_files.sh checks), and
 * a permission error from the kernel names the ones this process lacks.
 * Root is not enough inside a container: what counts is the effective set.
 */
#ifndef FAIRGATE_CAPABILITIES_H
#define FAIRGATE_CAPABILITIES_H

#include <stdbool.h>
#include <stddef.h>

struct fg_cap_need {
	int cap;           /* CAP_* number */
	const char *name;  /* "CAP_BPF" */
	const char *why;
};

/* What kernel enforcement needs; the table ends with a NULL name. */
extern const struct fg_cap_need fg_caps_needed[];

/* Whether this process holds `cap` in its effective set. */
bool fg_cap_effective(int cap);
/* "CAP_PERFMON, CAP_BPF" of the needed ones this process lacks into buf
 * ("" when none); returns how many. */
int fg_caps_missing(char *buf, size_t len);
/* One line per needed capability, "CAP_BPF\twhy", to stdout. */
void fg_caps_print(void);

#endif
