UNIT_TESTS += $(wildcard selftests/unit/test_*.c selftests/bpf/test_*.c)
# gate's fixture, shared by the selftests/bpf/test_gate_*.c programs
TEST_LIB_SRCS += selftests/bpf/gate_fixture.c
# fg-tcpprobe: TCP connects that tell refused from timed out (e2e datapath tests)
TOOLS += selftests/tools/fg-tcpprobe.c
TEST_SCRIPTS += $(sort $(wildcard selftests/e2e/*.sh))
TOOLS += selftests/tools/fg-fake-engine.c
TOOLS += selftests/tools/fg-true-prices.c
