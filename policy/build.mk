LIB_SRCS += $(wildcard policy/*.c)
