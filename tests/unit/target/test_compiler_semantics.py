"""Semantics of individual constructs, each in a tiny v1model program."""

from __future__ import annotations

import logging

import pytest

from icefabric.target.compiler import PipelineEnv, compile_source
from icefabric.target.runtime import ManualClock

TEMPLATE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; }
header u1_t { bit<8> x; }
header u2_t { bit<16> y; }
header_union u_t { u1_t one; u2_t two; }
struct hs { h_t h; h_t h2; u_t u; }
struct m_t { bit<8> x; bit<32> y; }
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
control D(packet_out p, in hs hdr) {
    apply { p.emit(hdr.h); p.emit(hdr.h2); p.emit(hdr.u); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def run(body: str, data: bytes = bytes([1, 2, 0, 3]), *, decls: str = "", locals_: str = "",
        env: PipelineEnv | None = None) -> tuple[bytes | None, object]:  # fmt: skip
    src = TEMPLATE.replace("DECLS", decls).replace("LOCALS", locals_).replace("BODY", body)
    pipeline = compile_source(src, filename="sem.p4").instantiate(env)
    res = pipeline.ingress(data, 0)
    if res.drop:
        return None, res
    return pipeline.egress(res.ctx, egress_port=res.egress_spec).data, res


def test_set_valid_zeroes_an_invalid_header_and_keeps_a_valid_one() -> None:
    out, _ = run("hdr.h2.a = 9; hdr.h2.setValid(); hdr.h.b = 7; hdr.h.setValid();")
    assert out == bytes([1, 7, 0, 3]) + bytes(4)


def test_header_union_member_validity() -> None:
    out, _ = run("hdr.u.one.setValid(); hdr.u.one.x = 5; hdr.u.two.setValid(); hdr.u.two.y = 6;")
    assert out == bytes([1, 2, 0, 3, 0, 6])
    out, _ = run("if (!hdr.u.isValid()) { hdr.u.one.setValid(); hdr.u.one.x = 0xAB; }")
    assert out == bytes([1, 2, 0, 3, 0xAB])


def test_header_assignment_and_equality() -> None:
    out, _ = run("hdr.h2 = hdr.h; if (hdr.h2 == hdr.h) { hdr.h2.a = 0x55; }")
    assert out == bytes([1, 2, 0, 3, 0x55, 2, 0, 3])


def test_struct_initializer_makes_header_valid() -> None:
    out, _ = run("hdr.h2 = { a = 1, b = 2, c = 0x0304 };")
    assert out == bytes([1, 2, 0, 3, 1, 2, 3, 4])


def test_functions_with_out_parameters() -> None:
    decls = """
    bit<8> add_sat(in bit<8> x, in bit<8> y, out bool clipped) {
        clipped = (x |+| y) != (x + y);
        return x |+| y;
    }"""
    out, _ = run("bool c; hdr.h.a = add_sat(hdr.h.b, 0xFF, c); hdr.h.b = c ? 8w1 : 8w0;",
                 decls=decls)  # fmt: skip
    assert out == bytes([0xFF, 1, 0, 3])


def test_sub_control_and_exit() -> None:
    decls = """
    control Sub(inout hs hdr, in bit<8> v) {
        apply {
            hdr.h.a = v;
            if (v == 9) { exit; }
        }
    }"""
    out, _ = run("sub.apply(hdr, hdr.h.b + 7); hdr.h.c = 0xFFFF;", bytes([1, 2, 0, 3]),
                 decls=decls, locals_="Sub() sub;")  # fmt: skip
    assert out == bytes([9, 2, 0, 3])  # exit ends the whole ingress control
    out, _ = run("sub.apply(hdr, hdr.h.b + 7); hdr.h.c = 0xFFFF;", bytes([1, 3, 0, 3]),
                 decls=decls, locals_="Sub() sub;")  # fmt: skip
    assert out == bytes([10, 3, 0xFF, 0xFF])


def test_switch_on_value_with_fallthrough_and_default() -> None:
    body = """switch (hdr.h.a) {
        1:
        2: { hdr.h.b = 0x12; }
        default: { hdr.h.b = 0xDD; }
    }"""
    assert run(body, bytes([2, 0, 0, 0]))[0] == bytes([2, 0x12, 0, 0])
    assert run(body, bytes([1, 0, 0, 0]))[0] == bytes([1, 0x12, 0, 0])
    assert run(body, bytes([7, 0, 0, 0]))[0] == bytes([7, 0xDD, 0, 0])


def test_serializable_enum_and_error_values() -> None:
    decls = "enum bit<8> Kind { A = 3, B = 0x10 }"
    out, _ = run("Kind k = (Kind)hdr.h.a; if (k == Kind.B) { hdr.h.b = (bit<8>)Kind.A; }",
                 bytes([0x10, 0, 0, 0]), decls=decls)  # fmt: skip
    assert out == bytes([0x10, 3, 0, 0])


def test_exit_and_return_in_actions() -> None:
    locals_ = """
    action a1() { hdr.h.a = 1; return; }
    action a2() { hdr.h.b = 2; exit; }"""
    out, _ = run("a1(); a2(); hdr.h.c = 0xEEEE;", locals_=locals_)
    assert out == bytes([1, 2, 0, 3])


def test_log_msg_assert_and_truncate() -> None:
    messages: list[str] = []
    env = PipelineEnv(clock=ManualClock(), log=logging.getLogger("t"), log_msg=messages.append)
    out, _ = run('log_msg("a={} b={}", {hdr.h.a, hdr.h.b}); truncate(2);', env=env)
    assert messages == ["a=1 b=2"]
    assert out == bytes([1, 2])
    out, res = run("assert(hdr.h.a == 0);", env=env)
    assert out is None and res.drop  # type: ignore[attr-defined]


def test_random_is_in_range_and_seeded() -> None:
    env = PipelineEnv(clock=ManualClock(), seed=3)
    values = set()
    for _ in range(30):
        out, _ = run("random(hdr.h.a, 8w10, 8w12);", env=env)
        assert out is not None
        values.add(out[0])
    assert values <= {10, 11, 12}


def test_timestamps_come_from_the_clock() -> None:
    clock = ManualClock(123_456)
    out, _ = run("hdr.h.c = (bit<16>)sm.ingress_global_timestamp;", env=PipelineEnv(clock=clock))
    assert out == bytes([1, 2]) + (123_456 & 0xFFFF).to_bytes(2, "big")


def test_short_packet_reaches_ingress_with_parser_error() -> None:
    body = "hdr.h2.setValid(); hdr.h2.a = sm.parser_error == error.PacketTooShort ? 8w1 : 8w0;"
    out, res = run(body, b"\x01\x02")
    assert res.parser_error == 1  # type: ignore[attr-defined]
    assert out == bytes([1, 0, 0, 0]) + b"\x01\x02"


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("(bit<8>)(8w0xF0 >> 4)", 0x0F),
        ("(bit<8>)((int<8>)8w0xF0 >> 2)", 0xFC),
        ("8w1 << 8", 0),
        ("(bit<8>)(4w0xF ++ 4w0x1)", 0xF1),
        ("(bit<8>)((bit<1>)true)", 1),
        ("(bit<8>)(16w0x1234[11:4])", 0x23),
        ("8w200 |+| 8w100", 255),
        ("(bit<8>)(-8s128 |-| 8s1)", 0x80),
        ("(bit<8>)(-8s3)", 0xFD),
        ("(bit<8>)((int<8>)-1)", 0xFF),
        ("(bit<8>)(~8w0 / 16)", 15),
        ("(bit<8>)(255 + 1)", 0),
        ("8w7 & 3 | 8", 11),
        ("(8w5 > 3 && !(8w5 == 4)) ? 8w1 : 8w2", 1),
    ],
)
def test_constant_and_runtime_expressions(expr: str, value: int) -> None:
    out, _ = run(f"hdr.h.a = {expr}; hdr.h.b = hdr.h.a + 0;")
    assert out is not None and out[0] == value


