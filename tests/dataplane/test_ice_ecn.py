"""RED-style ECN marking between Kmin and Kmax on the egress queue depth."""

from __future__ import annotations

import pytest
from leaf_spine import T_ECN_CONFIG, TAG_L1_L2_S2, UPLINK, LeafSpine, Options, plan_flow
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from icefabric.p4src import ice_p4 as n
from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

KMIN, KMAX = 2, 6
SPORT, QP = 52000, 0x99
# Drain rate of L1's limited uplink: slow enough that a burst from a Python sender on a busy
# host still reaches the queue faster than it drains on a real-time target (at 1,000 pps a
# loaded BMv2 queued only 4 of a 10-packet burst, below Kmax).
RATE_PPS = 200


def _run_bursts(ls: LeafSpine, bursts: int, size: int, ecn: int) -> dict[int, tuple[int, int]]:
    """psn -> (enq_qdepth at L1's limited uplink, IPv4 ECN the receiver got)."""
    psn = 0
    for _ in range(bursts):
        frames = []
        for _ in range(size):
            psn += 1
            frames.append(ls.roce("h1", "h3", sport=SPORT, qp=QP, psn=psn, ip_id=psn, ecn=ecn))
        for frame in frames:  # built first: back to back even on a real-time target
            ls.send("h1", frame)
        ls.fabric.run()
        for _ in range(size + 1):
            ls.fabric.advance_us(1_000_000 // RATE_PPS)
    depth = {fb.bth_psn: fb.hops[2].enq_qdepth for fb in map(P.decode_feedback, ls.received("h1"))}
    ecn_of = {Ether(f)[P.BTH].psn: Ether(f)[IP].tos & 3 for f in ls.received("h3")}
    assert set(depth) == set(ecn_of) == set(range(1, psn + 1))
    return {p: (depth[p], ecn_of[p]) for p in depth}


def _fabric(factory: object, pmax_mask: int = 0) -> LeafSpine:
    ls = factory(Options(ecn=(KMIN, KMAX, pmax_mask)))  # type: ignore[operator]
    # Only L1 marks: on a real-time target (BMv2) a slower egress pipeline downstream can queue
    # a burst too, and the depth checked is the one L1's INT record shows.
    for name in ("S1", "S2", "L2"):
        ls.fabric[name].set_default(T_ECN_CONFIG, "NoAction")
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    ls.fabric.set_queue_rate("L1", UPLINK["S2"], pps=RATE_PPS)
    return ls


def test_marks_start_between_kmin_and_kmax(leaf_spine_factory: object) -> None:
    ls = _fabric(leaf_spine_factory)
    seen = _run_bursts(ls, bursts=4, size=10, ecn=2)
    marked = sorted(d for d, e in seen.values() if e == 3)
    unmarked = sorted(d for d, e in seen.values() if e == 2)
    assert marked, "nothing was marked"
    assert all(d > KMIN for d in marked), f"marked at or below Kmin: {marked}"
    assert all(d < KMAX for d in unmarked), f"unmarked at or above Kmax: {unmarked}"
    assert KMIN < marked[0] <= KMAX
    # the ramp: some depths strictly between Kmin and Kmax went both ways
    ramp = [(d, e) for d, e in seen.values() if KMIN < d < KMAX]
    assert ramp and {e for _, e in ramp} == {2, 3}, ramp
    # the switch counts what it marked, on the port it marked it (icefabric_port_ecn_marked_*)
    assert ls.fabric["L1"].counter(n.COUNTER_ECN_MARKED_COUNTER, UPLINK["S2"])[0] == len(marked)
    assert ls.fabric["L2"].counter(n.COUNTER_ECN_MARKED_COUNTER, ls.hosts["h3"].port)[0] == 0


def test_non_ect_traffic_is_never_marked(leaf_spine_factory: object) -> None:
    ls = _fabric(leaf_spine_factory)
    seen = _run_bursts(ls, bursts=1, size=10, ecn=0)
    assert max(d for d, _ in seen.values()) >= KMAX, seen  # else the test checks nothing
    assert {e for _, e in seen.values()} == {0}
    assert ls.fabric["L1"].counter(n.COUNTER_ECN_MARKED_COUNTER, UPLINK["S2"])[0] == 0


def test_pmax_mask_thins_the_ramp(leaf_spine_factory: object) -> None:
    full = _run_bursts(_fabric(leaf_spine_factory), bursts=4, size=10, ecn=1)
    thin = _run_bursts(_fabric(leaf_spine_factory, pmax_mask=0xFFFF), bursts=4, size=10, ecn=1)
    ramp_full = sum(1 for d, e in full.values() if KMIN < d < KMAX and e == 3)
    ramp_thin = sum(1 for d, e in thin.values() if KMIN < d < KMAX and e == 3)
    assert ramp_full > 0 and ramp_thin == 0
    # above Kmax the mark does not depend on Pmax
    assert all(e == 3 for d, e in thin.values() if d >= KMAX)
