/* test_heap_give_back.c — lib/heap_give_back: after a burst's blocks are
 * freed between blocks still in use (no top trim reaches them) a give-back
 * hands their pages to the kernel (the process's resident set shrinks by
 * most of what was freed), it does not run again until the caller's activity moves,
 * and not when little is free. Glibc's allocator only: under
 * AddressSanitizer the heap is ASan's, and the RSS checks are skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/heap_give_back.h"


#define BURST 20000
#define BIG 5000    /* an exchange's order of size: spans a whole page */
#define SMALL 256   /* a connection's struct, still in use after the burst */
#define KEEP_EVERY 16

#ifndef FG_SANITIZED
static long resident_bytes(void)
{
	long size, resident;
	FILE *f = fopen("/proc/self/statm", "re");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}
#endif

static void gives_back_a_burst_between_live_blocks(void **state)
{
	(void)state;
#ifdef FG_SANITIZED
	skip(); /* the heap is the sanitizer's, not glibc's */
#else
	static char *big[BURST], *small[BURST];
	struct fg_heap_give_back g = { 0 };

	/* the connections' structs first, then the burst's blocks, of which
	 * one in KEEP_EVERY stays (a request still running) */
	for (int i = 0; i < BURST; i++) {
		small[i] = malloc(SMALL);
		assert_non_null(small[i]);
		memset(small[i], 0xa5, SMALL);
	}
	for (int i = 0; i < BURST; i++) {
		big[i] = malloc(BIG);
		assert_non_null(big[i]);
		memset(big[i], 0x5a, BIG); /* resident */
	}
	long freed = 0;
	for (int i = 0; i < BURST; i++)
		if (i % KEEP_EVERY) {
			free(big[i]);
			big[i] = NULL;
			freed += BIG;
		}
	long before = resident_bytes();
	assert_true(fg_heap_free_bytes() >= (size_t)freed);
	assert_true(fg_heap_give_back(&g, 1, 1u << 20));
	long after = resident_bytes();
	printf("# resident %ld -> %ld KiB after %ld KiB freed\n", before >> 10, after >> 10,
	       freed >> 10);
	/* the runs of freed blocks between the kept ones are ~75 KB: all but
	 * their edges are whole pages */
	assert_true(before - after >= freed * 8 / 10);
	assert_int_equal(g.given, 1);

	/* nothing done since: not again */
	assert_false(fg_heap_give_back(&g, 1, 1u << 20));
	assert_int_equal(g.given, 1);
	/* the live blocks are intact */
	for (int i = 0; i < BURST; i++)
		assert_int_equal((unsigned char)small[i][SMALL - 1], 0xa5);
	for (int i = 0; i < BURST; i++) {
		free(small[i]);
		free(big[i]);
	}
#endif
}

static void not_when_little_is_free(void **state)
{
	(void)state;
	struct fg_heap_give_back g = { 0 };
	/* more free bytes than any heap holds: never worth a walk */
	assert_false(fg_heap_give_back(&g, 7, SIZE_MAX));
	assert_int_equal(g.given, 0);
	assert_int_equal(g.activity, 0); /* so the next quiet moment asks again */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gives_back_a_burst_between_live_blocks),
		cmocka_unit_test(not_when_little_is_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
