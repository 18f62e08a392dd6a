"""Strict-priority egress queues (simple_switch --priority-queues N) with a compiled program."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.target.device import CloneSession, Device, Replica
from icefabric.target.queues import TrafficManager
from icefabric.target.runtime import ManualClock

compiler = pytest.importorskip("icefabric.target.compiler")

# ingress: priority = low 3 bits of the EtherType; EtherType 0x01xx also clones I2E to session 5,
# 0x02xx multicasts to group 1.  egress: src = qid << 40 | enq_qdepth << 20 | deq_qdepth.
PRIO_P4 = r"""
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { ethernet_t eth; }
struct meta_t { }
parser P(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {
    state start { p.extract(h.eth); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    apply {
        s.priority = h.eth.type[2:0];
        if (h.eth.type[15:8] == 1) { clone(CloneType.I2E, 5); }
        if (h.eth.type[15:8] == 2) { s.mcast_grp = 1; } else { s.egress_spec = 2; }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    apply {
        h.eth.src = ((bit<48>)s.qid << 40) | ((bit<48>)s.enq_qdepth << 20)
            | (bit<48>)s.deq_qdepth;
    }
}
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out p, in headers_t h) { apply { p.emit(h.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.fixture(scope="module")
def prio_program() -> object:
    return compiler.compile_source(PRIO_P4, filename="prio.p4")


def frame(seq: int, ethertype: int) -> bytes:
    return seq.to_bytes(6, "big") + bytes(6) + ethertype.to_bytes(2, "big") + b"payload"


def seqs(out: list[tuple[int, bytes]]) -> list[int]:
    return [int.from_bytes(d[:6], "big") for _, d in out]


def fields(data: bytes) -> tuple[int, int, int]:
    """(qid, enq_qdepth, deq_qdepth) as egress wrote them into the source MAC."""
    src = int.from_bytes(data[6:12], "big")
    return src >> 40, (src >> 20) & 0xFFFFF, src & 0xFFFFF


def make(program: object, queues: int) -> tuple[Device, ManualClock]:
    clock = ManualClock(1_000_000)
    dev = Device(clock=clock, priority_queues=queues)
    dev.set_program(program)
    return dev, clock


def test_strict_priority_highest_first(prio_program: object) -> None:
    dev, clock = make(prio_program, 8)
    dev.set_queue_rate(2, pps=1000)  # every queue of port 2: one packet per ms
    for i in range(4):
        dev.inject(1, frame(i, 0x0800))  # priority 0
    dev.inject(1, frame(10, 0x0803))  # priority 3
    dev.inject(1, frame(20, 0x0807))  # priority 7
    dev.inject(1, frame(21, 0x0807))
    dev.run_until_idle()
    # each queue may send one packet now: the backlog of priority 0 does not delay the others
    assert seqs(dev.collect(2)) == [0, 10, 20]
    assert dev.queue_depth(2) == 4 and dev.queue_depth(2, priority=0) == 3
    clock.advance(1000)
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [21, 1]  # both ready: the highest priority leaves first
    clock.advance(2000)
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [2, 3]


def test_same_time_ready_goes_by_priority(prio_program: object) -> None:
    dev, clock = make(prio_program, 8)
    dev.set_queue_rate(None, pps=1000)
    for i, et in enumerate((0x0800, 0x0801, 0x0805, 0x0802)):
        dev.inject(1, frame(i, et))
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [0, 1, 2, 3]  # each arrived to an idle queue
    for i, et in enumerate((0x0800, 0x0801, 0x0805, 0x0802)):
        dev.inject(1, frame(10 + i, et))
    dev.run_until_idle()
    assert dev.collect(2) == []  # every queue is in its transmission slot
    clock.advance(1000)
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [12, 13, 11, 10]  # priority 5, 2, 1, 0


def test_one_queue_is_fifo_and_drops_priority_out_of_range(prio_program: object) -> None:
    dev, clock = make(prio_program, 1)
    dev.set_queue_rate(2, pps=1000)
    for i in range(3):
        dev.inject(1, frame(i, 0x0800))
    dev.inject(1, frame(9, 0x0807))  # priority 7 >= 1 queue: BMv2 drops it
    dev.run_until_idle()
    clock.advance(5000)
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [0, 1, 2]
    assert dev.drop_counts() == {"priority_out_of_range": 1}


def test_priority_out_of_range_with_four_queues(prio_program: object) -> None:
    dev, _ = make(prio_program, 4)
    dev.inject(1, frame(1, 0x0803))
    dev.inject(1, frame(2, 0x0804))
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [1]
    assert dev.drop_counts() == {"priority_out_of_range": 1}


def test_per_priority_rate(prio_program: object) -> None:
    dev, clock = make(prio_program, 8)
    dev.set_queue_rate(2, pps=100)  # all queues: 10 ms
    dev.set_queue_rate(2, pps=1000, priority=7)  # priority 7 only: 1 ms
    for i in range(3):
        dev.inject(1, frame(i, 0x0800))
        dev.inject(1, frame(10 + i, 0x0807))
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [0, 10]
    clock.advance(2000)
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [11, 12]
    clock.advance(8000)
    dev.run_until_idle()
    assert seqs(dev.collect(2)) == [1]


def test_per_queue_depth_tail_drop(prio_program: object) -> None:
    dev, clock = make(prio_program, 8)
    dev.set_queue_rate(2, pps=1000)
    dev.set_queue_depth(2, 2)  # every queue of port 2 holds 2
    dev.set_queue_depth(2, 4, priority=7)
    for i in range(5):
        dev.inject(1, frame(i, 0x0800))
    for i in range(6):
        dev.inject(1, frame(10 + i, 0x0807))
    dev.run_until_idle()
    # priority 0: one left at once, 2 queued, 2 tail-dropped; priority 7: one left, 4 queued, 1
    assert dev.drop_counts() == {"queue_full": 3}
    assert dev.queue_depth(2, priority=0) == 2 and dev.queue_depth(2, priority=7) == 4
    clock.advance(10_000)
    dev.run_until_idle()
    got = seqs(dev.collect(2))
    assert sorted(got) == [0, 1, 2, 10, 11, 12, 13, 14]


def test_qid_and_depths_per_queue(prio_program: object) -> None:
    dev, clock = make(prio_program, 8)
    dev.set_queue_rate(2, pps=1000)
    for i in range(3):
        dev.inject(1, frame(i, 0x0800))
    dev.inject(1, frame(10, 0x0806))
    dev.inject(1, frame(11, 0x0806))
    dev.run_until_idle()
    clock.advance(5000)
    dev.run_until_idle()
    got = {int.from_bytes(d[:6], "big"): fields(d) for _, d in dev.collect(2)}
    # enq_qdepth/deq_qdepth count the packet's own queue only, qid is its priority (BMv2)
    assert got[0] == (0, 0, 0)
    assert got[1] == (0, 0, 1) and got[2] == (0, 1, 0)
    assert got[10] == (6, 0, 0) and got[11] == (6, 0, 0)


def test_clones_get_priority_zero_and_multicast_keeps_it(prio_program: object) -> None:
    dev, _ = make(prio_program, 8)
    dev.set_clone_session(5, CloneSession((Replica(3, 0),)))
    dev.set_multicast_group(1, [Replica(4, 1), Replica(5, 2)])
    dev.inject(1, frame(1, 0x0107))  # priority 7 + I2E clone
    dev.inject(1, frame(2, 0x0205))  # priority 5 multicast
    dev.run_until_idle()
    out = {(p, int.from_bytes(d[:6], "big")): fields(d)[0] for p, d in dev.collect()}
    # BMv2 resets a clone's metadata (priority 0); replicas copy the packet's metadata
    assert out == {(2, 1): 7, (3, 1): 0, (4, 2): 5, (5, 2): 5}


def test_a_clone_session_class_of_service_picks_the_copies_queue(prio_program: object) -> None:
    """P4Runtime's CloneSessionEntry.class_of_service: the copies' queue (their own metadata is
    reset), so a copy overtakes the data queued on its port; out of range it is dropped."""
    dev, clock = make(prio_program, 8)
    dev.set_clone_session(5, CloneSession((Replica(2, 0),), class_of_service=6))
    dev.set_queue_rate(2, pps=1000)  # one packet per ms: a queue builds on port 2
    for seq in range(1, 4):
        dev.inject(1, frame(seq, 0x0000))  # data, priority 0, to port 2
    dev.inject(1, frame(9, 0x0100))  # priority 0 + I2E clone to port 2 at class of service 6
    for _ in range(10):
        clock.advance(1000)
        dev.run_until_idle()
    out = [(int.from_bytes(d[:6], "big"), fields(d)[0]) for p, d in dev.collect() if p == 2]
    # the first data packet was already on the wire; the copy leaves before the queued data
    assert out[:2] == [(1, 0), (9, 6)]
    assert sorted(out) == [(1, 0), (2, 0), (3, 0), (9, 0), (9, 6)]

    dev4, _ = make(prio_program, 4)
    dev4.set_clone_session(5, CloneSession((Replica(3, 0),), class_of_service=6))
    dev4.inject(1, frame(1, 0x0100))
    dev4.run_until_idle()
    assert [p for p, _ in dev4.collect()] == [2]
    assert dev4.drop_counts().get("priority_out_of_range") == 1


def test_priority_queues_validation() -> None:
    with pytest.raises(ValueError, match="priority_queues"):
        TrafficManager(0)
    with pytest.raises(ValueError, match="priority_queues"):
        Device(priority_queues=9)
    dev = Device(priority_queues=2)
    assert dev.priority_queues == 2
    with pytest.raises(ValueError, match="priority 2 out of range"):
        dev.set_queue_rate(1, pps=10, priority=2)
    with pytest.raises(ValueError, match="priority 3 out of range"):
        dev.set_queue_depth(None, 4, priority=3)
    dev.set_priority_queues(8)
    assert dev.priority_queues == 8
    dev.set_queue_depth(None, 4, priority=7)
    assert dev.tm.queue(9, 7).capacity == 4 and dev.tm.queue(9, 0).capacity == 64


def test_the_topology_spec_sets_queues_for_switches_and_controller_alike() -> None:
    """One number in the spec: launchers start that many queues, the controller raises control
    traffic only when there is more than one (simple_switch drops a priority >= its queues)."""
    from icefabric.control.fabric import base_entries, queue_priorities
    from icefabric.control.topology import Topology
    from icefabric.p4src import ice_p4 as n
    from icefabric.topo.generators import leaf_spine

    assert queue_priorities(1) is None
    assert queue_priorities(8) == (7, 6) and queue_priorities(2) == (1, 0)
    for queues in (1, 8):
        spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, priority_queues=queues)
        written = [
            e
            for ents in base_entries(Topology(spec)).values()
            for e in ents
            if getattr(e, "table", "") == n.TABLE_QUEUE_CONFIG
        ]
        if queues == 1:
            assert written == []
        else:
            assert len(written) == len(spec.switches)
            assert all(dict(e.params) == {"control_prio": 7, "feedback_prio": 6} for e in written)
    text = (Path(__file__).resolve().parents[3] / "topo" / "mininet.py").read_text()
    assert "priority_queues=spec.defaults.priority_queues" in text
