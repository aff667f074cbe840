/* peak_meter.h — per-tenant and node peak units/s in fixed windows.
 *
 * The seed: quotas sold may exceed capacity because tenants do not peak
 * together, but the oversubscription ratio is measured (sum of per-tenant
 * peaks / node peak), never assumed. Units are added as they are settled;
 * each closed window updates the peaks.
 */
#ifndef FAIRGATE_PEAK_METER_H
#define FAIRGATE_PEAK_METER_H

#include <stdint.h>
#include "policy.h"

struct fg_peak_meter {
	uint64_t window_ns;       /* 60 s by default */
	uint64_t window_start_ns;
	double *cur;              /* by tenant id, `slots` of them (sized to the policy) */
	double cur_node;
	double *peak;             /* units/s */
	double peak_node;             /* units/s */
	double sum_peaks;             /* of peak[], kept as peaks rise */
	uint32_t n_tenants, slots;
	uint32_t windows_closed;
	/* tenants billed in the open window (ids, no repeats): a window closes
	 * in O(those), not O(every tenant) */
	uint32_t *touched, n_touched;
};

/* Returns -1 (holding nothing) when out of memory. */
int fg_peak_init(struct fg_peak_meter *m, uint32_t n_tenants, uint64_t window_ns, uint64_t now_ns);
void fg_peak_free(struct fg_peak_meter *m);
/* Another window length from now on (the policy's peak_window_s). */
void fg_peak_set_window(struct fg_peak_meter *m, uint64_t window_ns);
void fg_peak_add(struct fg_peak_meter *m, uint32_t tenant, double units, uint64_t now_ns);
/* Close windows that have ended by now_ns (call on a timer too). */
void fg_peak_tick(struct fg_peak_meter *m, uint64_t now_ns);
/* Sum of tenant peaks / node peak; 0 before the first non-empty window. */
double fg_peak_oversubscription(const struct fg_peak_meter *m);
double fg_peak_sum_tenants(const struct fg_peak_meter *m);

#endif
