/* percpu_zero.h — zero one element of a per-CPU map from a test.
 *
 * The kernel copies a per-CPU value for every possible CPU, each rounded up
 * to 8 bytes, so the buffer is that size, and bpf_map__update_elem checks
 * it against the map (a buffer of the wrong size is -EINVAL, never read
 * past its end, as a bare bpf_map_update_elem would). */
#ifndef FAIRGATE_TEST_PERCPU_ZERO_H
#define FAIRGATE_TEST_PERCPU_ZERO_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

static inline int fg_test_zero_percpu(const struct bpf_map *map, uint32_t key)
{
	int ncpus = libbpf_num_possible_cpus();
	size_t size, stride = ((size_t)bpf_map__value_size(map) + 7) & ~(size_t)7;
	void *zero;
	int rc;

	if (ncpus <= 0)
		return -EINVAL;
	size = stride * (size_t)ncpus;
	zero = calloc(1, size);
	if (!zero)
		return -ENOMEM;
	rc = bpf_map__update_elem(map, &key, sizeof(key), zero, size, BPF_ANY);
	free(zero);
	return rc;
}

#endif
