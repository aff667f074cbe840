/* peak_meter.c — windowed peaks and the oversubscription ratio. */
#include <stdlib.h>
#include <string.h>
#include "peak_meter.h"

int fg_peak_init(struct fg_peak_meter *m, uint32_t n_tenants, uint64_t window_ns, uint64_t now_ns)
{
	uint32_t slots = fg_tenant_slots(n_tenants);

	memset(m, 0, sizeof(*m));
	m->window_ns = window_ns ? window_ns : 60ull * 1000000000ull;
	m->window_start_ns = now_ns;
	m->cur = calloc(slots, sizeof(*m->cur));
	m->peak = calloc(slots, sizeof(*m->peak));
	m->touched = calloc(slots, sizeof(*m->touched));
	if (!m->cur || !m->peak || !m->touched) {
		fg_peak_free(m);
		return -1;
	}
	m->slots = slots;
	m->n_tenants = n_tenants > slots ? slots : n_tenants;
	return 0;
}

void fg_peak_free(struct fg_peak_meter *m)
{
	free(m->cur);
	free(m->peak);
	free(m->touched);
	m->cur = m->peak = NULL;
	m->touched = NULL;
	m->slots = m->n_tenants = m->n_touched = 0;
}

void fg_peak_set_window(struct fg_peak_meter *m, uint64_t window_ns)
{
	if (window_ns)
		m->window_ns = window_ns;
}

static void close_window(struct fg_peak_meter *m)
{
	double secs = (double)m->window_ns / 1e9;

	/* only tenants billed in this window can have a new peak */
	for (uint32_t k = 0; k < m->n_touched; k++) {
		uint32_t i = m->touched[k];
		double r = m->cur[i] / secs;
		if (r > m->peak[i]) {
			m->sum_peaks += r - m->peak[i];
			m->peak[i] = r;
		}
		m->cur[i] = 0;
	}
	m->n_touched = 0;
	if (m->cur_node / secs > m->peak_node)
		m->peak_node = m->cur_node / secs;
	m->cur_node = 0;
	m->windows_closed++;
}

void fg_peak_tick(struct fg_peak_meter *m, uint64_t now_ns)
{
	while (now_ns >= m->window_start_ns + m->window_ns) {
		close_window(m);
		m->window_start_ns += m->window_ns;
		/* A long idle gap closes many empty windows; skip them in one go. */
		if (now_ns >= m->window_start_ns + m->window_ns)
			m->window_start_ns += (now_ns - m->window_start_ns) / m->window_ns * m->window_ns;
	}
}

void fg_peak_add(struct fg_peak_meter *m, uint32_t tenant, double units, uint64_t now_ns)
{
	fg_peak_tick(m, now_ns);
	if (tenant >= m->slots || !(units > 0))
		return;
	if (tenant >= m->n_tenants)
		m->n_tenants = tenant + 1;
	if (m->cur[tenant] == 0)
		m->touched[m->n_touched++] = tenant;
	m->cur[tenant] += units;
	m->cur_node += units;
}

double fg_peak_sum_tenants(const struct fg_peak_meter *m)
{
	return m->sum_peaks;
}

double fg_peak_oversubscription(const struct fg_peak_meter *m)
{
	return m->peak_node > 0 ? fg_peak_sum_tenants(m) / m->peak_node : 0;
}
