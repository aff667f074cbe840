/* fg-gate-bench.c — ns/packet of the XDP `gate` program against a bare
 * `return XDP_DROP` program, side by side in one run via BPF_PROG_TEST_RUN,
 * as medians of several runs of ≥1e6 repeats; the ratio printed is the
 * median of the runs' gate/bare ratios (each pair timed back to back).
 *
 * Cases: an established-flow ACK (never judged: the common packet), an
 * allowed SYN (judged, passed), a delayed SYN (judged, dropped) from a
 * learned source and from a CIDR-only source, the same two with the
 * attribution cache turned off (node.attr_gen = 0: every SYN pays what the
 * first SYN of a source pays), and again with the source index off too
 * ("maps": every SYN does the map lookups, as when fairgated's index is
 * not current), a shed SYN (judged, rewritten into an RST, XDP_TX), and a
 * shed SYN of a flood that has spent its tenant's RST budget (judged,
 * dropped). The source index is on (its rebuilder thread running, as in
 * fairgated) in every case not marked "maps". Each case times gate and
 * the bare program alternately in the same run. Then what a rebuild of the
 * source index costs fairgated's rebuilder thread, with these maps and at
 * the maps' limits. FG_GATE_BENCH_ONLY=text runs only the cases whose name
 * contains it (=rebuild: only the rebuild timing).
 *
 * Shed rewrites its packet, and the kernel never restores packet data
 * between repeats, so from the second repeat on gate would be timing an
 * RST. Two ways around it, both printed:
 *  - "restored": a helper program puts the SYN back (bpf_xdp_adjust_tail,
 *    bpf_xdp_store_bytes) and tail-calls gate; the same helper tail-calling
 *    the bare program is timed alternately, and the difference — gate's own
 *    cost, helper and tail call cancelled — is added to the bare program's
 *    directly timed cost. The delayed SYN is timed this way too: the gap
 *    to its direct timing is the harness's own bias, and the last line
 *    prints the shed case with that bias taken off.
 *  - "1/run": one packet per BPF_PROG_TEST_RUN (the kernel's own duration,
 *    median of many), next to bare programs timed the same way. Each run
 *    copies the packet afresh and reads a clock twice, so both sides cost
 *    far more and the ratio overstates.
 *
 * "spoofed src" is a SYN flood with forged addresses: the restoring helper
 * writes a pseudo-random new source from the tenant's /12 into every
 * packet, so each SYN is a source gate has never seen: the source index's
 * learned-table fingerprints miss and its CIDR probes answer (with "maps":
 * the learned hash probe and the LPM walk on cold lines).
 *
 * The maps hold a realistic load: 256 tenants with two CIDRs each and 16K
 * learned sources, the judged source among the learned ones.
 *
 *   fg-gate-bench [--repeat N] [--runs R] [--json]
 *   fg-gate-bench --flood IFINDEX --src ADDR [--seconds S]   (SYN generator)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lib/event_loop.h"
#include "maps/kernel_maps.h"
#include "maps/src_index.h"
#include "gate.skel.h"

#define TENANTS 256
#define RST_LEN (14 + 20 + 20) /* what gate makes of make_frame()'s SYN */
#define LEARNED 16384
#define SPOOF_BASE 0x64400000u /* 100.64.0.0/12, tenant 9's */

struct frame {
	uint8_t b[128];
	size_t len;
};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

