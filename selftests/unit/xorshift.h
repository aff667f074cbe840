/* xorshift.h — the unit tests' repeatable pseudo-random numbers: xorshift64
 * from a seed each test file picks, so a failing sequence replays. */
#ifndef FAIRGATE_TEST_XORSHIFT_H
#define FAIRGATE_TEST_XORSHIFT_H

#include <stdint.h>

/* The next state of *s (never 0 from a non-zero seed), which is also the draw. */
static inline uint64_t fg_xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
