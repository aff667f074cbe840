# lib/: library-like code that depends on system libraries only.
FG_LIB_SRCS += $(wildcard lib/*.c)