static uint16_t csum(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* IPv4 TCP from 10.(t>>8).(t&255).HOST to 10.255.0.1:8000 with a SYN's
 * usual 20 bytes of options, or an ACK with 64 bytes of payload. Host 7 is
 * a learned source, any other host only matches the tenant's CIDR. */
static void make_frame(struct frame *f, uint32_t tenant, int syn, uint8_t host)
{
	uint8_t *b = f->b;
	size_t tcp_len = syn ? 40 : 20 + 64;

	memset(f, 0, sizeof(*f));
	memcpy(b, "\x02\0\0\0\0\x01\x02\0\0\0\0\x02", 12);
	put16(b + 12, ETH_P_IP);
	b[14] = 0x45;
	put16(b + 16, (uint16_t)(20 + tcp_len));
	put16(b + 20, 0x4000);
	b[22] = 64;
	b[23] = 6;
	b[26] = 10; b[27] = (uint8_t)(tenant >> 8); b[28] = (uint8_t)tenant; b[29] = host;
	b[30] = 10; b[31] = 255; b[32] = 0; b[33] = 1;
	put16(b + 24, csum(b + 14, 20, 0));
	put16(b + 34, 40000);
	put16(b + 36, 8000);
	b[38] = 0x12; b[41] = 0x34;
	b[46] = (uint8_t)((tcp_len == 40 ? 10 : 5) << 4);
	b[47] = syn ? 0x02 : 0x10;
	put16(b + 48, 64240);
	f->len = 34 + tcp_len;
}

static int bare_prog(int action)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = action },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_XDP); /* as gate's */

	return bpf_prog_load(BPF_PROG_TYPE_XDP, action == XDP_DROP ? "bare_drop" : "bare_tx",
			     "GPL", insns, 2, &o);
}

