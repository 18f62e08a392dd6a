"""Constructs p4c 1.2.4.8 accepts that the embedded target used to refuse, each run on packets.

Programs written for this suite from the P4_16 1.2.x spec; expected bytes worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.target.compiler import compile_source, load_program
from icefabric.target.p4.errors import P4CompileError
from icefabric.target.runtime.model import ActionCall, Match, TableEntry

PROGRAM = """#include <core.p4>
#include <v1model.p4>
typedef bit<8> byte_t;
header h_t { byte_t a; bit<8> b; bit<8> c; bit<8> d; }
header e_t { bit<16> x; }
header_union u_t { h_t h; e_t e; }
struct hs { h_t h; h_t h2; u_t[2] us; }
struct m_t { bit<8> x; bit<8> y; }
DECLS
parser P(packet_in p, out hs hdr, inout m_t m, inout standard_metadata_t sm) {
    PARSER
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
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.h2); p.emit(hdr.us); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
EXTRACT_H = "state start { p.extract(hdr.h); transition accept; }"
DATA = bytes([1, 2, 3, 4, 5, 6, 7, 8])


def src(*, decls: str = "", parser: str = EXTRACT_H, locals_: str = "", body: str = "") -> str:
    return (
        PROGRAM.replace("DECLS", decls)
        .replace("PARSER", parser)
        .replace("LOCALS", locals_)
        .replace("BODY", body)
    )


def run(data: bytes = DATA, **parts: str) -> bytes:
    pipeline = compile_source(src(**parts), filename="accept.p4").instantiate()
    res = pipeline.ingress(data, 0)
    out: bytes = pipeline.egress(res.ctx, egress_port=1).data
    return out


def test_function_returning_a_header_and_a_struct() -> None:
    decls = """
    h_t filled(in bit<8> v) { h_t r = { v, v, v, v }; return r; }
    m_t pair(in bit<8> v) { return { v, v + 1 }; }"""
    out = run(decls=decls, body="hdr.h2 = filled(9); m_t q = pair(hdr.h.a); hdr.h.d = q.y;")
    assert out == bytes([1, 2, 3, 2, 9, 9, 9, 9, 5, 6, 7, 8])
    # each call's result is its own: comparing two results of the same function
    out = run(decls=decls, body="if (pair(1) != pair(2)) { hdr.h.c = 0xCC; }")
    assert out == bytes([1, 2, 0xCC, 4, 5, 6, 7, 8])


def test_lookahead_of_a_struct_and_of_bits() -> None:
    decls = "struct peek_t { bit<4> hi; bit<4> lo; bit<8> next; }"
    parser = """state start {
        peek_t v = p.lookahead<peek_t>();
        bit<16> w = p.lookahead<bit<16>>();
        p.extract(hdr.h);
        hdr.h.c = (bit<8>)v.lo;
        hdr.h.d = v.next ^ w[7:0];
        transition accept;
    }"""
    out = run(bytes([0x1F, 2, 3, 4]), decls=decls, parser=parser)
    assert out == bytes([0x1F, 2, 0x0F, 0])


def test_names_declared_in_a_state_are_visible_in_its_select() -> None:
    parser = """state start {
        bit<8> first = p.lookahead<bit<8>>();
        transition select(first) { 1: take; default: accept; }
    }
    state take { p.extract(hdr.h); hdr.h.d = 0x33; transition accept; }"""
    assert run(parser=parser)[:4] == bytes([1, 2, 3, 0x33])
    assert run(bytes([7, 2, 3, 4]), parser=parser) == bytes([7, 2, 3, 4])


def test_parser_local_variables_with_initialisers_are_set_per_packet() -> None:
    parser = """bit<8> seen = 0x10;
    state start { p.extract(hdr.h); seen = seen + hdr.h.a; hdr.h.d = seen; transition accept; }"""
    pipeline = compile_source(src(parser=parser), filename="pl.p4").instantiate()
    for _ in range(2):  # the initialiser runs again for the second packet
        res = pipeline.ingress(DATA, 0)
        assert pipeline.egress(res.ctx, egress_port=1).data[:4] == bytes([1, 2, 3, 0x11])


def test_control_applied_from_a_parser_state() -> None:
    decls = "control Stamp(inout h_t h, in bit<8> v) { apply { h.d = v; } }"
    parser = "Stamp() stamp; state start { p.extract(hdr.h); stamp.apply(hdr.h, 0x44); transition accept; }"
    assert run(decls=decls, parser=parser)[:4] == bytes([1, 2, 3, 0x44])


