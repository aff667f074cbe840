# bpf/ — kernel programs (each becomes build/bpf/NAME.bpf.o + a skeleton).
# -mcpu=v3 for BPF_ATOMIC compare-and-swap (the gate's allowance bucket).
BPF_CFLAGS += -mcpu=v3
BPF_PROGS += bpf/gate.bpf.c bpf/steer.bpf.c