/* ns per packet of one BPF_PROG_TEST_RUN of `repeat` packets. */
static double run_once(int prog_fd, const struct frame *f, unsigned repeat, int live_ifindex,
		       int *retval)
{
	struct xdp_md ctx = { .data_end = (uint32_t)f->len, .ingress_ifindex = (uint32_t)live_ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f->b, .data_size_in = (uint32_t)f->len,
		    .repeat = repeat);
	struct timespec t0, t1;
	int rc;

	if (live_ifindex) {
		o.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
		o.ctx_in = &ctx;
		o.ctx_size_in = sizeof(ctx);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	rc = bpf_prog_test_run_opts(prog_fd, &o);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	if (rc) {
		fprintf(stderr, "fg-gate-bench: BPF_PROG_TEST_RUN: %s\n", strerror(-rc));
		exit(1);
	}
	if (retval)
		*retval = (int)o.retval;
	/* The calling thread's CPU time, not o.duration: that is whole
	 * nanoseconds per packet (too coarse next to a ~5 ns baseline) and
	 * absent in live mode; wall time would count other tasks on this
	 * shared machine. The test run executes in our thread, so its CPU
	 * time is the programs' plus one syscall spread over ≥1e6 packets. */
	return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / repeat;
}

/* The source index on (its rebuilder running, as in fairgated, and the
 * first build published) or off (gate asks the maps). */
static int use_index(struct fg_maps *m, int on)
{
	char err[128];

	if (!on) {
		fg_src_index_stop(m);
		fg_src_index_invalidate(m);
		return 0;
	}
	if (fg_src_index_start(m, err, sizeof(err))) {
		fprintf(stderr, "fg-gate-bench: %s\n", err);
		return -1;
	}
	struct fg_src_index_stats st;

	for (int i = 0; i < 2000; i++) {
		fg_src_index_get_stats(m, &st);
		if (st.valid)
			return 0;
		usleep(1000);
	}
	fprintf(stderr, "fg-gate-bench: the source index was not built within 2 s (%llu built, "
		"%llu failed, %llu redone)\n", st.rebuilds, st.failed, st.discarded);
	return -1;
}

static double median(double *v, int n);

#define HOUR_NS (3600ull * 1000000000ull)

/* ---- the restore harness (see the top comment) ---- */

#define INSN(c, d, sr, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (sr), .off = (o), .imm = (i) })
#define MOV_REG(d, sr) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, sr, 0, 0)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define CALL(fn) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, fn)
#define JNE_IMM(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JEQ_IMM(d, i, o) INSN(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define LD_MAP_FD(d, fd) INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd) /* + a zero insn */

struct restorer {
	int prog_fd, frame_fd, tail_fd;
};

/* A program that sets the packet back to f's length, copies f over it and
 * tail-calls target. It first cuts the packet to rst_len (what gate leaves
 * of a shed SYN) and then grows it, so that it does the same work behind
 * gate and behind the bare program whatever they left. With spoof_base
 * (host order), every run gets a new IPv4 source: spoof_base plus 20
 * pseudo-random bits (a 32-bit LCG kept in the frame map's spare bytes),
 * like a SYN flood with forged addresses from one /12. */
static int restorer_open(struct restorer *r, const struct frame *f, int rst_len, int target_fd,
			 uint32_t spoof_base)
{
	uint32_t zero = 0;
	int len = (int)f->len, n = 0, fail[8], nfail = 0;
	struct bpf_insn insns[64];

	if (len + 4 > (int)sizeof(f->b))
		return -1;
	r->frame_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fgb_frame", 4, sizeof(f->b), 1, NULL);
	r->tail_fd = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "fgb_tail", 4, 4, 1, NULL);
	if (r->frame_fd < 0 || r->tail_fd < 0 ||
	    bpf_map_update_elem(r->frame_fd, &zero, f->b, BPF_ANY) ||
	    bpf_map_update_elem(r->tail_fd, &zero, &target_fd, BPF_ANY))
		return -1;
	/* Failures jump to the last two instructions (XDP_ABORTED); their
	 * offsets are filled in once the length is known. */
#define EMIT(i) do { insns[n++] = (i); } while (0)
#define EMIT_FAIL(i) do { fail[nfail++] = n; EMIT(i); } while (0)
#define EMIT_LD_MAP(d, fd) do { EMIT(LD_MAP_FD(d, fd)); EMIT(INSN(0, 0, 0, 0, 0)); } while (0)
	EMIT(MOV_REG(BPF_REG_6, BPF_REG_1));
	EMIT(CALL(BPF_FUNC_xdp_get_buff_len));
	EMIT(MOV_IMM(BPF_REG_2, rst_len));
	EMIT(INSN(BPF_ALU64 | BPF_SUB | BPF_X, BPF_REG_2, BPF_REG_0, 0, 0));
	EMIT(MOV_REG(BPF_REG_1, BPF_REG_6));
	EMIT(CALL(BPF_FUNC_xdp_adjust_tail));      /* to rst_len */
	EMIT_FAIL(JNE_IMM(BPF_REG_0, 0, 0));
	EMIT(MOV_REG(BPF_REG_1, BPF_REG_6));
	EMIT(MOV_IMM(BPF_REG_2, len - rst_len));
	EMIT(CALL(BPF_FUNC_xdp_adjust_tail));      /* back to len */
	EMIT_FAIL(JNE_IMM(BPF_REG_0, 0, 0));
	EMIT(INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 0));
	EMIT_LD_MAP(BPF_REG_1, r->frame_fd);
	EMIT(MOV_REG(BPF_REG_2, BPF_REG_10));
	EMIT(INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4));
	EMIT(CALL(BPF_FUNC_map_lookup_elem));
	EMIT_FAIL(JEQ_IMM(BPF_REG_0, 0, 0));
	EMIT(MOV_REG(BPF_REG_7, BPF_REG_0));
	EMIT(MOV_REG(BPF_REG_1, BPF_REG_6));
	EMIT(MOV_IMM(BPF_REG_2, 0));
	EMIT(MOV_REG(BPF_REG_3, BPF_REG_0));
	EMIT(MOV_IMM(BPF_REG_4, len));
	EMIT(CALL(BPF_FUNC_xdp_store_bytes));
	EMIT_FAIL(JNE_IMM(BPF_REG_0, 0, 0));
	if (spoof_base) {
		short state = (short)(sizeof(f->b) - 4);

		EMIT(INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_1, BPF_REG_7, state, 0));
		EMIT(INSN(BPF_ALU | BPF_MUL | BPF_K, BPF_REG_1, 0, 0, 1103515245));
		EMIT(INSN(BPF_ALU | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, 12345));
		EMIT(INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_7, BPF_REG_1, state, 0));
		EMIT(INSN(BPF_ALU | BPF_RSH | BPF_K, BPF_REG_1, 0, 0, 12));
		EMIT(INSN(BPF_ALU | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, (int)spoof_base));
		EMIT(INSN(BPF_ALU | BPF_END | BPF_TO_BE, BPF_REG_1, 0, 0, 32));
		EMIT(INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_6, 0, 0));   /* data */
		EMIT(INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_6, 4, 0));   /* data_end */
		EMIT(MOV_REG(BPF_REG_4, BPF_REG_2));
		EMIT(INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_4, 0, 0, 34));
		EMIT_FAIL(INSN(BPF_JMP | BPF_JGT | BPF_X, BPF_REG_4, BPF_REG_3, 0, 0));
		EMIT(INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 26, 0)); /* saddr */
	}
	EMIT(MOV_REG(BPF_REG_1, BPF_REG_6));
	EMIT_LD_MAP(BPF_REG_2, r->tail_fd);
	EMIT(MOV_IMM(BPF_REG_3, 0));
	EMIT(CALL(BPF_FUNC_tail_call));
	EMIT(MOV_IMM(BPF_REG_0, XDP_ABORTED));
	EMIT(INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
#undef EMIT
#undef EMIT_FAIL
#undef EMIT_LD_MAP
	for (int i = 0; i < nfail; i++)
		insns[fail[i]].off = (short)(n - 2 - fail[i] - 1);
	char log[4096] = "";
	/* A prog array only takes programs of its first owner's kind, and
	 * libbpf loads gate with expected_attach_type BPF_XDP. */
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log),
		    .expected_attach_type = BPF_XDP);

	r->prog_fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "fgb_restore", "GPL", insns, (size_t)n, &o);
	if (r->prog_fd < 0)
		fprintf(stderr, "fg-gate-bench: restore program: %s\n%s", strerror(errno), log);
	return r->prog_fd < 0 ? -1 : 0;
}

