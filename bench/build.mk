TOOLS += bench/fg-load.c
TOOLS += bench/fg-decision-bench.c
# fg-gate-bench: gate against bare XDP programs, and its SYN flood (gate.sh).
TOOLS += bench/fg-gate-bench.c
TOOL_LIBS_fg-decision-bench = $(LIBAGENT) $(BASE_LIBS)
