AGENT_LIB_SRCS += $(filter-out agent/fairgated.c agent/fairgatectl.c,$(wildcard agent/*.c))
FAIRGATED_MAIN += agent/fairgated.c
FAIRGATECTL_MAIN += agent/fairgatectl.c
