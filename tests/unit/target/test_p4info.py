"""P4Info generation: p4c's names, aliases and IDs (jenkins hash with the type prefix)."""

from __future__ import annotations

import pytest

from icefabric.target.compiler import compile_source
from icefabric.target.compiler.p4info import SymbolTable, build_p4info, jenkins_one_at_a_time
from icefabric.target.p4.errors import P4CompileError

TUTORIAL = """#include <core.p4>
#include <v1model.p4>
typedef bit<48> macAddr_t;
@controller_header("packet_in")
header packet_in_header_t { bit<9> ingress_port; bit<7> _pad; }
header ethernet_t { macAddr_t dstAddr; macAddr_t srcAddr; bit<16> etherType; }
header ipv4_t { bit<8> vi; bit<8> tos; bit<16> len; bit<32> x; bit<8> ttl; bit<8> proto;
                bit<16> csum; bit<32> srcAddr; bit<32> dstAddr; }
struct headers { packet_in_header_t pin; ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }
parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.ethernet); packet.extract(hdr.ipv4); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action ipv4_forward(macAddr_t dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dstAddr = dstAddr;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }
    apply { if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); } }
}
control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.pin); packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); }
}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
"""


def test_jenkins_hash() -> None:
    assert jenkins_one_at_a_time("") == 0
    assert jenkins_one_at_a_time("a") == 0xCA2E9442
    assert jenkins_one_at_a_time("The quick brown fox jumps over the lazy dog") == 0x519E91F5


def test_ids_match_p4c_24_bit_scheme() -> None:
    info = compile_source(TUTORIAL, filename="basic.p4").p4info
    actions = {a.preamble.name: a.preamble.id for a in info.actions}
    assert actions["NoAction"] == 21257015  # the id every recent p4c gives NoAction
    for name, ident in actions.items():
        assert ident == (0x01 << 24) | (jenkins_one_at_a_time(name) & 0xFFFFFF)


def test_ids_match_p4c_legacy_16_bit_scheme() -> None:
    """Older p4c kept 16 hash bits: these are the ids of the p4lang tutorials' basic.p4."""
    prog = compile_source(TUTORIAL, filename="basic.p4")
    info = build_p4info(prog, hash_bits=16)
    ids = {a.preamble.name: a.preamble.id for a in info.actions}
    assert ids == {
        "MyIngress.drop": 16805608,
        "MyIngress.ipv4_forward": 16799317,
        "NoAction": 16800567,
    }
    assert info.tables[0].preamble.id == 33574068
    assert info.controller_packet_metadata[0].preamble.id == 67146229


def test_table_and_action_contents() -> None:
    info = compile_source(TUTORIAL, filename="basic.p4").p4info
    (t,) = info.tables
    assert (t.preamble.name, t.preamble.alias, t.size) == ("MyIngress.ipv4_lpm", "ipv4_lpm", 1024)
    (mf,) = t.match_fields
    assert (mf.id, mf.name, mf.bitwidth, mf.match_type) == (1, "hdr.ipv4.dstAddr", 32, 3)
    fwd = next(a for a in info.actions if a.preamble.name == "MyIngress.ipv4_forward")
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "dstAddr", 48), (2, "port", 9)]
    noaction = next(a for a in info.actions if a.preamble.name == "NoAction")
    assert list(noaction.preamble.annotations) == ['@noWarn("unused")']
    assert info.pkg_info.arch == "v1model"
    (cpm,) = info.controller_packet_metadata
    assert cpm.preamble.name == "packet_in"
    assert list(cpm.preamble.annotations) == ['@controller_header("packet_in")']


