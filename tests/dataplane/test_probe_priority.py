"""Link probes and CNPs overtake data: with IceIngress.queue_config written (as the controller
does for a spec with 8 priority queues), packet-outs go in the highest egress queue (priority
7) and RoCEv2 CNPs in the feedback queue (priority 6) from their first switch on.

The uplink L1 -> S1 is rate-limited and backlogged with RoCE data; a probe sent by packet-out on
it reaches S1 (as a LINK_PROBE packet-in) while the data is still queued.  A switch with fewer
queues than that configuration assumes drops the probe (simple_switch does the same), which is
why the queue count lives in the topology spec that both the launchers and the controller read;
with queue_config left at its default every packet stays in queue 0 and the probe waits in line.
Both targets: what h3 has received tells whether data is still queued; on the embedded target
the device's queue depths and drop reasons are checked too.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from harness import PRIORITY_QUEUES, EmbeddedFabric, wait_for
from leaf_spine import SPINE_DOWN, SWITCH_MACS, UPLINK, LeafSpine, Options

from icefabric.control.lldp import LldpProbe
from icefabric.control.p4rt import PacketIn, TableEntry
from icefabric.p4src import ice_p4 as n
from icefabric.traffic import packets as P
from icefabric.traffic.roce import OP_CNP, build_cnp, parse_roce

pytestmark = pytest.mark.dataplane

DATA_PACKETS = 12
# One data packet per 200 ms on the uplink: the rest waits, long enough on a real-time target
# (BMv2) for the sends and a settling fabric to finish well before the queue drains.
RATE_PPS = 5


def _build(factory: Any, switch_queues: int = PRIORITY_QUEUES) -> tuple[LeafSpine, Any]:
    """The fabric (every RoCE flow via S1) and L1's embedded device (None on BMv2)."""
    ls: LeafSpine = factory(Options(s1_buckets=64, switch_queues=switch_queues))
    device = ls.fabric.devices["L1"] if isinstance(ls.fabric, EmbeddedFabric) else None
    return ls, device


def _program_default_queue_config(ls: LeafSpine, switches: tuple[str, ...]) -> None:
    """Reset IceIngress.queue_config to the program's default (every packet in queue 0)."""
    for name in switches:
        ls.fabric[name].conn.modify(
            TableEntry(table="IceIngress.queue_config", is_default_action=True)
        )


def _backlog(ls: LeafSpine, device: Any) -> int:
    """Rate-limit L1's uplink to S1, queue data on it; return the data packets waiting."""
    ls.fabric.set_queue_rate("L1", UPLINK["S1"], RATE_PPS)
    for i in range(DATA_PACKETS):
        ls.send("h1", ls.roce("h1", "h3", sport=40000 + i, qp=0x10, psn=i))
    ls.fabric.run()
    delivered = len(ls.received("h3"))
    assert delivered < DATA_PACKETS // 2, f"the uplink is not backlogged: {delivered} delivered"
    if device is not None:
        assert device.queue_depth(UPLINK["S1"]) == DATA_PACKETS - 1  # the first one left
    return DATA_PACKETS - delivered


