"""Table entries declared in the program behave as p4c 1.2.4.8 + BMv2 make them behave.

p4c-bm2-ss gives BMv2 each entry's `@priority(N)` or else its position (1, 2, ...), and BMv2
lets the lowest value win; written from BMv2's documented priority convention (lower value,
higher priority) and the P4_16 spec's entries rules. Programs are this suite's own."""

from __future__ import annotations

import pytest

from icefabric.target.compiler import compile_source
from icefabric.target.p4.errors import P4CompileError
from icefabric.target.runtime.model import ActionCall, Match, TableEntry

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct hs { h_t h; }
struct m_t { bit<8> x; }
parser P(packet_in p, out hs hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout hs hdr, inout m_t m) { apply { } }
control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {
    action put(bit<8> v) { hdr.h.d = v; }
    action put2(bit<8> v, bit<8> w) { hdr.h.c = v; hdr.h.d = w; }
    LOCALS
    apply {
        sm.egress_spec = 1;
        BODY
    }
}
control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m_t m) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def build(locals_: str, body: str = "t.apply();"):  # type: ignore[no-untyped-def]
    src = PROGRAM.replace("LOCALS", locals_).replace("BODY", body)
    return compile_source(src, filename="tables.p4").instantiate()


def send(pipeline, data: bytes) -> bytes:  # type: ignore[no-untyped-def]
    res = pipeline.ingress(data, 0)
    out: bytes = pipeline.egress(res.ctx, egress_port=1).data
    return out


TERNARY = """
table t {
    key = { hdr.h.a: ternary; }
    actions = { put; NoAction; }
    default_action = NoAction();
    %s entries = {
%s
    }
}"""


def test_const_entries_first_listed_wins() -> None:
    ents = "0x10 &&& 0xF0 : put(1);\n0x12 &&& 0xFF : put(2);\n_ : put(3);"
    pipeline = build(TERNARY % ("const", ents))
    assert send(pipeline, bytes([0x12, 0, 0, 0])) == bytes([0x12, 0, 0, 1])
    assert send(pipeline, bytes([0x22, 0, 0, 0])) == bytes([0x22, 0, 0, 3])
    # read back over P4Runtime as BMv2 shows them: INT32_MAX - position
    prios = sorted((e.priority for e in pipeline.tables["I.t"].entries()), reverse=True)
    assert prios == [2**31 - 2, 2**31 - 3, 2**31 - 4]


def test_priority_annotation_lowest_value_wins() -> None:
    # p4c takes entry annotations after the action
    ents = "0x10 &&& 0xF0 : put(1) @priority(30);\n0x12 &&& 0xFF : put(2) @priority(20);"
    pipeline = build(TERNARY % ("const", ents))
    assert send(pipeline, bytes([0x12, 0, 0, 0])) == bytes([0x12, 0, 0, 2])
    assert send(pipeline, bytes([0x13, 0, 0, 0])) == bytes([0x13, 0, 0, 1])
    # an annotated entry competes with the positions of the others (1, 2, ...)
    ents = "0x10 &&& 0xF0 : put(1);\n0x12 &&& 0xFF : put(2) @priority(0);"
    assert send(build(TERNARY % ("const", ents)), bytes([0x12, 0, 0, 0])) == bytes([0x12, 0, 0, 2])


def test_range_entries_follow_the_same_order() -> None:
    locals_ = """
    table t {
        key = { hdr.h.a: range; hdr.h.b: exact; }
        actions = { put; }
        const entries = {
            (10 .. 20, 1) : put(1);
            (0 .. 255, 1) : put(2);
            (15 .. 15, 1) : put(3) @priority(0);
        }
    }"""
    pipeline = build(locals_)
    assert send(pipeline, bytes([12, 1, 0, 0]))[3] == 1
    assert send(pipeline, bytes([15, 1, 0, 0]))[3] == 3
    assert send(pipeline, bytes([30, 1, 0, 0]))[3] == 2


