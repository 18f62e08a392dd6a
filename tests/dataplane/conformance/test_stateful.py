"""Registers, counters, meters, direct counters; ternary/range/optional priorities."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from icefabric.target.runtime import (
    ActionCall,
    Match,
    MeterConfig,
    PermissionDeniedError,
    TableEntry,
)

from .conftest import program, send

pytestmark = pytest.mark.dataplane


def _frame(ether_type: int, dst_low: int, src_low: int) -> bytes:
    dst = f"00:00:00:00:00:{dst_low:02x}"
    src = f"00:00:00:00:00:{src_low:02x}"
    return raw(Ether(dst=dst, src=src, type=ether_type) / (b"s" * 46))


def _tag(out: list[tuple[int, bytes]]) -> tuple[int, int, int]:
    ((_, data),) = out
    tag = data[14:18]
    return tag[0], tag[1], int.from_bytes(tag[2:4], "big")


def test_priorities_of_const_entries(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("stateful")
    assert _tag(send(dev, 1, _frame(0x0800, 15, 1)))[0] == 2  # both match: @priority(10) wins
    assert _tag(send(dev, 1, _frame(0x0800, 30, 1)))[0] == 1
    assert _tag(send(dev, 1, _frame(0x0806, 30, 0x77)))[0] == 3
    assert _tag(send(dev, 1, _frame(0x0806, 30, 0x78)))[0] == 0  # miss: NoAction
    counts = [e.packet_count for e in dev.pipeline.tables["Ing.classify"].entries()]
    assert sorted(counts) == [1, 1, 1]


def test_register_and_counter_per_port(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("stateful")
    for i in range(3):
        assert _tag(send(dev, 4, _frame(0x86DD, 0, 0)))[2] == i + 1
    assert _tag(send(dev, 5, _frame(0x86DD, 0, 0)))[2] == 1
    p = dev.pipeline
    assert p.registers["Ing.seen_per_port"].read(4) == 3
    assert p.counters["Ing.port_counter"].read(4) == (3 * 60, 3)


def test_meter_colours_packets(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("stateful")
    dev.pipeline.meters["Ing.port_meter"].set_config(
        0, MeterConfig(cir=1, cburst=2, pir=2, pburst=3)
    )
    colours = [_tag(send(dev, 1, _frame(0x86DD, 0, 0)))[1] for _ in range(5)]
    assert colours[0] == 0
    assert colours[-1] == 2
    assert colours == sorted(colours)


def test_const_table_rejects_control_plane_entries(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("stateful")
    table = dev.pipeline.tables["Ing.classify"]
    with pytest.raises(PermissionDeniedError):
        table.insert(
            TableEntry(
                match=(Match.ternary(0x0806, 0xFFFF), Match.dont_care(), Match.dont_care()),
                priority=100,
                action=ActionCall("Ing.set_cls", (9,)),
            )
        )


def test_p4info_of_externs() -> None:
    info = program("stateful").p4info
    (reg,) = info.registers
    assert (reg.preamble.name, reg.size, reg.type_spec.bitstring.bit.bitwidth) == (
        "Ing.seen_per_port", 16, 16)  # fmt: skip
    (ctr,) = info.counters
    assert ctr.spec.unit == ctr.spec.BOTH and ctr.size == 16
    (dc,) = info.direct_counters
    (tbl,) = info.tables
    assert dc.direct_table_id == tbl.preamble.id
    assert list(tbl.direct_resource_ids) == [dc.preamble.id]
    assert tbl.is_const_table
    assert [m.name for m in tbl.match_fields] == [
        "hdr.eth.ether_type",
        "dst_low",
        "hdr.eth.src[7:0]",
    ]
    assert [m.match_type for m in tbl.match_fields] == [4, 5, 6]
    (mtr,) = info.meters
    assert mtr.preamble.id >> 24 == 0x14 and reg.preamble.id >> 24 == 0x16
