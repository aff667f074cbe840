# fairgate — top-level build.
#
#   make          build everything into build/ (-Wall -Wextra -Werror)
#   make test     install missing deps, build the test flavour (ASan+UBSan) into
#                 build/test/ and the release one's tests into build/, run every
#                 test (unit and BPF ones in both); ends with "N passed, N failed"
#   make demo     install missing deps, build, run the demo on fairgate-sim
#   make bench    install missing deps, build, run the benchmarks (ratios)
#   make deps     install the Debian packages the build and tests need
#   make SAN=tsan BUILD=build/tsan all tests
#                 the ThreadSanitizer flavour (no ASan), for agent.workers > 1:
#                 FG_E2E_WORKERS=2 selftests/run.sh build/tsan (docs/design.md, "Workers")
#
# Each folder adds its sources in its own build.mk (see mk/README); this file
# owns only the rules.

BUILD   ?= build
SAN     ?= 0
CC      ?= gcc
CLANG   ?= clang
BPFTOOL ?= bpftool
JOBS    ?= $(shell nproc 2>/dev/null || echo 1)  # parallel compiles for test/demo/bench
ARCH_INC := /usr/include/$(shell $(CC) -dumpmachine 2>/dev/null)

CFLAGS  := -std=gnu11 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I. -I$(BUILD)/include
LDFLAGS :=
LDLIBS  := -lbpf -lelf -lz -lyaml -ljansson -lyajl -lcrypto -lhttp_parser -lpthread -lm
ifeq ($(SAN),1)
CFLAGS  += -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DFG_SANITIZED=1
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SAN),tsan)
# -Wno-tsan: TSan does not model fences; the maps' seqlocks order their
# writes with fences for readers in the kernel and other processes, which
# it cannot see anyway
CFLAGS  += -O1 -fno-omit-frame-pointer -fsanitize=thread -Wno-tsan -DFG_SANITIZED=1
LDFLAGS += -fsanitize=thread
else
CFLAGS  += -O2
endif
BPF_CFLAGS := -g -O2 -target bpf -Wall -Werror -I. -I$(ARCH_INC)

# Filled by */build.mk
FG_LIB_SRCS     :=   # lib/: event loop, buffers, sockets, control client (system libraries only)
POLICY_SRCS     :=   # policy/: pure logic with an explicit clock
MAPS_SRCS       :=   # maps/: userspace access to the pinned maps (ABI headers beside it)
AGENT_LIB_SRCS  :=   # agent/ without main(), also linked into tests
CLI_SRCS        :=   # cli/: fairgatectl's subcommands without main()
SIM_LIB_SRCS    :=   # simulator code without main()
FAIRGATED_MAIN  :=
FAIRGATECTL_MAIN :=
SIM_MAIN        :=
BPF_PROGS       :=   # bpf/NAME.bpf.c -> $(BUILD)/bpf/NAME.bpf.o + $(BUILD)/include/NAME.skel.h
UNIT_TESTS      :=   # single-file cmocka programs -> $(BUILD)/tests/NAME
TEST_LIB_SRCS   :=   # fixtures without main(), linked into the test programs
TOOLS           :=   # single-file helper programs (load generator, bench drivers) -> $(BUILD)/NAME
TEST_SCRIPTS    :=   # shell tests printing TAP, run by selftests/run.sh

include $(sort $(wildcard */build.mk bench/*.mk)) selftests/fuzz/fuzz.mk

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/include/%.skel.h,$(BPF_PROGS))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_PROGS))
# One archive per room; a binary links only the rooms it uses, upper first.
LIBFG := $(BUILD)/libfg.a
LIBPOLICY := $(BUILD)/libfgpolicy.a
LIBMAPS := $(BUILD)/libfgmaps.a
LIBAGENT := $(BUILD)/libfgagent.a
LIBCLI := $(BUILD)/libfgcli.a
LIBSIM := $(BUILD)/libfgsim.a
LIBTEST := $(BUILD)/libfgtest.a
BASE_LIBS := $(LIBMAPS) $(LIBPOLICY) $(LIBFG)
LIBS := $(LIBAGENT) $(LIBCLI) $(LIBSIM) $(BASE_LIBS)
BINS := $(BUILD)/fairgated $(BUILD)/fairgatectl $(BUILD)/fairgate-sim
TEST_BINS := $(patsubst %.c,$(BUILD)/tests/%,$(notdir $(UNIT_TESTS)))
TOOL_BINS := $(patsubst %.c,$(BUILD)/%,$(notdir $(TOOLS)))

.PHONY: all tests test demo bench deps clean
.DEFAULT_GOAL := all

all: $(BINS) $(TOOL_BINS)

tests: all $(TEST_BINS)

$(BUILD)/obj/%.o: %.c | $(SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBFG): $(call obj,$(FG_LIB_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBPOLICY): $(call obj,$(POLICY_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBMAPS): $(call obj,$(MAPS_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBCLI): $(call obj,$(CLI_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBAGENT): $(call obj,$(AGENT_LIB_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBSIM): $(call obj,$(SIM_LIB_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBTEST): $(call obj,$(TEST_LIB_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^

$(BUILD)/fairgated: $(call obj,$(FAIRGATED_MAIN)) $(LIBAGENT) $(BASE_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/fairgatectl: $(call obj,$(FAIRGATECTL_MAIN)) $(LIBCLI) $(BASE_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/fairgate-sim: $(call obj,$(SIM_MAIN)) $(LIBSIM) $(LIBPOLICY) $(LIBFG)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# A tool links the simulator and the bottom rooms unless its build.mk says
# otherwise with TOOL_LIBS_<name> (archives, upper first); unit tests link all.
define one_file_prog
$(1): $(call obj,$(2)) $(4) $(5)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS) $(3)
endef
$(foreach t,$(UNIT_TESTS),$(eval $(call one_file_prog,$(BUILD)/tests/$(notdir $(t:.c=)),$(t),-lcmocka,$(LIBTEST),$(LIBS))))
$(foreach t,$(TOOLS),$(eval $(call one_file_prog,$(BUILD)/$(notdir $(t:.c=)),$(t),,,$(or $(TOOL_LIBS_$(notdir $(t:.c=))),$(LIBSIM) $(BASE_LIBS)))))

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard maps/*.h bpf/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@
# kept: make would delete them as intermediates, and every later make would
# then rebuild them and all that includes a skeleton
.SECONDARY: $(SKELS) $(BPF_OBJS)
$(BUILD)/include/%.skel.h: $(BUILD)/bpf/%.bpf.o
	@mkdir -p $(dir $@)
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

deps:
	@scripts/deps.sh

# The unit and BPF tests run twice: under the sanitizers and in the release
# flavour (-O2, none), where a bug the sanitizers' layout hides still fails.
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build/test SAN=1 tests
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build SAN=0 tests
	@selftests/run.sh build/test build

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@scripts/demo.sh build

bench: deps
	@scripts/deps.sh --bench
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@bench/run.sh build

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
