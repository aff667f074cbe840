/* peak_meter.c — windowed peaks and the oversubscription ratio. */
#include <string.h>
#include "peak_meter.h"

void fg_peak_init(struct fg_peak_meter *m, uint32_t n_tenants, uint64_t window_ns, uint64_t now_ns)
{
	memset(m, 0, sizeof(*m));
	m->window_ns = window_ns ? window_ns : 60ull * 1000000000ull;
	m->window_start_ns = now_ns;
	m->n_tenants = n_tenants > FG_MAX_TENANTS ? FG_MAX_TENANTS : n_tenants;
}

static void close_window(struct fg_peak_meter *m)
{
	double secs = (double)m->window_ns / 1e9;

	for (uint32_t i = 0; i < m->n_tenants; i++) {
		double r = m->cur[i] / secs;
		if (r > m->peak[i])
			m->peak[i] = r;
		m->cur[i] = 0;
	}
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
	if (tenant >= FG_MAX_TENANTS)
		return;
	if (tenant >= m->n_tenants)
		m->n_tenants = tenant + 1;
	m->cur[tenant] += units;
	m->cur_node += units;
}

double fg_peak_sum_tenants(const struct fg_peak_meter *m)
{
	double s = 0;

	for (uint32_t i = 0; i < m->n_tenants; i++)
		s += m->peak[i];
	return s;
}

double fg_peak_oversubscription(const struct fg_peak_meter *m)
{
	return m->peak_node > 0 ? fg_peak_sum_tenants(m) / m->peak_node : 0;
}