def test_mutable_initial_entries() -> None:
    locals_ = """
    action set_b(bit<8> v) { hdr.h.b = v; }
    table t {
        key = { hdr.h.a: exact; }
        actions = { set_b; NoAction; }
        entries = { 1 : set_b(0x11); 2 : set_b(0x22); }
        default_action = NoAction();
    }"""
    src = TEMPLATE.replace("DECLS", "").replace("LOCALS", locals_).replace("BODY", "t.apply();")
    prog = compile_source(src, filename="init.p4")
    (tinfo,) = prog.p4info.tables
    assert tinfo.has_initial_entries and not tinfo.is_const_table
    pipeline = prog.instantiate()
    table = pipeline.tables["I.t"]
    assert len(table.entries()) == 2
    res = pipeline.ingress(bytes([2, 0, 0, 0]), 0)
    assert pipeline.egress(res.ctx, egress_port=1).data == bytes([2, 0x22, 0, 0])
    table.clear()  # mutable: the control plane may remove them
    res = pipeline.ingress(bytes([2, 0, 0, 0]), 0)
    assert pipeline.egress(res.ctx, egress_port=1).data == bytes([2, 0, 0, 0])


def test_digest_fields_are_sampled_at_the_end_of_ingress_last_call_wins() -> None:
    decls = "struct d_t { bit<8> a; bit<8> x; }\nstruct e_t { bit<8> b; }"
    body = "d_t d; d.a = hdr.h.a; d.x = 1; e_t e; e.b = 9; digest<e_t>(1, e); digest<d_t>(1, d);"
    _, res = run(body + " d.x = 2;", decls=decls)
    assert res.digests == [("d_t", (1, 2))]  # type: ignore[attr-defined]


