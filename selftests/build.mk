UNIT_TESTS += $(wildcard selftests/unit/test_*.c selftests/bpf/test_*.c)
TEST_SCRIPTS += $(sort $(wildcard selftests/e2e/*.sh))
TOOLS += selftests/tools/fg-fake-engine.c
