# maps/: the kernel ABI (headers shared with bpf/) and its userspace side.
MAPS_SRCS += $(wildcard maps/*.c)
