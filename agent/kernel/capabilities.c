/* capabilities.c — the capabilities fairgated needs and which of them this
 * process holds; see capabilities.h. Measured, not guessed: without
 * CAP_PERFMON the verifier refuses gate ("pointer arithmetic with it
 * prohibited for !root"), without CAP_BPF nothing loads, without
 * CAP_NET_ADMIN neither program attaches. CAP_SYS_ADMIN is not needed once
 * /sys/fs/bpf is a bpffs (fairgated mounts one only where it may). */
#include "agent/kernel/capabilities.h"

#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

const struct fg_cap_need fg_caps_needed[] = {
	{ CAP_BPF, "CAP_BPF", "load gate and steer, create and pin their maps" },
	{ CAP_NET_ADMIN, "CAP_NET_ADMIN",
	  "attach gate (XDP) to interfaces and steer (sk_lookup) to the network namespace" },
	{ CAP_PERFMON, "CAP_PERFMON",
	  "the verifier accepts gate's pointer arithmetic on map values only with it" },
	{ 0, NULL, NULL },
};

bool fg_cap_effective(int cap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

	if (cap < 0 || cap >= 32 * _LINUX_CAPABILITY_U32S_3)
		return false;
	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[cap / 32].effective & (UINT32_C(1) << (cap % 32));
}

int fg_caps_missing(char *buf, size_t len)
{
	size_t o = 0;
	int n = 0;

	if (len)
		buf[0] = '\0';
	for (const struct fg_cap_need *c = fg_caps_needed; c->name; c++) {
		if (fg_cap_effective(c->cap))
			continue;
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, "%s%s", n ? ", " : "", c->name);
		n++;
	}
	return n;
}

void fg_caps_print(void)
{
	for (const struct fg_cap_need *c = fg_caps_needed; c->name; c++)
		printf("%s\t%s\n", c->name, c->why);
}
