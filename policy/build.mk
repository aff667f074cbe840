POLICY_SRCS += $(wildcard policy/*.c)
