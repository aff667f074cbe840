TOOLS += bench/fg-load.c
TOOLS += bench/fg-decision-bench.c