def test_priority_syntax_in_mutable_entries_is_ignored_like_p4c_bm2_ss() -> None:
    # p4c 1.2.4.8 accepts `priority =` in non-const entries but its BMv2 back end orders the
    # entries by position (or @priority) only
    ents = "priority = 1 : 0x10 &&& 0xF0 : put(1);\npriority = 9 : 0x12 &&& 0xFF : put(2);"
    pipeline = build(TERNARY % ("", ents))
    assert send(pipeline, bytes([0x12, 0, 0, 0])) == bytes([0x12, 0, 0, 1])


@pytest.mark.parametrize(
    ("kind", "ents", "message"),
    [
        ("const", "priority = 3 : 0x10 &&& 0xF0 : put(1);", "cannot have priorities"),
        ("", "0x10 &&& 0xF0 : put(1);\npriority = 3 : 0x12 &&& 0xFF : put(2);", "first entry"),
    ],
)
def test_priority_syntax_errors_as_p4c(kind: str, ents: str, message: str) -> None:
    with pytest.raises(P4CompileError, match=message):
        build(TERNARY % (kind, ents))


def test_exact_tables_reject_priorities() -> None:
    locals_ = """
    table t {
        key = { hdr.h.a: exact; }
        actions = { put; }
        entries = { priority = 2 : 1 : put(1); }
    }"""
    with pytest.raises(P4CompileError, match="do not use priorities"):
        build(locals_)


def test_actions_list_binds_directional_arguments() -> None:
    locals_ = """
    action add_to(inout bit<8> f, in bit<8> by, bit<8> extra) { f = f + by + extra; }
    action note(in bit<8> v) { hdr.h.c = v; }
    table t {
        key = { hdr.h.a: exact; }
        actions = { add_to(hdr.h.b, 8w1); note(hdr.h.a); }
        const entries = { 1 : add_to(hdr.h.b, 8w1, 0x10); 2 : note(hdr.h.a); }
        default_action = add_to(hdr.h.b, 8w1, 0x40);
    }"""
    pipeline = build(locals_)
    assert send(pipeline, bytes([1, 2, 0, 0])) == bytes([1, 0x13, 0, 0])
    assert send(pipeline, bytes([2, 2, 0, 0])) == bytes([2, 2, 2, 0])
    assert send(pipeline, bytes([3, 2, 0, 0])) == bytes([3, 0x43, 0, 0])
    # the bound argument is read when the action runs, not when the table was declared
    locals_ = locals_.replace(
        "const entries = { 1 : add_to(hdr.h.b, 8w1, 0x10); 2 : note(hdr.h.a); }", ""
    )
    pipeline = build(locals_, "hdr.h.b = 7; t.apply();")
    assert send(pipeline, bytes([3, 2, 0, 0])) == bytes([3, 0x48, 0, 0])


def test_actions_list_cannot_bind_action_data() -> None:
    locals_ = "table t { key = { hdr.h.a: exact; } actions = { put(8w1); } }"
    with pytest.raises(P4CompileError, match="only the directional parameters"):
        build(locals_)


def test_direct_meter_read_on_a_miss_leaves_the_destination() -> None:
    locals_ = """
    direct_meter<bit<8>>(MeterType.packets) dm;
    action colour() { dm.read(hdr.h.d); }
    table t { key = { hdr.h.a: exact; } actions = { colour; } default_action = colour();
              meters = dm; }"""
    pipeline = build(locals_)
    assert send(pipeline, bytes([1, 2, 3, 4])) == bytes([1, 2, 3, 4])  # miss: no meter ran
    pipeline.tables["I.t"].insert(
        TableEntry(match=(Match.exact(1),), action=ActionCall("I.colour"))
    )
    assert send(pipeline, bytes([1, 2, 3, 4])) == bytes([1, 2, 3, 0])  # hit: green
    assert send(pipeline, bytes([2, 2, 3, 4])) == bytes([2, 2, 3, 4])
