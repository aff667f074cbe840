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
	double cur[FG_MAX_TENANTS];
	double cur_node;
	double peak[FG_MAX_TENANTS];  /* units/s */
	double peak_node;             /* units/s */
	uint32_t n_tenants;
	uint32_t windows_closed;
};

void fg_peak_init(struct fg_peak_meter *m, uint32_t n_tenants, uint64_t window_ns, uint64_t now_ns);
void fg_peak_add(struct fg_peak_meter *m, uint32_t tenant, double units, uint64_t now_ns);
/* Close windows that have ended by now_ns (call on a timer too). */
void fg_peak_tick(struct fg_peak_meter *m, uint64_t now_ns);
/* Sum of tenant peaks / node peak; 0 before the first non-empty window. */
double fg_peak_oversubscription(const struct fg_peak_meter *m);
double fg_peak_sum_tenants(const struct fg_peak_meter *m);

#endif
