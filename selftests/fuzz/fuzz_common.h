/* fuzz_common.h — what every libFuzzer harness in selftests/fuzz/ shares:
 * an invariant check that names what broke before aborting (libFuzzer turns
 * the abort into a crash file), and a tiny deterministic splitter that lets
 * one input also choose options and chunk boundaries. */
#ifndef FAIRGATE_FUZZ_COMMON_H
#define FAIRGATE_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                     \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, \
				__LINE__, #cond);                                 \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
			abort();                                                  \
		}                                                                 \
	} while (0)

/* Take the first byte of the input as option bits (0 when empty). */
static inline uint8_t fuzz_take_byte(const uint8_t **data, size_t *size)
{
	if (!*size)
		return 0;
	uint8_t b = **data;
	(*data)++;
	(*size)--;
	return b;
}

/* Chunk lengths for feeding a stream in pieces: xorshift from a seed byte,
 * so a crash reproduces from the input alone. Lengths 1..max. */
static inline size_t fuzz_next_chunk(uint32_t *state, size_t max)
{
	uint32_t x = *state ? *state : 0x9e3779b9u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return 1 + x % (max ? max : 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