def _drain(ls: LeafSpine, waiting: int) -> list[bytes]:
    """Let the backlog drain at RATE_PPS; return what reached h3 meanwhile."""
    got: list[bytes] = []
    ls.fabric.advance_us((waiting + 1) * 1_000_000 // RATE_PPS)

    def drained() -> bool:
        got.extend(ls.received("h3"))
        return len(got) >= waiting

    with contextlib.suppress(AssertionError):  # the caller checks the count
        wait_for(drained, 10.0, "the backlog to drain")
    return got


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
    if l1 is not None:
        assert l1.priority_queues == PRIORITY_QUEUES
    waiting = _backlog(ls, l1)
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    ls.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    pins = _probe_packet_ins(ls, 5.0)
    assert len(pins) == 1 and pins[0].metadata["ingress_port"] == SPINE_DOWN["L1"]
    assert pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    # the probe overtook the queued data: most of it has not reached h3 yet
    early = len(ls.received("h3"))
    assert early < waiting // 2, f"{early} of {waiting} queued packets arrived before the probe"
    if l1 is not None:
        assert l1.queue_depth(UPLINK["S1"], priority=0) == waiting
    assert len(_drain(ls, waiting - early)) == waiting - early
    if l1 is not None:
        assert l1.queue_depth(UPLINK["S1"]) == 0


def test_one_queue_drops_the_probe_as_bmv2(leaf_spine_factory: Any) -> None:
    ls, l1 = _build(leaf_spine_factory, switch_queues=1)  # simple_switch without --priority-queues
    # only L1 keeps the 8-queue configuration: a probe that got through would be punted at S1
    _program_default_queue_config(ls, ("L2", "S1", "S2"))
    waiting = _backlog(ls, l1)
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    ls.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    if l1 is not None:
        wait_for(
            lambda: (ls.fabric.run(), l1.drop_counts().get("priority_out_of_range", 0))[1] == 1,
            5.0,
            "the probe to be dropped (priority 7 with one queue)",
        )
    got = _drain(ls, waiting)
    assert _probe_packet_ins(ls, 0.5) == []
    assert len(got) == waiting  # data is unaffected


def test_without_queue_config_the_probe_waits_behind_data(leaf_spine_factory: Any) -> None:
    """The program's default (no queue_config entry) keeps a single-queue switch working."""
    ls, l1 = _build(leaf_spine_factory, switch_queues=1)  # simple_switch without --priority-queues
    _program_default_queue_config(ls, ("L1", "L2", "S1", "S2"))
    waiting = _backlog(ls, l1)
    probe = LldpProbe(chassis="L1", port=UPLINK["S1"], ttl_s=1).encode()
    ls.fabric["L1"].conn.packet_out(probe, egress_port=UPLINK["S1"], _pad0=0)
    assert _probe_packet_ins(ls, 0.2) == []  # queued behind the data
    _drain(ls, waiting)
    pins = _probe_packet_ins(ls, 5.0)
    assert len(pins) == 1 and pins[0].metadata["reason"] == P.PUNT_REASON_LINK_PROBE
    if l1 is not None:
        assert l1.drop_counts().get("priority_out_of_range", 0) == 0


def _send_cnp_like(ls: LeafSpine, frame: bytes) -> None:
    """h2 sends ``frame`` to h3: hashed onto L1's backlogged uplink to S1, like the data."""
    ls.send("h2", frame)
    ls.fabric.run()


def _cnp(ls: LeafSpine) -> bytes:
    """The CNP a receiving NIC sends (traffic/roce.py, as the virtual-time hosts send it)."""
    h2, h3 = ls.hosts["h2"], ls.hosts["h3"]
    return build_cnp(src_mac=h2.mac, dst_mac=SWITCH_MACS["L1"], src_ip=h2.ip, dst_ip=h3.ip, qp=7)


def _arrivals(ls: LeafSpine, waiting: int) -> list[int]:
    """BTH opcodes of what reaches h3 until the backlog and the extra packet are through."""
    got = _drain(ls, waiting + 1)
    return [parse_roce(f).opcode for f in got]


def test_cnp_leaves_before_queued_data(leaf_spine_factory: Any) -> None:
    # DCQCN's feedback must not wait behind the data queued on a congested reverse path: with
    # a CNP in queue 0 the sender cuts its rate a queue's drain time late (ECMP + DCQCN 21.6 %
    # of the bound on the make-demo preset with CNPs in queue 0, 32.2 % ahead of the data).
    ls, l1 = _build(leaf_spine_factory)
    waiting = _backlog(ls, l1)
    _send_cnp_like(ls, _cnp(ls))
    got = _arrivals(ls, waiting)
    assert OP_CNP in got, f"no CNP reached h3: {got}"
    assert got.index(OP_CNP) < waiting // 2, f"the CNP arrived behind queued data: {got}"
    # counted where it entered the fabric (icefabric_port_cnp_rx_packets), nowhere else
    h2_port = ls.hosts["h2"].port
    assert ls.fabric["L1"].counter(n.COUNTER_CNP_RX_COUNTER, h2_port)[0] == 1
    assert ls.fabric["L2"].counter(n.COUNTER_CNP_RX_COUNTER, UPLINK["S1"])[0] == 1
    assert ls.fabric["L1"].counter(n.COUNTER_CNP_RX_COUNTER, ls.hosts["h1"].port)[0] == 0


def test_a_larger_packet_with_the_cnp_opcode_waits_with_the_data(leaf_spine_factory: Any) -> None:
    # only the fixed 60-byte CNP is raised: a host cannot push data ahead by its opcode
    ls, l1 = _build(leaf_spine_factory)
    waiting = _backlog(ls, l1)
    _send_cnp_like(ls, ls.roce("h2", "h3", sport=40100, qp=7, opcode=OP_CNP, payload_len=64))
    got = _arrivals(ls, waiting)
    assert got.count(OP_CNP) == 1 and got[-1] == OP_CNP, f"expected it last: {got}"
    assert ls.fabric["L1"].counter(n.COUNTER_CNP_RX_COUNTER, ls.hosts["h2"].port)[0] == 0
