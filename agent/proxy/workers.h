/* workers.h — agent.workers: the proxy's threads. Worker 0 is the main
 * thread on the agent's loop (control socket, metrics, the gateway's clock
 * and the proxy's listener); workers 1..N-1 each run a loop of their own
 * with a listener in worker 0's SO_REUSEPORT group, so the kernel spreads
 * new connections over them, and each connection stays on the loop of the
 * worker that accepted it. All loops share one lock (fg_loop_share), held
 * while any callback runs but a connection's own I/O and parsing, which its
 * worker does alone (proxy_client.c, fg_client_go_alone): the gateway, tenants, pools and the engine side are as with
 * one thread (docs/design.md, "Workers"). */
#ifndef FAIRGATE_WORKERS_H
#define FAIRGATE_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct fg_proxy;
struct fg_workers;

/* How many agent.workers asks for: itself, or for 0 the CPUs this process
 * may run on (its affinity, and its cgroup's cpu.max quota rounded up),
 * at most FG_AUTO_WORKERS_CAP. */
uint32_t fg_workers_wanted(const struct fg_agent *a);
/* N workers serving px->listen_fd (made with SO_REUSEPORT when N > 1): its
 * accept on the agent's loop, and N-1 threads. With N > 1 the calling
 * thread holds the shared lock from here until fg_workers_free, and runs
 * the agent's loop holding it. -1 with err (nothing left running). */
int fg_workers_start(struct fg_proxy *px, uint32_t n, char *err, size_t errlen);
/* Stop and join the threads and close their listeners; their loops stay
 * for the connections on them to be closed. Called holding the lock. */
void fg_workers_stop(struct fg_proxy *px);
/* The loops, once no connection is left on them; the lock released. */
void fg_workers_free(struct fg_proxy *px);

uint32_t fg_workers_count(const struct fg_workers *w);
/* Connections worker i accepted since the start. */
uint64_t fg_workers_accepted(const struct fg_workers *w, uint32_t i);
/* With more than one worker: how long worker i has held the shared lock
 * and waited for it (fg_loop_lock_times); false with one worker (no lock).
 * Read holding the lock. */
bool fg_workers_lock_times(const struct fg_workers *w, uint32_t i, uint64_t *held_ns,
			   uint64_t *wait_ns);
/* With more than one worker: the requests worker i sent to the engine
 * after its pass, for its own connections and for other workers' (whose
 * threads may have slept), and how many of the latter it handed back
 * unfinished (proxy_upstream.c, "send queues"); false with one worker. */
bool fg_workers_send_counts(const struct fg_workers *w, uint32_t i, uint64_t *own,
			    uint64_t *for_others, uint64_t *handed_back);

#endif