def test_name_annotations_and_scopes() -> None:
    src = (
        TUTORIAL.replace(
            "    table ipv4_lpm {",
            '    @name(".global_drop") action drop2() { mark_to_drop(standard_metadata); }\n'
            '    @name("routes") @id(0x77) table ipv4_lpm {',
        )
        .replace(
            "actions = { ipv4_forward; drop; NoAction; }",
            "actions = { ipv4_forward; @tableonly drop; @defaultonly NoAction; drop2; }",
        )
        .replace("hdr.ipv4.dstAddr: lpm;", 'hdr.ipv4.dstAddr: lpm @name("dst");')
    )
    info = compile_source(src, filename="n.p4").p4info
    (t,) = info.tables
    assert t.preamble.name == "MyIngress.routes"
    assert t.preamble.id == 0x02000077
    assert t.match_fields[0].name == "dst"
    names = {a.preamble.id: a.preamble.name for a in info.actions}
    scopes = {names[r.id]: (r.scope, list(r.annotations)) for r in t.action_refs}
    assert scopes["MyIngress.drop"] == (1, ["@tableonly"])
    assert scopes["NoAction"] == (2, ["@defaultonly"])
    assert "global_drop" in scopes


def test_probing_resolves_collisions_in_sorted_order() -> None:
    syms = SymbolTable(hash_bits=1)  # force collisions: only two ids per type
    syms.add("action", "b")
    syms.add("action", "a")
    syms.compute()
    ha = jenkins_one_at_a_time("a") & 1
    assert syms.id("action", "a") == (0x01 << 24) | ha  # 'a' sorts first, gets its own slot
    assert syms.id("action", "b") == (0x01 << 24) | (ha ^ 1)


def test_duplicate_id_is_an_error() -> None:
    src = TUTORIAL.replace("action drop()", "@id(5) action drop()").replace(
        "action ipv4_forward", "@id(5) action ipv4_forward"
    )
    with pytest.raises(P4CompileError, match="@id 16777221 is assigned to multiple"):
        _ = compile_source(src, filename="dup.p4").p4info


def test_aliases_are_shortest_unique_suffixes() -> None:
    syms = SymbolTable()
    for n in ("Ingress.a.t", "Ingress.b.t", "Egress.u"):
        syms.add("table", n)
    assert syms.alias("Ingress.a.t") == "a.t"
    assert syms.alias("Egress.u") == "u"


def test_text_format_round_trips() -> None:
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    prog = compile_source(TUTORIAL, filename="basic.p4")
    parsed = text_format.Parse(prog.p4info_text(), p4info_pb2.P4Info())
    assert parsed == prog.p4info


def test_unused_tables_and_actions_are_removed_like_p4c() -> None:
    src = TUTORIAL.replace(
        "    apply { if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); } }",
        """    action only_in_unused(bit<8> v) { hdr.ipv4.ttl = v; }
    action called_directly() { hdr.ipv4.ttl = 1; }
    action never_used() { }
    table unused_t { key = { hdr.ipv4.srcAddr: exact; } actions = { only_in_unused; } }
    apply { if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); } called_directly(); }""",
    )
    info = compile_source(src, filename="unused.p4").p4info
    assert [t.preamble.name for t in info.tables] == ["MyIngress.ipv4_lpm"]
    names = {a.preamble.name for a in info.actions}
    assert "MyIngress.called_directly" in names
    assert not names & {"MyIngress.only_in_unused", "MyIngress.never_used"}


def test_parameters_of_directly_called_actions_are_bound_like_p4c() -> None:
    # p4c binds the arguments of a direct call: such an action has no parameters in its P4Info;
    # an action a table refers to keeps them even when a control body calls it too.
    src = TUTORIAL.replace(
        "    apply { if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); } }",
        """    action set_ttl(bit<8> v) { hdr.ipv4.ttl = v; }
    apply {
        if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); }
        set_ttl(8w3);
        ipv4_forward(48w1, 9w2);
    }""",
    )
    info = compile_source(src, filename="bound.p4").p4info
    params = {a.preamble.name: [(p.name, p.bitwidth) for p in a.params] for a in info.actions}
    assert params["MyIngress.set_ttl"] == []
    assert params["MyIngress.ipv4_forward"] == [("dstAddr", 48), ("port", 9)]
