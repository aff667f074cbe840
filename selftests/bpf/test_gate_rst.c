/* test_gate_rst.c — gate's shed answer: the RST+ACK compared byte for byte
 * with one built independently (gate_fixture.c), checksums verified as a
 * receiver checks them, for data and FIN, sequence wrap, trailing bytes
 * (zeroed as padding when few, cut when many), IPv6, VLAN tags, IP options
 * and extension headers; and the tenant's RST budget, past which shed SYNs
 * are dropped. Fixture: gate_fixture.h. */
#include "selftests/bpf/gate_fixture.h"

#include <string.h>
#include <unistd.h>

static void shed_answers_rst_ack(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .sport = 51234, .seq = 0xfffffff0,
			   .tcp_opt = 20 };

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	expect_rst(&sp);
	ASSERT_EQ(counters(ACME).syn_shed, 1);
	ASSERT_EQ(node_counters().rst_sent, 1);
	/* A SYN carrying data (TFO) and FIN: ACK covers all of it. */
	struct spec data = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 77, .tcp_opt = 12,
			     .payload = 33, .flags = SYN | FIN };
	expect_rst(&data);
	/* Sequence wrap: 0xffffffff + 1 = 0. */
	struct spec wrap = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 0xffffffff };
	expect_rst(&wrap);
	ASSERT_EQ(counters(ACME).syn_shed, 3);
}

/* Bytes behind the datagram (a short frame's Ethernet padding, or junk)
 * are never reflected: zeroed when few, cut when many. */
static void shed_trailing_bytes(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1", .seq = 5 };
	uint8_t in[2048], out[2048], want[2048];
	size_t want_len = expected_rst(want, &sp);
	uint32_t out_len = 0;

	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	for (int tcp_opt = 0; tcp_opt <= 20; tcp_opt += 20) {
		for (size_t trailing = 6; trailing <= 1000; trailing += 994) {
			sp.tcp_opt = tcp_opt;
			size_t len = build(in, &sp);
			memset(in + len, 'x', trailing);
			ASSERT_XDP(run(in, len + trailing, out, &out_len), XDP_TX);
			expect_rst_frame(out, out_len, len + trailing, want_len);
			assert_memory_equal(out, want, want_len);
		}
	}
	ASSERT_EQ(counters(ACME).syn_shed, 4);
	ASSERT_EQ(node_counters().rst_fallback_drop, 0);
}

static void shed_ipv6(void **state)
{
	(void)state;
	struct spec sp = { .v6 = 1, .src = "2001:db8:1::42", .dst = "2001:db8::1", .seq = 4242,
			   .tcp_opt = 20 };

	ASSERT_VERDICT(&sp, XDP_PASS);
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	expect_rst(&sp);
	sp.payload = 10;
	expect_rst(&sp);
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	ASSERT_VERDICT(&sp, XDP_DROP);
	struct spec beta = { .v6 = 1, .src = "2001:db8:2::7", .dst = "2001:db8::1" };
	ASSERT_VERDICT(&beta, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_shed, 2);
	ASSERT_EQ(counters(ACME).syn_delayed, 1);
	ASSERT_EQ(counters(BETA).syn_passed, 1);
}

static void shed_vlan_tagged(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	struct spec one = { .src = "10.1.2.3", .dst = "10.0.0.1", .vlans = 1, .tcp_opt = 8 };
	expect_rst(&one);
	struct spec two = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .vlans = 2 };
	expect_rst(&two);
	/* Three tags: more than we walk, not judged. */
	struct spec three = { .src = "10.1.2.3", .dst = "10.0.0.1", .vlans = 3 };
	ASSERT_VERDICT(&three, XDP_PASS);
	ASSERT_EQ(counters(ACME).syn_shed, 2);
}

