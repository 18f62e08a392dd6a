"""Parser behaviour as BMv2's simple_switch shows it (own programs, spec 1.2.x section 12).

A parser error does not drop the packet in v1model: ingress sees `standard_metadata.parser_error`,
headers extracted before the error stay valid and the bytes from the failed operation on are
payload. BMv2 moves the cursor in whole bytes: an `advance` or varbit size that is not a multiple
of 8 is error.ParserInvalidArgument."""

from __future__ import annotations

from icefabric.target.compiler import compile_source

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
header v_t { bit<8> len; varbit<32> opt; }
header r_t { bit<8> code; bit<8> err; }
struct hs { r_t r; h_t h; v_t v; h_t t; }
struct m_t { bit<8> x; }
parser P(packet_in p, out hs hdr, inout m_t m, inout standard_metadata_t sm) {
    STATES
}
control VC(inout hs hdr, inout m_t m) { apply { } }
control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.r.setValid();
        if (sm.parser_error == error.NoError) { hdr.r.err = 0; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.r.err = 1; }
        else if (sm.parser_error == error.HeaderTooShort) { hdr.r.err = 2; }
        else if (sm.parser_error == error.ParserInvalidArgument) { hdr.r.err = 3; }
        else { hdr.r.err = 9; }
    }
}
control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m_t m) { apply { } }
control D(packet_out p, in hs hdr) {
    apply { p.emit(hdr.r); p.emit(hdr.h); p.emit(hdr.v); p.emit(hdr.t); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

ADVANCE = """
    state start { p.extract(hdr.h); p.advance((bit<32>)hdr.h.a); p.extract(hdr.t); transition accept; }
"""
VARBIT = """
    state start { p.extract(hdr.h); transition parse_v; }
    state parse_v {
        p.extract(hdr.v, (bit<32>)hdr.h.a);
        transition accept;
    }
"""


def run(states: str, data: bytes) -> bytes:
    src = PROGRAM.replace("STATES", states)
    pipeline = compile_source(src, filename="perr.p4").instantiate()
    res = pipeline.ingress(data, 0)
    out: bytes = pipeline.egress(res.ctx, egress_port=1).data
    return out


def test_advance_by_whole_bytes() -> None:
    assert run(ADVANCE, bytes([16, 0, 0xAA, 0xBB, 5, 6])) == bytes([0, 0, 16, 0, 5, 6])


def test_advance_not_a_multiple_of_8_is_parser_invalid_argument() -> None:
    # the cursor stays before the advance: the rest of the packet is payload
    out = run(ADVANCE, bytes([12, 0, 0xAA, 0xBB, 5, 6]))
    assert out == bytes([0, 3, 12, 0, 0xAA, 0xBB, 5, 6])


def test_advance_past_the_end_is_packet_too_short_and_keeps_the_rest() -> None:
    out = run(ADVANCE, bytes([64, 0, 0xAA, 0xBB]))
    assert out == bytes([0, 1, 64, 0, 0xAA, 0xBB])


def test_varbit_sizes() -> None:
    assert run(VARBIT, bytes([16, 0, 7, 0xA, 0xB, 0xC])) == bytes([0, 0, 16, 0, 7, 0xA, 0xB, 0xC])
    # not whole bytes
    assert run(VARBIT, bytes([12, 0, 7, 0xA, 0xB, 0xC]))[:2] == bytes([0, 3])
    # larger than the field's maximum (32 bits), packet long enough: HeaderTooShort
    assert run(VARBIT, bytes([40, 0]) + bytes(8))[:2] == bytes([0, 2])
    # larger than the maximum and the packet is too short as well: PacketTooShort first
    assert run(VARBIT, bytes([40, 0, 7, 1]))[:2] == bytes([0, 1])
