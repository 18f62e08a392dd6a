"""Canonical bytestrings, the P4Info index and the name-constant generator (no switch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.control.p4rt import (
    EncodeError,
    P4InfoError,
    P4InfoIndex,
    decode_int,
    encode_int,
    encode_value,
    format_value,
    generate_names_module,
    load_p4info,
    write_names_module,
)
from icefabric.control.p4rt.codec import canonical, mask_of_prefix

FIXTURE = Path(__file__).parent / "p4" / "l3_fixture.p4info.txtpb"


@pytest.fixture(scope="module")
def p4info() -> P4InfoIndex:
    return P4InfoIndex.load(FIXTURE)


# P4Runtime spec 8.4, Table 4 (valid encodings) and Table 5 (invalid ones).
@pytest.mark.parametrize(
    ("value", "width", "expected"),
    [
        (0, 8, b"\x00"),
        (0, 32, b"\x00"),
        (1, 1, b"\x01"),
        (99, 8, b"\x63"),
        (99, 16, b"\x63"),
        (0x100, 9, b"\x01\x00"),
        (0x1FF, 9, b"\x01\xff"),
        (2**48 - 1, 48, b"\xff" * 6),
        (0x0A000001, 32, b"\x0a\x00\x00\x01"),
    ],
)
def test_encode_int_is_minimal_big_endian(value: int, width: int, expected: bytes) -> None:
    assert encode_int(value, width) == expected
    assert decode_int(expected) == value


@pytest.mark.parametrize(("value", "width"), [(256, 8), (0x200, 9), (2, 1), (-1, 8)])
def test_encode_int_rejects_values_that_do_not_fit(value: int, width: int) -> None:
    with pytest.raises(EncodeError, match="port" if value >= 0 else "non-negative"):
        encode_int(value, width, what="port")


def test_encode_int_rejects_non_ints() -> None:
    with pytest.raises(EncodeError, match="expected an int"):
        encode_int(True, 8)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="expected an int"):
        encode_int("1", 8)  # type: ignore[arg-type]


def test_padded_bytes_decode_and_canonicalise() -> None:
    assert decode_int(b"\x00\x00\x01\x02") == 0x102
    assert canonical(b"\x00\x00\x01\x02") == b"\x01\x02"
    assert canonical(b"\x00\x00") == b"\x00"
    assert encode_value(b"\x00\x00\x0a", 16) == b"\x0a"


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("10.0.0.1", 32, b"\x0a\x00\x00\x01"),
        ("0.0.0.0", 32, b"\x00"),
        ("00:00:00:00:01:0a", 48, b"\x01\x0a"),
        ("aa-bb-cc-dd-ee-ff", 48, b"\xaa\xbb\xcc\xdd\xee\xff"),
        ("0:0:0:0:1:a", 48, b"\x01\x0a"),
        ("2001:db8::1", 128, bytes.fromhex("20010db8000000000000000000000001")),
        ("::1", 128, b"\x01"),
        ("0x1ff", 9, b"\x01\xff"),
        ("17", 8, b"\x11"),
    ],
)
def test_encode_value_from_strings(text: str, width: int, expected: bytes) -> None:
    assert encode_value(text, width) == expected


@pytest.mark.parametrize("bad", ["10.0.0.256", "fe80::zz", "hello", "1.2.3"])
def test_encode_value_names_bad_strings(bad: str) -> None:
    with pytest.raises(EncodeError, match="dst"):
        encode_value(bad, 32, what="dst")


def test_ipv6_does_not_fit_in_32_bits() -> None:
    with pytest.raises(EncodeError, match="does not fit in 32 bits"):
        encode_value("2001:db8::1", 32)


def test_mask_and_format() -> None:
    assert mask_of_prefix(8, 32) == 0xFF000000
    assert mask_of_prefix(0, 32) == 0
    with pytest.raises(EncodeError):
        mask_of_prefix(33, 32)
    assert format_value(0x0A000001, 32) == "10.0.0.1"
    assert format_value(0x0A0B, 48) == "00:00:00:00:0a:0b"
    assert format_value(1, 128) == "::1"
    assert format_value(300, 9) == "0x12c"


def test_index_lookups_by_name_alias_and_id(p4info: P4InfoIndex) -> None:
    t = p4info.table("MyIngress.ipv4_lpm")
    assert p4info.table("ipv4_lpm") is t
    assert p4info.table(37375156) is t
    assert t.field("hdr.ipv4.dstAddr").bitwidth == 32
    assert t.field(1).match_type == "lpm"
    acl = p4info.table("acl")
    assert [f.match_type for f in acl.match_fields] == ["ternary", "range", "optional", "exact"]
    assert acl.needs_priority and not t.needs_priority
    a = p4info.action("set_nhop")
    assert [(p.name, p.bitwidth) for p in a.params] == [("dmac", 48), ("port", 9)]
    assert p4info.action_profile("ecmp_selector").size == 128
    assert p4info.register_bitwidth("flow_bytes") == 64
    assert p4info.counter("port_counter").size == 512
    assert p4info.meter("port_meter").id == 338171592
    assert p4info.direct_counter_of("ipv4_lpm").name == "MyIngress.ipv4_counter"  # type: ignore[union-attr]
    assert p4info.direct_meter_of("ipv4_lpm") is None
    assert [m.name for m in p4info.digest("learn_t").members] == ["srcAddr", "ingress_port"]
    assert [m.bitwidth for m in p4info.controller_metadata("packet_out").members] == [9, 7]
    assert p4info.name_of(302055013) == "MyIngress.port_counter"
    assert p4info.table("const_rewrite").is_const


def test_index_errors_name_the_kind_and_the_known_names(p4info: P4InfoIndex) -> None:
    with pytest.raises(P4InfoError, match=r"no table 'ipv4_lmp'.*MyIngress\.ipv4_lpm"):
        p4info.table("ipv4_lmp")
    with pytest.raises(P4InfoError, match=r"no parameter of action MyIngress.set_nhop 'mac'.*dmac"):
        p4info.action("set_nhop").param("mac")
    with pytest.raises(P4InfoError, match=r"match field of table MyIngress\.acl"):
        p4info.table("acl").field("nope")
    with pytest.raises(P4InfoError, match=r"no P4 object with id 1 "):
        p4info.name_of(1)


def test_load_text_and_binary_p4info(tmp_path: Path, p4info: P4InfoIndex) -> None:
    binary = tmp_path / "l3.p4info.bin"
    binary.write_bytes(p4info.p4info.SerializeToString())
    assert load_p4info(binary) == p4info.p4info
    assert P4InfoIndex.from_bytes(FIXTURE.read_bytes()).table("acl").id == 44506256
    assert P4InfoIndex.from_text(FIXTURE.read_text()).action("drop").id == 25652968


def test_load_p4info_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(P4InfoError, match=r"missing\.txt: cannot read"):
        load_p4info(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txtpb"
    bad.write_text("tables { preamble { id: nope } }\n")
    with pytest.raises(P4InfoError, match=r"bad\.txtpb: not a P4Info in text format"):
        load_p4info(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(P4InfoError, match="empty P4Info"):
        load_p4info(empty)


def test_generated_names_module_defines_every_name(p4info: P4InfoIndex, tmp_path: Path) -> None:
    text = generate_names_module(p4info, program="l3.p4")
    compile(text, "names.py", "exec")
    ns: dict[str, object] = {}
    exec(text, ns)
    assert ns["TABLE_IPV4_LPM"] == "MyIngress.ipv4_lpm"
    assert ns["ACTION_SET_NHOP"] == "MyIngress.set_nhop"
    assert ns["ACTION_NOACTION"] == "NoAction"
    assert ns["ACTION_PROFILE_ECMP_SELECTOR"] == "MyIngress.ecmp_selector"
    assert ns["REGISTER_FLOW_BYTES"] == "MyIngress.flow_bytes"
    assert ns["COUNTER_PORT_COUNTER"] == "MyIngress.port_counter"
    assert ns["DIGEST_LEARN_T"] == "learn_t"
    assert ns["MATCH_ACL_HDR_TCP_DSTPORT"] == "hdr.tcp.dstPort"
    assert ns["PARAM_SET_NHOP_DMAC"] == "dmac"
    assert ns["PACKET_OUT_EGRESS_PORT"] == "egress_port"
    # every table, action and field of the P4Info appears as a value
    values = {v for v in ns.values() if isinstance(v, str)}
    assert {t.name for t in p4info.tables} <= values
    assert {a.name for a in p4info.actions} <= values
    out = write_names_module(p4info, tmp_path / "names.py", program="l3.p4")
    assert out.read_text() == text
    assert '"""P4Info names of l3.p4' in text


def test_generated_names_survive_alias_clashes() -> None:
    text = """
tables { preamble { id: 1 name: "A.t" alias: "t" } }
tables { preamble { id: 2 name: "B.t" alias: "B.t" } }
actions { preamble { id: 3 name: "x-y" alias: "x-y" } }
actions { preamble { id: 4 name: "x_y" alias: "x_y" } }
"""
    ns: dict[str, object] = {}
    exec(generate_names_module(P4InfoIndex.from_text(text)), ns)
    tables = {v for k, v in ns.items() if k.startswith("TABLE_")}
    actions = {v for k, v in ns.items() if k.startswith("ACTION_")}
    assert tables == {"A.t", "B.t"}
    assert actions == {"x-y", "x_y"}
