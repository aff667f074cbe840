AGENT_LIB_SRCS += $(filter-out agent/fairgated.c agent/fairgatectl.c,$(wildcard agent/*.c))
FAIRGATED_MAIN += agent/fairgated.c
FAIRGATECTL_MAIN += agent/fairgatectl.c
LDLIBS += -lhiredis
# fleet_lua.c embeds agent/fleet_store.lua with .incbin, which -MMD cannot see
$(BUILD)/obj/agent/fleet_lua.o: agent/fleet_store.lua
