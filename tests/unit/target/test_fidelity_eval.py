"""P4_16 evaluation rules the embedded target must follow as BMv2 does (spec 1.2.x, 8.x).

Strict left-to-right evaluation with side effects, short-circuit and ?:, copy-in/copy-out
(also when the callee exits), and equality of headers, unions and structs including validity.
Each program is written for this test from the spec's rules, not taken from another suite."""

from __future__ import annotations

from icefabric.target.compiler import compile_source

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
header one_t { bit<8> x; }
header two_t { bit<16> y; }
header_union u_t { one_t one; two_t two; }
struct hs { h_t h; h_t h2; one_t[3] st; }
struct m_t { bit<8> x; bit<8> y; }
struct pair_t { h_t p; m_t q; }
bit<8> bump(inout bit<8> v) { v = v + 1; return v; }
bit<8> twice(in m_t s) { return s.x + s.x; }
DECLS
parser P(packet_in p, out hs hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout hs hdr, inout m_t m) { apply { } }
control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {
    LOCALS
    apply {
        sm.egress_spec = 1;
        BODY
    }
}
control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m_t m) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.h2); p.emit(hdr.st); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def run(
    body: str, *, decls: str = "", locals_: str = "", data: bytes = bytes([1, 2, 3, 4])
) -> bytes:
    src = PROGRAM.replace("DECLS", decls).replace("LOCALS", locals_).replace("BODY", body)
    pipeline = compile_source(src, filename="eval.p4").instantiate()
    res = pipeline.ingress(data, 0)
    assert not res.drop
    return pipeline.egress(res.ctx, egress_port=res.egress_spec).data


def test_left_operand_is_read_before_a_call_on_the_right_changes_it() -> None:
    # a = 1 is read, then bump makes a = 2 and yields 2: b = 1 + 2
    assert run("hdr.h.b = hdr.h.a + bump(hdr.h.a);") == bytes([2, 3, 3, 4])
    # right to left the other way: bump first (a = 2), then a is read: 2 + 2
    assert run("hdr.h.b = bump(hdr.h.a) + hdr.h.a;") == bytes([2, 4, 3, 4])
    # two calls of the same function in one expression: 2 + 3
    assert run("hdr.h.c = bump(hdr.h.a) + bump(hdr.h.a);") == bytes([3, 2, 5, 4])
    # comparison and concatenation follow the same rule
    assert run("if (hdr.h.a == bump(hdr.h.a)) { hdr.h.d = 9; }") == bytes([2, 2, 3, 4])
    assert run("bit<16> w = hdr.h.a ++ bump(hdr.h.a); hdr.h.c = w[15:8]; hdr.h.d = w[7:0];") == (
        bytes([2, 2, 1, 2])
    )


def test_copied_in_struct_arguments_of_two_calls_do_not_share_a_slot() -> None:
    body = "m_t s1 = { 1, 0 }; m_t s2 = { 5, 0 }; hdr.h.d = twice(s1) + twice(s2);"
    assert run(body) == bytes([1, 2, 3, 12])


def test_and_or_evaluate_the_right_operand_only_when_needed() -> None:
    assert run("if (hdr.h.a == 9 && bump(hdr.h.c) == 4) { hdr.h.d = 1; }") == bytes([1, 2, 3, 4])
    assert run("if (hdr.h.a == 1 && bump(hdr.h.c) == 4) { hdr.h.d = 1; }") == bytes([1, 2, 4, 1])
    assert run("if (hdr.h.a == 1 || bump(hdr.h.c) == 4) { hdr.h.d = 1; }") == bytes([1, 2, 3, 1])
    assert run("if (hdr.h.a == 2 || bump(hdr.h.c) == 4) { hdr.h.d = 1; }") == bytes([1, 2, 4, 1])
    # a constant left operand decides without ever running the right one
    assert run("bool t = false && bump(hdr.h.c) == 4; if (!t) { hdr.h.d = 7; }") == (
        bytes([1, 2, 3, 7])
    )


def test_conditional_operator_runs_only_the_chosen_branch() -> None:
    body = "hdr.h.d = hdr.h.a == 1 ? bump(hdr.h.b) : bump(hdr.h.c);"
    assert run(body) == bytes([1, 3, 3, 3])
    assert run(body, data=bytes([7, 2, 3, 4])) == bytes([7, 2, 4, 4])


def test_a_table_applied_in_a_condition_runs_only_when_reached() -> None:
    locals_ = """
    action mark() { hdr.h.c = 0xCC; }
    table t { key = { hdr.h.a: exact; } actions = { mark; } default_action = mark(); }"""
    assert run("if (hdr.h.a == 5 && t.apply().hit) { }", locals_=locals_) == bytes([1, 2, 3, 4])
    assert run("if (hdr.h.a == 1 && !t.apply().hit) { hdr.h.d = 0xDD; }", locals_=locals_) == (
        bytes([1, 2, 0xCC, 0xDD])
    )


