SIM_LIB_SRCS += $(filter-out sim/sim_main.c,$(wildcard sim/*.c))
SIM_MAIN += sim/sim_main.c