static void restorer_close(struct restorer *r)
{
	close(r->prog_fd);
	close(r->frame_fd);
	close(r->tail_fd);
}

/* Median of `n` single-packet runs as the kernel timed them (ns). */
static double run_single(int prog_fd, const struct frame *f, int n)
{
	double *v = calloc((size_t)n, sizeof(*v)), m;

	for (int i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f->b, .data_size_in = (uint32_t)f->len,
			    .repeat = 1);
		if (bpf_prog_test_run_opts(prog_fd, &o)) {
			fprintf(stderr, "fg-gate-bench: BPF_PROG_TEST_RUN failed\n");
			exit(1);
		}
		v[i] = (double)o.duration;
	}
	m = median(v, n);
	free(v);
	return m;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* What fairgated's rebuilder spends every FG_IDX_REBUILD_MS: a rebuild
 * of the source index (read both maps, fill a half, publish), median of
 * 7, with the maps as filled above and then at their limits (64K learned
 * addresses, 16K CIDRs, the latter written straight into the trie). */
static int rebuild_cost(struct fg_maps *m)
{
	struct fg_src_index_stats st;
	double ms[7];

	fg_src_index_stop(m);
	for (int full = 0; full < 2; full++) {
		if (full) {
			for (uint32_t i = LEARNED; i < FG_MAP_MAX_LEARNED; i++) {
				struct fg_src_key k = { 0 };

				k.addr[0] = 0x20; k.addr[1] = 0x01; k.addr[2] = 0x0d; k.addr[3] = 0xb8;
				k.addr[8] = (uint8_t)(i >> 8); k.addr[9] = (uint8_t)i; k.addr[15] = 1;
				if (fg_maps_learn_source(m, &k, i % TENANTS, 1) < 0)
					return -1;
			}
			for (uint32_t i = 0; i < FG_MAP_MAX_STATIC - 2 * TENANTS - 1; i++) {
				struct fg_lpm_key k = { .prefixlen = 96 + 28 };
				struct fg_src_static v = { .tenant_id = i % TENANTS };

				k.addr[10] = k.addr[11] = 0xff;
				k.addr[12] = 198; k.addr[13] = (uint8_t)(i >> 12);
				k.addr[14] = (uint8_t)(i >> 4); k.addr[15] = (uint8_t)(i << 4);
				if (bpf_map_update_elem(m->src_tenant_fd, &k, &v, BPF_ANY))
					return -1;
			}
		}
		for (int r = 0; r < 7; r++) {
			uint64_t t0 = fg_now_ns();

			if (fg_src_index_rebuild(m))
				return -1;
			ms[r] = (double)(fg_now_ns() - t0) / 1e6;
		}
		fg_src_index_get_stats(m, &st);
		printf("%ssource index rebuild (%u learned, %u CIDRs): %.2f ms (median of 7), "
		       "every %d ms in fairgated's rebuilder thread\n", full ? "" : "\n", st.learned,
		       st.statics, median(ms, 7), FG_IDX_REBUILD_MS);
	}
	return 0;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct result {
	const char *name;
	const char *verdict;
	double gate_ns, base_ns, ratio;
	const char *baseline;
};

static void add_cidr(struct fg_tenant *t, uint8_t a, uint8_t b, uint8_t c, int len)
{
	struct fg_cidr *cidr = &t->sources[t->n_sources++];

	cidr->family = AF_INET;
	cidr->prefixlen = (uint8_t)len;
	cidr->addr[0] = a; cidr->addr[1] = b; cidr->addr[2] = c;
}

static int fill_maps(struct gate_bpf *skel, struct fg_maps *m)
{
	struct fg_policy *p = calloc(1, sizeof(*p));
	char err[256];

	if (!p)
		return -1;
	fg_policy_defaults(p);
	p->n_tiers = 1;
	snprintf(p->tiers[0].name, FG_NAME_MAX, "standard");
	p->tiers[0].weight = 1;
	if (fg_policy_alloc_tenants(p, TENANTS)) {
		free(p);
		return -1;
	}
	p->n_tenants = TENANTS;
	for (uint32_t i = 0; i < TENANTS; i++) {
		snprintf(p->tenants[i].name, FG_NAME_MAX, "tenant-%03u", i);
		p->tenants[i].id = i;
		p->tenants[i].units_per_s = 1000;
		add_cidr(&p->tenants[i], 10, (uint8_t)(i >> 8), (uint8_t)i, 24);
		add_cidr(&p->tenants[i], 172, (uint8_t)(16 + (i >> 8)), (uint8_t)i, 24);
	}
	add_cidr(&p->tenants[9], 100, 64, 0, 12); /* the spoofed flood's range */
	p->agent.n_protected_ports = 1;
	p->agent.protected_ports[0] = 8000;
	p->agent.deny_allowance_per_s = 0; /* measure the verdicts, not the allowance */
	p->agent.shed_rst_per_s = 0;       /* every shed SYN gets its RST, except in
					    * the case that spends the budget */
	if (fg_maps_from_object(m, skel->obj, err, sizeof(err)) ||
	    fg_maps_apply_policy(m, p, err, sizeof(err))) {
		fprintf(stderr, "fg-gate-bench: %s\n", err);
		fg_policy_free(p);
		return -1;
	}
	fg_policy_free(p);
	for (uint32_t i = 0; i < LEARNED; i++) {
		struct fg_src_key k = { 0 };

		k.addr[10] = k.addr[11] = 0xff;
		k.addr[12] = 10; k.addr[13] = (uint8_t)(i >> 8); k.addr[14] = (uint8_t)i; k.addr[15] = 7;
		if (fg_maps_learn_source(m, &k, i % TENANTS, 1) < 0)
			return -1;
	}
	/* Sample no shed events: the ring would fill, and output failing is
	 * cheaper than succeeding, which would flatter the numbers. */
	m->node->shed_sample_mask = 0xffffffff;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: fg-gate-bench [--repeat N] [--runs R] [--json]\n"
			"       fg-gate-bench --flood IFINDEX --src A.B.C.D [--seconds S]\n");
	exit(2);
}

