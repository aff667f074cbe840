/* test_secrets_and_limits.c — the two small readers the hardening limits
 * rest on: a credential file's first line (lib/secret_file.c: what goes
 * into an Authorization header must be one visible-ASCII token) and the
 * memory cgroup's limit (lib/cgroup_memory.c: v2 and v1 layouts, "max",
 * v1's "unlimited", a container that sees the host's path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>
#include <unistd.h>

#include "lib/cgroup_memory.h"
#include "lib/secret_file.h"

static char dir[64];

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fg-unit-secrets.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	char cmd[96];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static const char *put(const char *rel, const char *text)
{
	static char path[256];
	char cmd[512];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname %s)\"", path);
	assert_int_equal(system(cmd), 0);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void secret_first_line(void **state)
{
	char out[FG_SECRET_LINE_MAX + 1], err[256];
	(void)state;

	assert_int_equal(fg_secret_line_read(put("k1", "sk-abc\n"), "key", out, sizeof(out), err, sizeof(err)), 6);
	assert_string_equal(out, "sk-abc");
	/* CRLF and trailing blanks go; what follows the first line is ignored */
	assert_int_equal(fg_secret_line_read(put("k2", "sk-x \t\r\nsecond"), "key", out, sizeof(out), err, sizeof(err)), 4);
	assert_string_equal(out, "sk-x");
	/* no line end at all */
	assert_int_equal(fg_secret_line_read(put("k3", "tok"), "key", out, sizeof(out), err, sizeof(err)), 3);
}

static void secret_refusals(void **state)
{
	char out[FG_SECRET_LINE_MAX + 1], err[256], big[FG_SECRET_LINE_MAX + 8];
	(void)state;

	assert_int_equal(fg_secret_line_read(put("e1", "\nsk"), "key", out, sizeof(out), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "empty"));
	assert_int_equal(fg_secret_line_read(put("e2", "two words\n"), "key", out, sizeof(out), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "visible ASCII"));
	assert_int_equal(fg_secret_line_read(put("e3", "a\x01" "b"), "key", out, sizeof(out), err, sizeof(err)), -1);
	memset(big, 'k', FG_SECRET_LINE_MAX + 1);
	big[FG_SECRET_LINE_MAX + 1] = 0;
	assert_int_equal(fg_secret_line_read(put("e4", big), "key", out, sizeof(out), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer"));
	big[FG_SECRET_LINE_MAX] = 0; /* exactly the longest */
	assert_int_equal(fg_secret_line_read(put("e5", big), "key", out, sizeof(out), err, sizeof(err)),
			 FG_SECRET_LINE_MAX);
	assert_int_equal(fg_secret_line_read("/nonexistent/key", "key", out, sizeof(out), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file"));
	assert_int_equal(fg_secret_line_read(dir, "key", out, sizeof(out), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
}

static void cgroup_limits(void **state)
{
	(void)state;

	char root[128];

	put("v2/kubepods/pod1/memory.max", "1073741824\n");
	put("v2/memory.max", "max\n");
	snprintf(root, sizeof(root), "%s/v2", dir);
	assert_int_equal(fg_cgroup_memory_limit(root, "0::/kubepods/pod1\n"), 1073741824ull);
	put("v2/free/memory.max", "max\n");
	assert_int_equal(fg_cgroup_memory_limit(root, "0::/free\n"), 0);
	/* the host's path in a container that has its own cgroup at the root */
	put("v2c/memory.max", "268435456\n");
	snprintf(root, sizeof(root), "%s/v2c", dir);
	assert_int_equal(fg_cgroup_memory_limit(root, "0::/docker/abc\n"), 268435456ull);
	/* v1: the memory controller's line, among others, maybe co-mounted */
	put("v1/memory/job/memory.limit_in_bytes", "536870912\n");
	snprintf(root, sizeof(root), "%s/v1", dir);
	assert_int_equal(fg_cgroup_memory_limit(root, "9:name=systemd:/\n4:cpu,memory:/job\n2:pids:/job\n"),
			 536870912ull);
	put("v1/memory/open/memory.limit_in_bytes", "9223372036854771712\n");
	assert_int_equal(fg_cgroup_memory_limit(root, "4:memory:/open\n"), 0);
	assert_int_equal(fg_cgroup_memory_limit(root, ""), 0);
	assert_int_equal(fg_cgroup_memory_limit(root, "garbage"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(secret_first_line),
		cmocka_unit_test(secret_refusals),
		cmocka_unit_test(cgroup_limits),
	};
	return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
