/* test_huge_pages.c — lib/huge_pages: what is advised is the whole 2 MiB
 * pages inside a block and nothing outside it, a block without one is left
 * alone, fg_calloc_huge's memory is zeroed, and (where the kernel has THP)
 * the kernel shows the advice on the advised range (smaps' VmFlags "hg"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/huge_pages.h"

#define MIB (1u << 20)

/* Whether the mapping holding addr has VM_HUGEPAGE (smaps: "hg"). */
static bool advised_at(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false, hg = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
			in = addr >= lo && addr < hi;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			hg = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return hg;
}

static bool have_thp(void)
{
	return access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
}

static void advises_whole_pages_inside(void **state)
{
	(void)state;
	/* lengths around the page size, at offsets that are not aligned */
	static const size_t lens[] = { 2 * MIB + 1, 3 * MIB, 5 * MIB + 4096, 9 * MIB };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		char *b = malloc(lens[i] + 64);
		assert_non_null(b);
		char *p = b + 16 * (i + 1);
		size_t got = fg_advise_huge(p, lens[i]);
		uintptr_t first = ((uintptr_t)p + FG_HUGE_PAGE - 1) / FG_HUGE_PAGE;
		uintptr_t last = ((uintptr_t)p + lens[i]) / FG_HUGE_PAGE;
		size_t whole = last > first ? (last - first) * FG_HUGE_PAGE : 0;
		if (have_thp())
			assert_int_equal(got, whole);
		else
			assert_int_equal(got, 0);
		assert_true(got <= lens[i]);
		assert_int_equal(got % FG_HUGE_PAGE, 0);
		free(b);
	}
}

static void leaves_small_blocks_alone(void **state)
{
	(void)state;
	char *b = malloc(MIB);
	assert_non_null(b);
	assert_int_equal(fg_advise_huge(b, MIB), 0);
	assert_int_equal(fg_advise_huge(b, 0), 0);
	assert_int_equal(fg_advise_huge(NULL, 8 * MIB), 0);
	free(b);
}

static void calloc_huge_is_zeroed_and_advised(void **state)
{
	(void)state;
	size_t n = 3 * MIB, size = 3; /* 9 MiB: at least three whole pages inside */
	unsigned char *p = fg_calloc_huge(n, size);
	assert_non_null(p);
	for (size_t i = 0; i < n * size; i += 4093)
		assert_int_equal(p[i], 0);
	assert_int_equal(p[n * size - 1], 0);
	uintptr_t inside = ((uintptr_t)p + FG_HUGE_PAGE - 1) & ~(uintptr_t)(FG_HUGE_PAGE - 1);
	if (have_thp()) {
		assert_true(advised_at(inside));
		assert_true(advised_at(inside + 2 * FG_HUGE_PAGE - 1));
	}
	memset(p, 0xa5, n * size); /* all of it is the caller's */
	free(p);
	/* and memory nobody advised does not read as advised (a mapping of
	 * its own: malloc may hand back heap that the block above advised) */
	void *plain = mmap(NULL, 9 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(plain != MAP_FAILED);
	assert_false(advised_at((uintptr_t)plain + 4 * MIB));
	uintptr_t first = ((uintptr_t)plain + FG_HUGE_PAGE - 1) / FG_HUGE_PAGE;
	uintptr_t last = ((uintptr_t)plain + 9 * MIB) / FG_HUGE_PAGE;
	assert_int_equal(fg_advise_huge(plain, 9 * MIB), have_thp() ? (last - first) * FG_HUGE_PAGE : 0);
	if (have_thp())
		assert_true(advised_at((uintptr_t)plain + 4 * MIB));
	munmap(plain, 9 * MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(advises_whole_pages_inside),
		cmocka_unit_test(leaves_small_blocks_alone),
		cmocka_unit_test(calloc_huge_is_zeroed_and_advised),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