def test_deprecated_resubmit_with_data_preserves_those_fields() -> None:
    src = (
        TEMPLATE.replace("DECLS", "")
        .replace("LOCALS", "")
        .replace("BODY", "m.x = 5; m.y = 6; resubmit({ m.x });")
    )
    pipeline = compile_source(src, filename="legacy.p4").instantiate()
    res = pipeline.ingress(bytes([1, 2, 0, 3]), 0)
    assert res.resubmit is not None
    assert res.preserved(res.resubmit) == {"x": 5}


def test_egress_packet_length_follows_headers_added_in_ingress() -> None:
    src = (
        TEMPLATE.replace("DECLS", "")
        .replace("LOCALS", "")
        .replace(
            "BODY",
            "hdr.h2.setValid(); hdr.h2.setValid(); hdr.u.one.setValid(); hdr.h.setInvalid();",
        )
    )
    src = src.replace(
        "control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }",
        "control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {\n"
        "    apply { hdr.h2.c = (bit<16>)sm.packet_length; }\n}",
    )
    pipeline = compile_source(src, filename="plen.p4").instantiate()
    res = pipeline.ingress(bytes([1, 2, 0, 3]) + bytes(10), 0)
    assert res.ctx.field("standard_metadata.packet_length") == 14  # unchanged in ingress
    out = pipeline.egress(res.ctx, egress_port=1).data
    # 14 bytes + h2 (4) + u.one (1) - h (4) = 15
    assert out == bytes([0, 0, 0, 15, 0]) + bytes(10)


def test_sub_parser_runs_on_the_same_cursor() -> None:
    decls = """
    parser SubP(packet_in p, out h_t second, inout m_t m) {
        state start {
            p.extract(second);
            m.x = second.a;
            transition select(second.a) { 0xFF: reject; default: accept; }
        }
    }"""
    src = (
        TEMPLATE.replace("DECLS", decls)
        .replace("LOCALS", "")
        .replace("BODY", "hdr.h.b = m.x; if (sm.parser_error != error.NoError) { hdr.h.a = 0xEE; }")
        .replace(
            "    state start { p.extract(hdr.h); transition accept; }",
            "    SubP() sub;\n    state start { p.extract(hdr.h); sub.apply(p, hdr.h2, m); transition accept; }",
        )
    )
    pipeline = compile_source(src, filename="subp.p4").instantiate()
    data = bytes([1, 2, 0, 3, 7, 8, 0, 9, 0xAA])
    res = pipeline.ingress(data, 0)
    assert pipeline.egress(res.ctx, egress_port=1).data == bytes([1, 7, 0, 3, 7, 8, 0, 9, 0xAA])
    res = pipeline.ingress(bytes([1, 2, 0, 3, 0xFF, 8, 0, 9]), 0)
    assert res.parser_error == 0  # reject without an error code
    assert pipeline.egress(res.ctx, egress_port=1).data == bytes([1, 0xFF, 0, 3, 0xFF, 8, 0, 9])


def test_hash_base_and_max() -> None:
    from icefabric.target.runtime.hashes import compute_hash

    h = compute_hash("crc16", [(1, 8), (2, 8)])
    body = (
        "hash(hdr.h.c, HashAlgorithm.crc16, 16w100, { hdr.h.a, hdr.h.b }, 32w7);"
        "bit<32> mx = (bit<32>)hdr.h.a - 1;"
        "hash(m.y, HashAlgorithm.crc16, 32w0, { hdr.h.a, hdr.h.b }, mx);"
        "hdr.h.b = (bit<8>)m.y;"
    )
    out, _ = run(body)
    assert out is not None
    assert int.from_bytes(out[2:4], "big") == 100 + h % 7
    assert out[1] == 0  # max evaluated to 0 at run time: BMv2 takes it as 1, giving the base
