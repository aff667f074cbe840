/* test_quota_seqlock.c — the published quota's seqlock (maps/kernel_maps.c):
 * fairgatectl's snapshot of a tenant's quota never mixes two publishes, a
 * publish marks itself, versions only go up, and a writer that died
 * mid-publish is reported, not read as consistent. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "maps/kernel_maps.h"

#define SNAPSHOTS 200000

static struct fg_tenant_quota shared_q;
static atomic_int reader_started, reader_done;
static uint64_t publishes;

/* Field by field, through volatile, so the writer thread's stores really
 * interleave with the reader's loads. */
static void fill(volatile struct fg_tenant_quota *q, uint64_t k)
{
	q->bucket_units = (int64_t)k;
	q->rate_units_per_s = k;
	q->burst_units = k;
	q->reserved_units = k;
	q->kv_resident_tokens = k;
	q->kv_cap_tokens = k;
	q->inflight = (uint32_t)k;
	q->queued = (uint32_t)k;
	q->admitted = k;
	q->rejected = k;
}

static bool consistent(const struct fg_tenant_quota *q)
{
	uint64_t k = q->rate_units_per_s;

	return (uint64_t)q->bucket_units == k && q->burst_units == k && q->reserved_units == k &&
	       q->kv_resident_tokens == k && q->kv_cap_tokens == k && q->inflight == (uint32_t)k &&
	       q->queued == (uint32_t)k && q->admitted == k && q->rejected == k;
}

static uint64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

/* Publishes until the reader is done, starting once it is there. */
static void *writer(void *arg)
{
	(void)arg;
	while (!atomic_load(&reader_started))
		;
	for (uint64_t k = 1; !atomic_load(&reader_done); k++) {
		uint64_t prev = fg_quota_write_begin(&shared_q);

		fill(&shared_q, k);
		fg_quota_write_end(&shared_q, prev, 1000 + k);
		publishes = k;
	}
	return NULL;
}

static void snapshots_never_mix_publishes(void **state)
{
	(void)state;
	pthread_t w;
	uint64_t reads = 0, last = 0, versions = 0, deadline = now_s() + 10;

	memset(&shared_q, 0, sizeof(shared_q));
	atomic_store(&reader_started, 0);
	atomic_store(&reader_done, 0);
	assert_int_equal(pthread_create(&w, NULL, writer, NULL), 0);
	atomic_store(&reader_started, 1);
	/* SNAPSHOTS, and on until the writer has been seen to publish: an -O2
	 * reader can be through them before the writer thread gets a core */
	for (int i = 0; i < SNAPSHOTS || (versions <= 10 && now_s() < deadline); i++) {
		struct fg_tenant_quota snap;

		if (!fg_quota_snapshot(&shared_q, &snap))
			continue;
		reads++;
		if (!consistent(&snap))
			fail_msg("snapshot %llu mixes publishes: rate %llu, bucket %lld, admitted %llu",
				 (unsigned long long)reads, (unsigned long long)snap.rate_units_per_s,
				 (long long)snap.bucket_units, (unsigned long long)snap.admitted);
		assert_true(snap.updated_ns != FG_QUOTA_WRITING);
		assert_true(snap.updated_ns >= last); /* versions only go up */
		versions += snap.updated_ns > last;
		last = snap.updated_ns;
	}
	atomic_store(&reader_done, 1);
	pthread_join(w, NULL);
	/* the two really overlapped: many reads saw many publishes */
	assert_true(reads > SNAPSHOTS / 2);
	assert_true(versions > 10);
	struct fg_tenant_quota end;
	assert_true(fg_quota_snapshot(&shared_q, &end));
	assert_true(consistent(&end));
	assert_int_equal(end.rate_units_per_s, publishes);
	assert_int_equal(end.updated_ns, 1000 + publishes);
}

static void versions_strictly_increase(void **state)
{
	(void)state;
	struct fg_tenant_quota q = { 0 };

	uint64_t prev = fg_quota_write_begin(&q);
	assert_int_equal(prev, 0);
	assert_true(q.updated_ns == FG_QUOTA_WRITING);
	fg_quota_write_end(&q, prev, 500);
	assert_int_equal(q.updated_ns, 500);
	/* the clock did not move (or went back): still a new version */
	prev = fg_quota_write_begin(&q);
	fg_quota_write_end(&q, prev, 500);
	assert_int_equal(q.updated_ns, 501);
	prev = fg_quota_write_begin(&q);
	fg_quota_write_end(&q, prev, 7);
	assert_int_equal(q.updated_ns, 502);
}

static void a_dead_writer_is_reported(void **state)
{
	(void)state;
	struct fg_tenant_quota q = { 0 }, snap;

	fill(&q, 3);
	fg_quota_write_end(&q, 0, 100);
	assert_true(fg_quota_snapshot(&q, &snap));
	assert_true(consistent(&snap));
	(void)fg_quota_write_begin(&q); /* and never ends */
	assert_false(fg_quota_snapshot(&q, &snap));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(versions_strictly_increase),
		cmocka_unit_test(a_dead_writer_is_reported),
		cmocka_unit_test(snapshots_never_mix_publishes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