def test_initializer_fields_are_read_in_order() -> None:
    body = "bit<8> z = hdr.h.a; m_t s = { x = z, y = bump(z) }; hdr.h.c = s.x; hdr.h.d = s.y;"
    assert run(body) == bytes([1, 2, 1, 2])
    body = "bit<8> z = hdr.h.a; m_t s = { bump(z), z }; hdr.h.c = s.x; hdr.h.d = s.y;"
    assert run(body) == bytes([1, 2, 2, 2])


def test_control_local_initializers_are_read_in_order() -> None:
    locals_ = "bit<8> z = 4; m_t s = { x = z, y = bump(z) };"
    assert run("hdr.h.c = s.x; hdr.h.d = s.y;", locals_=locals_) == bytes([1, 2, 4, 5])


def test_stack_index_of_the_target_is_read_after_the_value_as_p4c_compiles_it() -> None:
    # p4c-bm2-ss 1.2.4.8 locates `hdr.st[i]` after bump(i) ran (the spec says before): BMv2
    # writes element 1
    body = """
    hdr.st[0].setValid(); hdr.st[1].setValid(); hdr.st[2].setValid();
    bit<8> i = 0;
    hdr.st[i].x = bump(i);"""
    out = run(body)
    assert out[4:] == bytes([0, 1, 0])


def test_a_list_assignment_reads_every_element_before_storing() -> None:
    assert run("hdr.h = { hdr.h.b, hdr.h.a, hdr.h.d, hdr.h.c };") == bytes([2, 1, 4, 3])
    body = "m.x = hdr.h.a; m.y = hdr.h.b; m = { m.y, m.x }; hdr.h.c = m.x; hdr.h.d = m.y;"
    assert run(body) == bytes([1, 2, 2, 1])


def test_copy_out_happens_when_the_action_exits() -> None:
    locals_ = """
    action set_and_stop(inout bit<8> v, out bit<8> w) { v = 0x55; w = 0x66; exit; }"""
    body = "set_and_stop(hdr.h.a, hdr.h.b); hdr.h.c = 0xFF;"
    assert run(body, locals_=locals_) == bytes([0x55, 0x66, 3, 4])


def test_copy_out_goes_to_the_location_named_before_the_call() -> None:
    locals_ = "action put(out bit<8> v) { v = 9; }"
    body = """
    hdr.st[0].setValid(); hdr.st[1].setValid(); hdr.st[2].setValid();
    bit<8> i = 1;
    put(hdr.st[i].x);"""
    assert run(body, locals_=locals_)[4:] == bytes([0, 9, 0])


def test_invalid_headers_compare_equal_whatever_their_fields_hold() -> None:
    body = """
    h_t x = hdr.h; h_t y = hdr.h; y.a = 0x77;
    x.setInvalid(); y.setInvalid();
    if (x == y) { hdr.h.d = 0xE1; }
    y.setValid();
    if (x != y) { hdr.h.c = 0xE2; }"""
    assert run(body) == bytes([1, 2, 0xE2, 0xE1])


def test_valid_headers_compare_fields() -> None:
    body = (
        "h_t x = hdr.h; if (x == hdr.h) { hdr.h.d = 1; } x.b = 0; if (x != hdr.h) { hdr.h.c = 1; }"
    )
    assert run(body) == bytes([1, 2, 1, 1])


def test_structs_with_invalid_headers_compare_by_validity() -> None:
    body = """
    pair_t s; pair_t t;
    s.p = hdr.h; t.p = hdr.h; t.p.a = 0x99;
    s.q = { 1, 2 }; t.q = { 1, 2 };
    s.p.setInvalid(); t.p.setInvalid();
    if (s == t) { hdr.h.d = 0xA1; }
    t.q.y = 3;
    if (s != t) { hdr.h.c = 0xA2; }"""
    assert run(body) == bytes([1, 2, 0xA2, 0xA1])


def test_header_unions_compare_by_their_valid_member() -> None:
    body = """
    u_t u; u_t v;
    u.one.setValid(); u.one.x = 3;
    v.two.setValid(); v.two.y = 3;
    if (u != v) { hdr.h.d = 0xB1; }
    v.one.setValid(); v.one.x = 3;
    if (u == v) { hdr.h.c = 0xB2; }"""
    assert run(body) == bytes([1, 2, 0xB2, 0xB1])


def test_header_stacks_compare_element_by_element() -> None:
    body = """
    hdr.st[1].setValid(); hdr.st[1].x = 4;
    one_t[3] c = hdr.st;
    if (c == hdr.st) { hdr.h.d = 0xC1; }
    c[2].setValid();
    if (c != hdr.st) { hdr.h.c = 0xC2; }"""
    assert run(body)[:4] == bytes([1, 2, 0xC2, 0xC1])