/* A SYN flood out of a (veth) interface: an XDP_TX program in live-frames
 * mode transmits the same SYN from `src` to port 8000 as fast as this CPU
 * can, like xdp-trafficgen. Prints the packets sent per second. The frames
 * come from a page pool that recycles them without rewriting their data,
 * and on a veth the receiver's XDP works on those very pages: a gate that
 * rewrites a SYN into an RST in place would otherwise send that RST, not a
 * SYN, every time the page came round again. So the program is the restore
 * harness (the SYN copied back in) tail-calling a bare XDP_TX. */
static int flood(int ifindex, const char *src, double seconds)
{
	struct frame f;
	struct in_addr a;
	struct timespec t0, t;
	struct restorer r;
	double elapsed = 0;
	unsigned long long sent = 0;
	int tx_fd = bare_prog(XDP_TX);

	if (tx_fd < 0 || inet_pton(AF_INET, src, &a) != 1) {
		fprintf(stderr, "fg-gate-bench: flood setup failed\n");
		return 1;
	}
	make_frame(&f, 0, 1, 0);
	memcpy(f.b + 26, &a, 4);
	f.b[24] = f.b[25] = 0;
	put16(f.b + 24, csum(f.b + 14, 20, 0));
	if (restorer_open(&r, &f, RST_LEN, tx_fd, 0))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (elapsed < seconds) {
		run_once(r.prog_fd, &f, 100000, ifindex, NULL);
		sent += 100000;
		clock_gettime(CLOCK_MONOTONIC, &t);
		elapsed = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
	}
	printf("flood: %llu SYNs in %.2f s = %.0f packets/s\n", sent, elapsed, (double)sent / elapsed);
	restorer_close(&r);
	close(tx_fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_map *map;
	unsigned repeat = 1000000;
	int runs = 7, json = 0, flood_if = 0;
	const char *flood_src = NULL;
	double seconds = 3;
	struct gate_bpf *skel;
	struct fg_maps m;
	struct frame ack, syn_ok, syn_delay, syn_cidr, syn_shed;
	struct result res[16];
	int nres = 0, gate_fd, drop_fd, tx_fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--flood") && i + 1 < argc)
			flood_if = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--src") && i + 1 < argc)
			flood_src = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else
			usage();
	}
	if (repeat < 1000 || runs < 1 || runs > 99)
		usage();
	if (flood_if)
		return flood_src && seconds > 0 ? flood(flood_if, flood_src, seconds) : 2;

	/* Stay on one CPU: a migration halfway through a run would time two
	 * different caches. */
	{
		cpu_set_t one;
		int cpu = sched_getcpu();

		CPU_ZERO(&one);
		CPU_SET(cpu < 0 ? 0 : cpu, &one);
		sched_setaffinity(0, sizeof(one), &one);
	}
	skel = gate_bpf__open();
	if (!skel)
		return 1;
	bpf_object__for_each_map(map, skel->obj)
		bpf_map__set_pin_path(map, NULL);
	if (gate_bpf__load(skel)) {
		fprintf(stderr, "fg-gate-bench: loading gate failed (needs root)\n");
		return 1;
	}
	if (fill_maps(skel, &m))
		return 1;
	gate_fd = bpf_program__fd(skel->progs.fg_gate);
	drop_fd = bare_prog(XDP_DROP);
	tx_fd = bare_prog(XDP_TX);
	if (drop_fd < 0 || tx_fd < 0) {
		fprintf(stderr, "fg-gate-bench: loading the bare programs failed\n");
		return 1;
	}

	/* tenant 7 allowed, 9 delayed, 11 shed. */
	make_frame(&ack, 9, 0, 7);
	make_frame(&syn_ok, 7, 1, 7);
	make_frame(&syn_delay, 9, 1, 7);
	make_frame(&syn_cidr, 9, 1, 99);
	make_frame(&syn_shed, 11, 1, 7);
	fg_maps_set_deny(&m, 9, fg_now_ns() + HOUR_NS, FG_VERDICT_DELAY, 1);
	fg_maps_set_deny(&m, 11, fg_now_ns() + HOUR_NS, FG_VERDICT_SHED, 1);

	enum mode { DIRECT, RESTORED, SINGLE };
	struct {
		const char *name, *verdict;
		const struct frame *f;
		int want, tenant;
		enum mode mode;
		int uncached, no_index;
		uint32_t spoof_base;
		int rst_budget_spent;
	} cases[] = {
		{ "ack (established flow)", "pass", &ack, XDP_PASS, 9, DIRECT, 0, 0, 0, 0 },
		{ "syn, tenant allowed", "pass", &syn_ok, XDP_PASS, 7, DIRECT, 0, 0, 0, 0 },
		{ "syn, tenant delayed", "drop", &syn_delay, XDP_DROP, 9, DIRECT, 0, 0, 0, 0 },
		{ "syn, delayed, CIDR only", "drop", &syn_cidr, XDP_DROP, 9, DIRECT, 0, 0, 0, 0 },
		{ "syn, delayed, uncached", "drop", &syn_delay, XDP_DROP, 9, DIRECT, 1, 0, 0, 0 },
		{ "syn, delayed, CIDR, uncached", "drop", &syn_cidr, XDP_DROP, 9, DIRECT, 1, 0, 0, 0 },
		{ "syn, delayed, uncached, maps", "drop", &syn_delay, XDP_DROP, 9, DIRECT, 1, 1, 0, 0 },
		{ "syn, delayed, CIDR, uncached, maps", "drop", &syn_cidr, XDP_DROP, 9, DIRECT, 1, 1, 0, 0 },
		{ "syn, tenant delayed", "drop", &syn_delay, XDP_DROP, 9, RESTORED, 0, 0, 0, 0 },
		{ "syn, tenant shed", "tx rst", &syn_shed, XDP_TX, 11, RESTORED, 0, 0, 0, 0 },
		{ "syn, shed past RST budget", "drop", &syn_shed, XDP_DROP, 11, DIRECT, 0, 0, 0, 1 },
		{ "syn, delayed, spoofed src", "drop", &syn_delay, XDP_DROP, 9, RESTORED, 0, 0, SPOOF_BASE, 0 },
		{ "syn, delayed, spoofed src, maps", "drop", &syn_delay, XDP_DROP, 9, RESTORED, 0, 1, SPOOF_BASE, 0 },
		{ "syn, tenant delayed (1/run)", "drop", &syn_delay, XDP_DROP, 9, SINGLE, 0, 0, 0, 0 },
		{ "syn, tenant shed (1/run)", "tx rst", &syn_shed, XDP_TX, 11, SINGLE, 0, 0, 0, 0 },
	};
	uint32_t attr_gen = m.node->attr_gen;
	const char *only = getenv("FG_GATE_BENCH_ONLY");

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double g[99], d[99], t[99], gd[99], gt[99];
		int rv = -1, single = cases[c].mode == SINGLE;
		int n_single = (int)(repeat / 20 < 20000 ? 20000 : repeat / 20);
		struct fg_tenant_counters before, after;
		struct restorer via_gate, via_bare;
		uint64_t want_judged = 0, judged;

		if (only && !strstr(cases[c].name, only))
			continue;
		__atomic_store_n(&m.node->attr_gen, cases[c].uncached ? 0 : attr_gen, __ATOMIC_RELEASE);
		if (use_index(&m, !cases[c].no_index))
			return 1;
		/* A budget of one RST an hour, spent an hour ahead: a flood
		 * that has used up its RSTs long ago. */
		m.node->rst_interval_ns = cases[c].rst_budget_spent ? HOUR_NS : 0;
		m.node->rst_burst = cases[c].rst_budget_spent ? 1 : 0;
		if (cases[c].rst_budget_spent)
			m.tenants[cases[c].tenant].rst_tat_ns = fg_now_ns() + HOUR_NS;
		run_once(gate_fd, cases[c].f, 1, 0, &rv);
		if (rv != cases[c].want) {
			fprintf(stderr, "fg-gate-bench: %s: gate returned %d, want %d\n", cases[c].name,
				rv, cases[c].want);
			return 1;
		}
		if (cases[c].mode == RESTORED &&
		    (restorer_open(&via_gate, cases[c].f, RST_LEN, gate_fd, cases[c].spoof_base) ||
		     restorer_open(&via_bare, cases[c].f, RST_LEN,
				   cases[c].want == XDP_TX ? tx_fd : drop_fd, cases[c].spoof_base)))
			return 1;
		fg_maps_tenant_counters(&m, (uint32_t)cases[c].tenant, &before);
		for (int r = 0; r < runs; r++) {
			if (single) {
				g[r] = run_single(gate_fd, cases[c].f, n_single / runs);
				d[r] = run_single(drop_fd, cases[c].f, n_single / runs);
				t[r] = run_single(tx_fd, cases[c].f, n_single / runs);
				want_judged += (uint64_t)(n_single / runs);
			} else if (cases[c].mode == RESTORED) {
				int rg = -1, rb = -1;
				double tg = run_once(via_gate.prog_fd, cases[c].f, repeat, 0, &rg);
				double tb = run_once(via_bare.prog_fd, cases[c].f, repeat, 0, &rb);

				if (rg != cases[c].want || rb != cases[c].want) {
					fprintf(stderr, "fg-gate-bench: %s: restored runs returned %d/%d\n",
						cases[c].name, rg, rb);
					return 1;
				}
				d[r] = run_once(drop_fd, cases[c].f, repeat, 0, NULL);
				g[r] = d[r] + tg - tb;
				want_judged += repeat;
			} else {
				g[r] = run_once(gate_fd, cases[c].f, repeat, 0, NULL);
				d[r] = run_once(drop_fd, cases[c].f, repeat, 0, NULL);
			}
		}
		if (cases[c].mode == RESTORED) {
			restorer_close(&via_gate);
			restorer_close(&via_bare);
		}
		/* Proof the judged path ran every time it was meant to. */
		fg_maps_tenant_counters(&m, (uint32_t)cases[c].tenant, &after);
		judged = after.syn_shed + after.syn_delayed + after.shed_dropped - before.syn_shed -
			 before.syn_delayed - before.shed_dropped;
		if (judged < want_judged) {
			fprintf(stderr, "fg-gate-bench: %s judged %llu SYNs, want %llu\n", cases[c].name,
				(unsigned long long)judged, (unsigned long long)want_judged);
			return 1;
		}
		/* The ratio is the median of each run's gate/bare pair, timed
		 * back to back: a burst of noise from other tasks hits both. */
		for (int r = 0; r < runs; r++) {
			gd[r] = g[r] / d[r];
			gt[r] = g[r] / t[r];
		}
		double gm = median(g, runs), dm = median(d, runs);
		res[nres++] = (struct result){ cases[c].name, cases[c].verdict, gm, dm, median(gd, runs),
					       single ? "bare XDP_DROP, 1/run" :
					       cases[c].mode == RESTORED ? "bare XDP_DROP (restored)" :
									   "bare XDP_DROP" };
		if (single && cases[c].want == XDP_TX) {
			double tm = median(t, runs);
			res[nres++] = (struct result){ cases[c].name, cases[c].verdict, gm, tm, median(gt, runs),
						       "bare XDP_TX, 1/run" };
		}
	}
	__atomic_store_n(&m.node->attr_gen, attr_gen, __ATOMIC_RELEASE);

	/* The restore harness's own bias, measured on the delay case (timed
	 * both ways in this run), taken off the shed case: the best estimate
	 * of what a shed SYN costs on its own. */
	{
		const struct result *dd = NULL, *dr = NULL, *sr = NULL;

		for (int i = 0; i < nres; i++) {
			if (!strcmp(res[i].name, "syn, tenant delayed"))
				*(strcmp(res[i].baseline, "bare XDP_DROP") ? &dr : &dd) = &res[i];
			else if (!strcmp(res[i].name, "syn, tenant shed"))
				sr = &res[i];
		}
		if (dd && dr && sr) {
			/* In units of the bare program, the way every case is
			 * compared: robust to the floor moving between cases. */
			double ratio = sr->ratio - (dr->ratio - dd->ratio);

			res[nres++] = (struct result){ "syn, shed, less harness bias", "tx rst",
						       ratio * sr->base_ns, sr->base_ns, ratio,
						       "bare XDP_DROP (restored)" };
		}
	}

	if (json) {
		printf("{\"repeat\": %u, \"runs\": %d, \"cases\": [", repeat, runs);
		for (int i = 0; i < nres; i++)
			printf("%s{\"case\": \"%s\", \"gate_ns\": %.2f, \"baseline\": \"%s\", "
			       "\"baseline_ns\": %.2f, \"ratio\": %.2f}", i ? ", " : "", res[i].name,
			       res[i].gate_ns, res[i].baseline, res[i].base_ns, res[i].ratio);
		printf("]}\n");
	} else {
		printf("gate vs bare XDP programs, BPF_PROG_TEST_RUN, median of %d runs x %u packets "
		       "(ratio: median of the runs' ratios)\n", runs, repeat);
		printf("%-35s %-7s %10s   %-28s %10s %7s\n", "case", "verdict", "gate ns/pkt",
		       "baseline", "ns/pkt", "ratio");
		for (int i = 0; i < nres; i++)
			printf("%-35s %-7s %10.2f   %-28s %10.2f %6.2fx\n", res[i].name, res[i].verdict,
			       res[i].gate_ns, res[i].baseline, res[i].base_ns, res[i].ratio);
	}
	if (!json && (!only || !strcmp(only, "rebuild")) && rebuild_cost(&m))
		return 1;
	fg_maps_close(&m);
	close(drop_fd);
	close(tx_fd);
	gate_bpf__destroy(skel);
	return 0;
}
