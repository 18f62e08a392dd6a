"""Parser coverage: the forms p4c itself prints (explicit type arguments, annotations)."""

from __future__ import annotations

from icefabric.target.compiler import compile_source
from icefabric.target.p4 import ast as A
from icefabric.target.p4.parser import parse_text

P4C_STYLE = """#include <core.p4>
#include <v1model.p4>

header packet_t {
    bit<32> packet_read;
    bit<32> hash_field1;
    bit<32> hash_field2;
    bit<32> hash_result;
}
struct metadata { }
struct headers {
    @name(".packet")
    packet_t packet;
}
parser ParserImpl(packet_in packet, out headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    @name(".start") state start {
        packet.extract<packet_t>(hdr.packet);
        transition accept;
    }
}
control ingress(inout headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    @name(".action0") action action0() {
        hash<bit<32>, bit<32>, tuple<bit<32>, bit<32>>, bit<64>>(hdr.packet.hash_result,
            HashAlgorithm.crc32, 32w0, { hdr.packet.hash_field1, hdr.packet.hash_field2 },
            64w4294967296);
    }
    @name(".set_port") action set_port() {
        standard_metadata.egress_spec = 9w1;
    }
    @name(".test") table test {
        actions = {
            action0();
            @defaultonly NoAction();
        }
        key = {
            hdr.packet.packet_read: exact @name("packet.packet_read") ;
        }
        default_action = NoAction();
    }
    @name(".test2") table test2 {
        actions = { set_port(); }
        default_action = set_port();
    }
    apply {
        test.apply();
        test2.apply();
    }
}
control egress(inout headers hdr, inout metadata meta,
               inout standard_metadata_t standard_metadata) { apply { } }
control DeparserImpl(packet_out packet, in headers hdr) {
    apply { packet.emit<packet_t>(hdr.packet); }
}
control verifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control computeChecksum(inout headers hdr, inout metadata meta) { apply { } }
V1Switch<headers, metadata>(ParserImpl(), verifyChecksum(), ingress(), egress(),
                            computeChecksum(), DeparserImpl()) main;
"""


def test_p4c_printed_program_compiles_with_global_names() -> None:
    prog = compile_source(P4C_STYLE, filename="p4c.p4")
    info = prog.p4info
    assert sorted(t.preamble.name for t in info.tables) == ["test", "test2"]
    assert sorted(a.preamble.name for a in info.actions) == ["NoAction", "action0", "set_port"]
    test = next(t for t in info.tables if t.preamble.name == "test")
    assert test.match_fields[0].name == "packet.packet_read"
    pipeline = prog.instantiate()
    data = bytes(range(16))
    from icefabric.target.runtime import ActionCall, Match, TableEntry
    from icefabric.target.runtime.hashes import compute_hash

    pipeline.tables["test"].insert(
        TableEntry(match=(Match.exact(0x00010203),), action=ActionCall("action0"))
    )
    res = pipeline.ingress(data, 0)
    assert res.egress_spec == 1
    out = pipeline.egress(res.ctx, egress_port=1).data
    expected = compute_hash("crc32", [(0x04050607, 32), (0x08090A0B, 32)])
    assert out == data[:12] + expected.to_bytes(4, "big")


def test_greater_than_tokens_in_nested_generics_and_shifts() -> None:
    src = """#include <core.p4>
    const bit<8> A = 8w64 >> 2;
    const bool B = 8w3 > 8w2;
    typedef tuple<bit<8>, tuple<bit<4>, bit<4>>> nested_t;
    """
    prog = parse_text(src, "g.p4")
    consts = [d for d in prog.decls if isinstance(d, A.ConstDecl)]
    assert [c.name for c in consts] == ["A", "B"]
    assert isinstance(consts[0].value, A.Binary) and consts[0].value.op == ">>"
    assert isinstance(consts[1].value, A.Binary) and consts[1].value.op == ">"


def test_integer_literal_forms() -> None:
    src = "const bit<16> a = 16w0x_FF_00; const int<8> b = -8s0b101; const bit<8> c = 0o17;"
    prog = parse_text(src, "i.p4")
    vals = [d.value for d in prog.decls if isinstance(d, A.ConstDecl)]
    assert isinstance(vals[0], A.IntLit) and (vals[0].value, vals[0].width) == (0xFF00, 16)
    assert isinstance(vals[1], A.Unary) and isinstance(vals[1].expr, A.IntLit)
    assert vals[1].expr.signed and vals[1].expr.value == 5
    assert isinstance(vals[2], A.IntLit) and vals[2].value == 15
