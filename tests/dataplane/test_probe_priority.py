"""Link probes overtake data: with IceIngress.queue_config written (as the controller does for
a spec with 8 priority queues), packet-outs go in the highest egress queue (priority 7).

The uplink L1 -> S1 is rate-limited and backlogged with RoCE data; a probe sent by packet-out on
it reaches S1 (as a LINK_PROBE packet-in) while the data is still queued.  A switch with fewer
queues than that configuration assumes drops the probe (simple_switch does the same), which is
why the queue count lives in the topology spec that both the launchers and the controller read;
with queue_config left at its default every packet stays in queue 0 and the probe waits in line.
Embedded target only: the test reads the queues of the in-process devices.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from harness import PRIORITY_QUEUES, EmbeddedFabric, wait_for
from leaf_spine import SPINE_DOWN, UPLINK, LeafSpine, Options

from icefabric.control.lldp import LldpProbe
from icefabric.control.p4rt import PacketIn, TableEntry
from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

DATA_PACKETS = 12
RATE_PPS = 100  # one data packet per 10 ms on the uplink: the rest waits


def _build(factory: Any) -> tuple[LeafSpine, Any]:
    ls: LeafSpine = factory(Options(s1_buckets=64))  # every RoCE flow via S1
    if not isinstance(ls.fabric, EmbeddedFabric):
        pytest.skip("reads the embedded devices' queues")
    return ls, ls.fabric.devices["L1"]


def _backlog(ls: LeafSpine, device: Any) -> int:
    """Rate-limit L1's uplink to S1, queue data on it; return the data packets waiting."""
    ls.fabric.set_queue_rate("L1", UPLINK["S1"], RATE_PPS)
    for i in range(DATA_PACKETS):
        ls.send("h1", ls.roce("h1", "h3", sport=40000 + i, qp=0x10, psn=i))
    ls.fabric.run()
    waiting = device.queue_depth(UPLINK["S1"])
    assert waiting == DATA_PACKETS - 1  # the first one left at once, the rest is queued
    return waiting


def _probe_packet_ins(ls: LeafSpine, timeout: float) -> list[PacketIn]:
    got: list[PacketIn] = []

    def arrived() -> bool:
        ls.fabric.run()
        got.extend(p for p in ls.fabric["S1"].packet_ins() if p.payload[12:14] == b"\x88\xcc")
        return bool(got)

    with contextlib.suppress(AssertionError):  # none arrived: the caller checks
        wait_for(arrived, timeout, "the probe at S1")
    return got


def test_probe_leaves_before_queued_data(leaf_spine_factory: Any) -> None:
    ls, l1 = _build(leaf_spine_factory)
    assert l1.priority_queues == PRIORITY_QUEUES
    waiting = _backlog(ls, l1)
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    ls.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    pins = _probe_packet_ins(ls, 5.0)
    assert len(pins) == 1 and pins[0].metadata["ingress_port"] == SPINE_DOWN["L1"]
    assert pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    # the probe overtook every data packet: they still wait in queue 0, none reached h3 yet
    assert l1.queue_depth(UPLINK["S1"], priority=0) == waiting
    assert len(ls.received("h3")) == 1
    ls.fabric.advance_us(DATA_PACKETS * 1_000_000 // RATE_PPS)
    assert l1.queue_depth(UPLINK["S1"]) == 0
    assert len(ls.received("h3")) == waiting


def test_one_queue_drops_the_probe_as_bmv2(leaf_spine_factory: Any) -> None:
    ls, l1 = _build(leaf_spine_factory)
    l1.set_priority_queues(1)  # simple_switch without --priority-queues
    _backlog(ls, l1)
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    ls.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    wait_for(
        lambda: (ls.fabric.run(), l1.drop_counts().get("priority_out_of_range", 0))[1] == 1,
        5.0,
        "the probe to be dropped (priority 7 with one queue)",
    )
    ls.fabric.advance_us(DATA_PACKETS * 1_000_000 // RATE_PPS)
    assert _probe_packet_ins(ls, 0.2) == []
    assert len(ls.received("h3")) == DATA_PACKETS  # data is unaffected


def test_without_queue_config_the_probe_waits_behind_data(leaf_spine_factory: Any) -> None:
    """The program's default (no queue_config entry) keeps a single-queue switch working."""
    ls, l1 = _build(leaf_spine_factory)
    ls.fabric["L1"].conn.modify(
        TableEntry(table="IceIngress.queue_config", is_default_action=True)  # program default
    )
    l1.set_priority_queues(1)  # simple_switch without --priority-queues
    waiting = _backlog(ls, l1)
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    ls.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    assert _probe_packet_ins(ls, 0.2) == []  # queued behind the data
    ls.fabric.advance_us((waiting + 1) * 1_000_000 // RATE_PPS)
    pins = _probe_packet_ins(ls, 5.0)
    assert len(pins) == 1 and pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    assert l1.drop_counts().get("priority_out_of_range", 0) == 0