static void options_shed_by_rst(void **state)
{
	(void)state;
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	/* IPv4 options / IPv6 extension headers: the RST carries none of
	 * them (an RST must not echo them), its TCP header moved up behind a
	 * plain IP header. */
	struct spec v4 = { .src = "10.1.2.3", .dst = "10.0.0.1", .ip_opt = 8, .tcp_opt = 12,
			   .seq = 99 };
	expect_rst(&v4);
	struct spec v6 = { .v6 = 1, .src = "2001:db8:1::1", .dst = "2001:db8::1", .v6_ext = 4,
			   .tcp_opt = 20, .payload = 7, .seq = 0xfffffffe };
	expect_rst(&v6);
	ASSERT_EQ(counters(ACME).syn_shed, 2);
	ASSERT_EQ(node_counters().rst_sent, 2);
	ASSERT_EQ(node_counters().rst_fallback_drop, 0);
	/* Without a window they pass like any SYN. */
	fg_maps_set_deny(&maps, ACME, 0, 0, 0);
	ASSERT_VERDICT(&v4, XDP_PASS);
	ASSERT_VERDICT(&v6, XDP_PASS);
}

static void rst_budget_drops_past_it(void **state)
{
	(void)state;
	struct spec sp = { .src = "10.1.2.3", .dst = "10.0.0.1" };
	struct spec beta = { .src = "10.2.3.4", .dst = "10.0.0.1" };
	struct fg_tenant_counters c;
	char err[256];

	/* The policy's knob reaches the node: 2 RSTs per second, burst 2. */
	pol->agent.shed_rst_per_s = 2;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	ASSERT_EQ(maps.node->rst_interval_ns, S_NS / 2);
	ASSERT_EQ(maps.node->rst_burst, 2);
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	expect_rst(&sp);
	expect_rst(&sp);
	/* Spent: dropped, and the frame is left as it came. */
	ASSERT_VERDICT(&sp, XDP_DROP);
	ASSERT_VERDICT(&sp, XDP_DROP);
	c = counters(ACME);
	ASSERT_EQ(c.syn_shed, 2);
	ASSERT_EQ(c.shed_dropped, 2);
	ASSERT_EQ(c.syn_delayed, 0);
	/* Each tenant has its own budget, overload sheds spend it too. */
	fg_maps_set_overload_rank(&maps, 0, UINT64_MAX);
	ASSERT_VERDICT(&beta, XDP_TX);
	ASSERT_VERDICT(&beta, XDP_TX);
	ASSERT_VERDICT(&beta, XDP_DROP);
	ASSERT_EQ(counters(BETA).overload_shed, 2);
	ASSERT_EQ(counters(BETA).shed_dropped, 1);
	fg_maps_set_overload_rank(&maps, -1, 0);
	/* Half a second later one RST has come back. */
	usleep(550 * 1000);
	ASSERT_VERDICT(&sp, XDP_TX);
	ASSERT_VERDICT(&sp, XDP_DROP);
	/* A delay window never spends it. */
	deny(ACME, FG_VERDICT_DELAY, 60 * S_NS);
	ASSERT_VERDICT(&sp, XDP_DROP);
	c = counters(ACME);
	ASSERT_EQ(c.syn_shed, 3);
	ASSERT_EQ(c.shed_dropped, 3);
	ASSERT_EQ(c.syn_delayed, 1);
	/* off: no budget. */
	pol->agent.shed_rst_per_s = 0;
	assert_int_equal(fg_maps_apply_policy(&maps, pol, err, sizeof(err)), 0);
	ASSERT_EQ(maps.node->rst_interval_ns, 0);
	deny(ACME, FG_VERDICT_SHED, 60 * S_NS);
	for (int i = 0; i < 5; i++)
		ASSERT_VERDICT(&sp, XDP_TX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(shed_answers_rst_ack, gate_reset),
		cmocka_unit_test_setup(shed_trailing_bytes, gate_reset),
		cmocka_unit_test_setup(shed_ipv6, gate_reset),
		cmocka_unit_test_setup(shed_vlan_tagged, gate_reset),
		cmocka_unit_test_setup(options_shed_by_rst, gate_reset),
		cmocka_unit_test_setup(rst_budget_drops_past_it, gate_reset),
	};

	return gate_fixture_main("gate rst", tests, sizeof(tests) / sizeof(tests[0]), true);
}
