# fuzz.mk — coverage-guided fuzzing (libFuzzer) of every parser that takes
# untrusted input: selftests/fuzz/fuzz_NAME.c -> $(BUILD)/fuzz/fuzz_NAME.
#
# The project's normal compiler is gcc; libFuzzer is clang's, so the fuzzers
# and a second copy of the project's library code are built with clang
# (-fsanitize=fuzzer-no-link for coverage, ASan+UBSan) into $(BUILD)/fuzz/.
# The sanitizer flavour's `make ... SAN=1 tests` builds them too, so `make
# test` runs each briefly from its committed corpus (selftests/e2e/
# fuzz_smoke.sh); `make fuzz` runs each for FUZZ_SECONDS.
#
# Included after every */build.mk (the source lists are complete) but
# before the Makefile defines SKELS and LIBS, so it computes its own.

FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SRCS := $(sort $(wildcard selftests/fuzz/fuzz_*.c))
FUZZ_BINS := $(patsubst selftests/fuzz/%.c,$(FUZZ_DIR)/%,$(FUZZ_SRCS))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer -D_GNU_SOURCE -DFG_SANITIZED=1 \
	      -I. -I$(BUILD)/include $(FUZZ_SAN)
FUZZ_SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/include/%.skel.h,$(BPF_PROGS))
fuzz_obj = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(1))
FUZZ_LIB := $(FUZZ_DIR)/libfg-fuzz.a

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@selftests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

ifeq ($(SAN),1)
tests: fuzz-build
endif

# Project code: instrumented for coverage. Warnings stay visible but are not
# fatal here: the gcc build is the -Werror gate for these files.
$(FUZZ_DIR)/obj/%.o: %.c | $(FUZZ_SKELS)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Wall -Wextra -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

# The harnesses themselves are held to the house rule.
$(FUZZ_DIR)/obj/selftests/fuzz/%.o: selftests/fuzz/%.c | $(FUZZ_SKELS)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Wall -Wextra -Werror -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

# All of the agent library: the HTTP harness drives the proxy's own parser
# callbacks (agent/proxy/proxy_client.c), which link against the rest of it; an
# archive only brings in what a harness reaches.
FUZZ_AGENT_SRCS := $(AGENT_LIB_SRCS) $(FG_LIB_SRCS) $(MAPS_SRCS)
$(FUZZ_LIB): $(call fuzz_obj,$(POLICY_SRCS) $(FUZZ_AGENT_SRCS) $(SIM_LIB_SRCS))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^

# kept: make would delete them as intermediates of the pattern chain
.SECONDARY: $(call fuzz_obj,$(FUZZ_SRCS))
$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/selftests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(CLANG) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(LDLIBS)

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
