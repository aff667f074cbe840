/* kernel_errors.c — libbpf's output kept quiet, and one line for a bpf()
 * failure that names what is missing; shared by kernel.c (gate) and
 * kernel_steer.c (steer), so neither calls the other for it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "agent/kernel/capabilities.h"
#include "agent/kernel/kernel_internal.h"

/* libbpf talks a lot; keep its last warning for our one-line errors and
 * print everything only with FAIRGATE_LIBBPF_DEBUG=1. */
static char libbpf_last[256];

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (getenv("FAIRGATE_LIBBPF_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_WARN) {
		vsnprintf(libbpf_last, sizeof(libbpf_last), fmt, ap);
		libbpf_last[strcspn(libbpf_last, "\n")] = '\0';
	}
	return 0;
}

void fg_kernel_quiet_libbpf(void)
{
	libbpf_set_print(libbpf_quiet);
}

const char *fg_kernel_libbpf_last(void)
{
	return libbpf_last;
}

/* One line for a bpf() failure, naming what is missing. */
void fg_kernel_explain(char *err, size_t errlen, const char *what, int e)
{
	if (e < 0)
		e = -e;
	if (e == EPERM || e == EACCES) {
		char missing[128];

		if (fg_caps_missing(missing, sizeof(missing)))
			snprintf(err, errlen, "%s: %s — fairgated lacks %s (`fairgated --capabilities` "
				 "lists what it needs and why)", what, strerror(e), missing);
		else
			snprintf(err, errlen, "%s: %s, although fairgated has every capability it needs: "
				 "a seccomp profile (a container runtime's default allows bpf() only "
				 "with CAP_SYS_ADMIN) or a security module refuses it", what, strerror(e));
	} else if (e == ENOSYS)
		snprintf(err, errlen, "%s: the kernel has no bpf() syscall (CONFIG_BPF_SYSCALL)", what);
	else if (strstr(libbpf_last, "reuse pinned map"))
		snprintf(err, errlen,
			 "%s: a pinned map has another layout (left by a different fairgate "
			 "version); run fairgated once with --cleanup, or remove the pin dir", what);
	else if (libbpf_last[0])
		snprintf(err, errlen, "%s: %s (%s)", what, strerror(e), libbpf_last);
	else
		snprintf(err, errlen, "%s: %s", what, strerror(e));
}