def test_extract_into_union_members_of_a_header_stack() -> None:
    parser = """state start {
        p.extract(hdr.us.next.e);
        p.extract(hdr.us.next.h);
        hdr.h2.setValid();
        hdr.h2.a = (bit<8>)hdr.us.lastIndex + 1;
        transition accept;
    }"""
    # us[0].e = 0x0102, us[1].h = 3..6, then payload 7, 8
    assert run(parser=parser) == bytes([2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    parser = (
        "state start { p.extract(hdr.h); p.extract(hdr.us[hdr.h.a - 1].e); transition accept; }"
    )
    assert run(parser=parser) == DATA


def test_error_typed_table_key() -> None:
    locals_ = """
    action note(bit<8> v) { hdr.h.b = v; }
    table by_error {
        key = { sm.parser_error: exact; }
        actions = { note; NoAction; }
        default_action = NoAction();
    }"""
    body = "hdr.h.setValid(); by_error.apply();"
    prog = compile_source(src(locals_=locals_, body=body), filename="ek.p4")
    (key,) = [mf for t in prog.p4info.tables for mf in t.match_fields]
    assert key.bitwidth == 0  # as p4c: an error key is shown as a string-like field
    pipeline = prog.instantiate()
    table = pipeline.tables["I.by_error"]
    # the key is the error's code: core.p4's errors in order, NoError 0, PacketTooShort 1
    for code, value in ((0, 0x11), (1, 0x22)):
        table.insert(TableEntry(match=(Match.exact(code),), action=ActionCall("I.note", (value,))))
    res = pipeline.ingress(DATA, 0)
    assert pipeline.egress(res.ctx, egress_port=1).data[:4] == bytes([1, 0x11, 3, 4])
    res = pipeline.ingress(bytes([1, 2]), 0)
    assert pipeline.egress(res.ctx, egress_port=1).data == bytes([0, 0x22, 0, 0, 1, 2])


def test_constants_of_struct_type_casts_and_concatenation_fold() -> None:
    decls = """
    const m_t PAIR = { x = (bit<8>)4w1, y = 16w0x0102[7:0] };
    const bit<24> WIDE = 7w5 ++ 17w0;
    enum bit<24> Kind { A = (bit<24>)7w5 }"""
    body = """
    hdr.h.a = PAIR.x; hdr.h.b = PAIR.y; hdr.h.c = (bit<8>)(WIDE >> 16);
    m_t s = (m_t){ 7, 8 };
    hdr.h.d = s.y + (bit<8>)(bit<24>)Kind.A;"""
    assert run(decls=decls, body=body)[:4] == bytes([1, 2, 10, 13])


def test_header_fields_of_typedef_and_new_types() -> None:
    decls = """
    typedef bit<4> nibble_t; typedef nibble_t half_t; type bit<8> tag_t;
    header n_t { half_t hi; nibble_t lo; tag_t tag; }"""
    body = "n_t n; n.setValid(); n.hi = 1; n.lo = 2; n.tag = (tag_t)3; hdr.h.d = n.hi ++ n.lo;"
    assert run(decls=decls, body=body)[:4] == bytes([1, 2, 3, 0x12])


def test_quoted_include_of_the_architecture_finds_the_targets_copy(tmp_path: Path) -> None:
    text = (
        src(body="hdr.h.d = 0x66;")
        .replace("<core.p4>", '"core.p4"')
        .replace("<v1model.p4>", '"v1model.p4"')
    )
    path = tmp_path / "quoted.p4"
    path.write_text(text)
    pipeline = load_program(path).instantiate()
    res = pipeline.ingress(DATA, 0)
    assert pipeline.egress(res.ctx, egress_port=1).data[:4] == bytes([1, 2, 3, 0x66])


def test_nested_switch_on_action_run() -> None:
    locals_ = """
    action one() { hdr.h.b = 1; }
    action two() { hdr.h.b = 2; }
    table outer { key = { hdr.h.a: exact; } actions = { one; two; } default_action = one(); }
    table inner { key = { hdr.h.a: exact; } actions = { one; two; } default_action = two(); }"""
    body = """
    switch (outer.apply().action_run) {
        one: {
            switch (inner.apply().action_run) {
                one: { hdr.h.c = 0x11; }
                two: { hdr.h.c = 0x22; }
            }
        }
        default: { hdr.h.c = 0x33; }
    }"""
    assert run(locals_=locals_, body=body)[:4] == bytes([1, 2, 0x22, 4])


def test_invalid_header_literal() -> None:
    body = (
        "hdr.h2 = hdr.h; hdr.h2 = (h_t){#}; hdr.h = (h_t){#};"
        " hdr.us[0].e.setValid(); hdr.us[0] = (u_t){#};"
    )
    assert run(body=body) == DATA[4:]


def test_digest_of_a_list_with_its_struct_type() -> None:
    decls = "struct learn_t { bit<8> a; bit<9> port; }"
    body = "digest<learn_t>(1, { hdr.h.a, sm.ingress_port }); hdr.h.a = 0x55;"
    prog = compile_source(src(decls=decls, body=body), filename="dg.p4")
    (digest,) = prog.p4info.digests
    assert digest.preamble.name == "learn_t"
    res = prog.instantiate().ingress(DATA, 3)
    assert res.digests == [("learn_t", (1, 3))]  # the values at the call


def test_constructor_parameters_of_controls_and_parsers() -> None:
    decls = """
    control Put(inout h_t h)(bit<8> value, bool twice) {
        apply { h.d = value; if (twice) { h.d = h.d + value; } }
    }
    parser Skip(packet_in p, out h_t h)(bit<8> mark) {
        state start { p.extract(h); h.c = mark; transition accept; }
    }"""
    locals_ = "Put(8w3, true) put3; Put(twice = false, value = 8w9) put9;"
    body = "put3.apply(hdr.h); hdr.h2 = hdr.h; put9.apply(hdr.h2);"
    parser = "Skip(0x5C) skip; state start { skip.apply(p, hdr.h); transition accept; }"
    out = run(decls=decls, locals_=locals_, body=body, parser=parser)
    assert out == bytes([1, 2, 0x5C, 6, 1, 2, 0x5C, 9, 5, 6, 7, 8])
    # the top-level blocks of V1Switch may take constructor arguments too
    text = src(body="hdr.h.d = k;").replace(
        "control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {",
        "control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm)(bit<8> k) {",
    )
    text = text.replace("V1Switch(P(), VC(), I(),", "V1Switch(P(), VC(), I(0x4B),")
    pipeline = compile_source(text, filename="ctor.p4").instantiate()
    res = pipeline.ingress(DATA, 0)
    assert pipeline.egress(res.ctx, egress_port=1).data[:4] == bytes([1, 2, 3, 0x4B])


def test_header_fields_of_struct_type_are_laid_out_in_place() -> None:
    decls = """
    struct nib_pair_t { bit<4> hi; bit<4> lo; }
    struct inner_t { nib_pair_t first; bit<8> second; }
    header s_t { inner_t in1; bit<16> rest; }"""
    body = """
    hdr.s.in1.first.lo = hdr.s.in1.first.hi;
    hdr.s.rest = (bit<16>)hdr.s.minSizeInBytes();
    hdr.h.d = hdr.s.in1.second;"""
    text = (
        src(body=body)
        .replace("struct hs { h_t h;", decls + "\nstruct hs { s_t s; h_t h;")
        .replace(
            "state start { p.extract(hdr.h);", "state start { p.extract(hdr.s); p.extract(hdr.h);"
        )
        .replace("apply { p.emit(hdr.h);", "apply { p.emit(hdr.s); p.emit(hdr.h);")
    )
    pipeline = compile_source(text, filename="nested.p4").instantiate()
    res = pipeline.ingress(bytes([0xAB, 0x77, 0, 0]) + DATA, 0)
    out = pipeline.egress(res.ctx, egress_port=1).data
    assert out == bytes([0xAA, 0x77, 0, 4, 1, 2, 3, 0x77]) + DATA[4:]


def test_generic_functions_are_compiled_per_type() -> None:
    decls = """
    void swap<T>(inout T a, inout T b) { T t = a; a = b; b = t; }
    T pick<T>(in bool first, in T a, in T b) { return first ? a : b; }"""
    body = """
    swap(hdr.h.a, hdr.h.b);
    hdr.h2.setValid();
    swap(hdr.h, hdr.h2);
    bit<16> w = pick<bit<16>>(false, 1, 0x0304);
    hdr.h2.c = w[7:0] + pick(true, hdr.h2.c, 8w0);"""
    assert run(decls=decls, body=body) == bytes([0, 0, 0, 0, 2, 1, 7, 4, 5, 6, 7, 8])


def test_a_control_instance_applied_to_different_arguments() -> None:
    decls = "control Bump(inout h_t h, in bit<8> by) { apply { h.d = h.d + by; } }"
    body = "hdr.h2 = hdr.h; bump.apply(hdr.h, 1); bump.apply(hdr.h2, 2); bump.apply(hdr.h, 4);"
    assert run(decls=decls, locals_="Bump() bump;", body=body)[:8] == bytes(
        [1, 2, 3, 9, 1, 2, 3, 6]
    )
    # with a table inside, p4c would make two copies of it: refused with a clear error
    decls = """control Look(inout h_t h) {
        table t { key = { h.a: exact; } actions = { NoAction; } }
        apply { t.apply(); }
    }"""
    with pytest.raises(P4CompileError, match="same arguments"):
        run(decls=decls, locals_="Look() look;", body="look.apply(hdr.h); look.apply(hdr.h2);")


def test_control_applied_to_a_dynamically_indexed_stack_element() -> None:
    decls = "control Mark(inout h_t h, in bit<8> v) { apply { h.d = v; } }"
    text = (
        src(locals_="Mark() mark;", body="bit<8> i = hdr.h.a; mark.apply(hdr.st[i], 0x77);")
        .replace("struct hs { h_t h;", decls + "\nstruct hs { h_t[2] st; h_t h;")
        .replace("apply { p.emit(hdr.h);", "apply { p.emit(hdr.st); p.emit(hdr.h);")
        .replace(
            "state start { p.extract(hdr.h);",
            "state start { p.extract(hdr.st[0]); p.extract(hdr.st[1]); p.extract(hdr.h);",
        )
    )
    pipeline = compile_source(text, filename="dynarg.p4").instantiate()
    data = bytes([9, 9, 9, 9, 8, 8, 8, 8, 1, 0, 0, 0])
    res = pipeline.ingress(data, 0)
    out = pipeline.egress(res.ctx, egress_port=1).data
    assert out == bytes([9, 9, 9, 9, 8, 8, 8, 0x77, 1, 0, 0, 0])
