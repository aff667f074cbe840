# cli/: fairgatectl, one subcommand per file; links lib, maps and policy only.
CLI_SRCS += $(filter-out cli/fairgatectl.c,$(wildcard cli/*.c))
FAIRGATECTL_MAIN += cli/fairgatectl.c