def test_out_header_arguments_start_invalid_at_every_call() -> None:
    decls = """
    void maybe_fill(in bit<8> v, out h_t h) {
        if (v == 1) { h.setValid(); h.a = 0x11; }
    }
    control Fill(in bit<8> v, out h_t h) {
        apply { if (v == 1) { h.setValid(); h.b = 0x22; } }
    }"""
    body = """
    h_t x;
    maybe_fill(1, x);
    maybe_fill(2, x);  // x comes back invalid: the first call's header does not leak
    if (!x.isValid()) { hdr.h.d = 0xD0; }
    hdr.h2 = hdr.h;
    fill.apply(2, hdr.h2);
    if (!hdr.h2.isValid()) { hdr.h.c = 0xC0; }"""
    assert run(body, decls=decls, locals_="Fill() fill;") == bytes([1, 2, 0xC0, 0xD0])


def test_lists_and_tuples_compare_element_by_element() -> None:
    body = """
    if ({hdr.h.a, hdr.h.b} == {8w1, 8w2}) { hdr.h.d = 5; }
    tuple<bit<8>, bit<8>> t = { hdr.h.a, 7 };
    if (t != { 8w1, 8w2 }) { hdr.h.c = 6; }"""
    assert run(body) == bytes([1, 2, 6, 5])


def test_conditional_operator_on_headers_and_structs() -> None:
    body = """
    hdr.h2 = hdr.h.a == 1 ? hdr.h : hdr.h2;
    m_t p = { 1, 2 }; m_t q = { 3, 4 };
    m_t r = hdr.h.b == 9 ? p : q;
    hdr.h.d = r.y;"""
    assert run(body)[:8] == bytes([1, 2, 3, 4, 1, 2, 3, 4])
    assert run(body, data=bytes([7, 9, 3, 4])) == bytes([7, 9, 3, 2])


def test_hash_inputs_as_p4c_bm2_ss_builds_them() -> None:
    from icefabric.target.runtime.checksum import csum16_bytes
    from icefabric.target.runtime.hashes import compute_hash

    # a single field of an invalid header counts with its value (p4c copies hash fields into
    # metadata first): 0 here, as hdr.h2 was never valid
    body = """
    bit<16> h;
    hash(h, HashAlgorithm.crc16, 16w0, { hdr.h.a, hdr.h2.b, hdr.h.b }, 17w65536);
    hdr.h.c = h[15:8]; hdr.h.d = h[7:0];"""
    want = compute_hash("crc16", [(1, 8), (0, 8), (2, 8)])
    assert run(body)[2:4] == want.to_bytes(2, "big")
    # a whole invalid header in the list adds nothing (BMv2 skips invalid headers)
    body = """
    bit<16> sum;
    hdr.h2.setValid(); hdr.h2.a = 0x10;
    hdr.h2.setInvalid();
    hash(sum, HashAlgorithm.csum16, 16w0, { hdr.h.a, hdr.h.b, hdr.h2 }, 17w65536);
    hdr.h.c = sum[15:8]; hdr.h.d = sum[7:0];"""
    assert run(body)[2:4] == csum16_bytes(bytes([1, 2])).to_bytes(2, "big")


def test_switch_default_is_taken_only_when_no_label_matches() -> None:
    body = "switch (hdr.h.a) { default: { hdr.h.d = 0xDD; } 1: { hdr.h.d = 0x11; } }"
    assert run(body) == bytes([1, 2, 3, 0x11])
    assert run(body, data=bytes([5, 2, 3, 4])) == bytes([5, 2, 3, 0xDD])


def test_conditional_operator_groups_to_the_left_as_in_p4c() -> None:
    # p4c's grammar reads `a ? b : c ? d : e` as `(a ? b : c) ? d : e`
    body = "hdr.h.d = hdr.h.a == 1 ? hdr.h.b == 2 : false ? 8w7 : 8w9;"
    assert run(body) == bytes([1, 2, 3, 7])
    assert run(body, data=bytes([1, 5, 3, 4])) == bytes([1, 5, 3, 9])
    assert run(body, data=bytes([6, 2, 3, 4])) == bytes([6, 2, 3, 9])


CHECKSUM_PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
header ck_t { bit<16> sum; }
struct hs { h_t h; h_t opt; ck_t ck; }
struct m_t { bit<8> x; }
parser P(packet_in p, out hs hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); p.extract(hdr.ck); transition accept; }
}
control VC(inout hs hdr, inout m_t m) { apply { } }
control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m_t m) {
    apply { update_checksum(true, { hdr.h.a, hdr.opt.b, hdr.h.b }, hdr.ck.sum, HashAlgorithm.csum16); }
}
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.opt); p.emit(hdr.ck); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_checksum_fields_of_invalid_headers_are_left_out() -> None:
    from icefabric.target.runtime.checksum import csum16_bytes

    # p4c-bm2-ss references checksum fields directly and BMv2 skips those of invalid headers:
    # hdr.opt.b adds no bits (not 8 zero bits, which would shift hdr.h.b into the high byte)
    pipeline = compile_source(CHECKSUM_PROGRAM, filename="ck.p4").instantiate()
    res = pipeline.ingress(bytes([1, 2, 0, 0]), 0)
    out = pipeline.egress(res.ctx, egress_port=1).data
    assert out == bytes([1, 2]) + csum16_bytes(bytes([1, 2])).to_bytes(2, "big")
