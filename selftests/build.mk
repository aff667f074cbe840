UNIT_TESTS += $(wildcard selftests/unit/test_*.c selftests/bpf/test_*.c)
# fg-tcpprobe: TCP connects that tell refused from timed out (e2e datapath tests)
TOOLS += selftests/tools/fg-tcpprobe.c
TEST_SCRIPTS += $(sort $(wildcard selftests/e2e/*.sh))
