/* fleet_lua.c — agent/fleet/fleet_store.lua embedded in the binary, so a node
 * loads into Redis exactly the rules it was built with (agent/build.mk
 * rebuilds this object when the library changes). */
#include "agent/fleet/fleet_client.h"

__asm__(".section .rodata\n"
	".global fg_fleet_lua\n"
	".type fg_fleet_lua, @object\n"
	".balign 8\n"
	"fg_fleet_lua:\n"
	".incbin \"agent/fleet/fleet_store.lua\"\n"
	".byte 0\n"
	"fg_fleet_lua_end:\n"
	".size fg_fleet_lua, fg_fleet_lua_end - fg_fleet_lua\n"
	".global fg_fleet_lua_len\n"
	".type fg_fleet_lua_len, @object\n"
	".balign 4\n"
	"fg_fleet_lua_len:\n"
	".int fg_fleet_lua_end - fg_fleet_lua - 1\n"
	".size fg_fleet_lua_len, 4\n"
	".previous\n");
