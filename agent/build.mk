# agent/: fairgated. Its rooms (http, kernel, proxy, fleet, ctl) are
# folders here; fairgated.c wires them together (docs/design.md).
AGENT_LIB_SRCS += $(filter-out agent/fairgated.c,$(wildcard agent/*.c agent/*/*.c))
FAIRGATED_MAIN += agent/fairgated.c
LDLIBS += -lhiredis
# fleet_lua.c embeds agent/fleet/fleet_store.lua with .incbin, which -MMD cannot see
$(BUILD)/obj/agent/fleet/fleet_lua.o: agent/fleet/fleet_store.lua
