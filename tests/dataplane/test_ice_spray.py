"""Spray (LB_MODE_SPRAY): the first leaf picks a path per packet from the PSN.

bucket = psn mod PATH_BUCKETS; with the controller's bucket layout (control.fabric.bucket_tags:
equal weights interleave the paths) consecutive packets of one flow take consecutive paths.
"""

from __future__ import annotations

import pytest
from leaf_spine import TAG_L1_L2_S1, TAG_L1_L2_S2, UPLINK, LeafSpine, Options, plan_flow
from scapy.layers.l2 import Ether

from icefabric.p4src import ice_p4 as n
from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

SPORT, QP = 53000, 0x1357
SPRAY = Options(lb_mode=n.LB_MODE_SPRAY, interleaved_buckets=True, int_kinds=(n.PATH_KIND_SPRAY,))


def _send(ls: LeafSpine, psns: range) -> dict[int, bytes]:
    frames = {psn: ls.roce("h1", "h3", sport=SPORT, qp=QP, psn=psn, ip_id=psn + 1) for psn in psns}
    for frame in frames.values():
        ls.send("h1", frame)
        ls.fabric.run()
    return frames


def _psns(frames: list[bytes]) -> list[int]:
    return [int(Ether(f)[P.BTH].psn) for f in frames]


def test_consecutive_packets_of_one_flow_leave_on_different_uplinks(
    leaf_spine_factory: object,
) -> None:
    ls = leaf_spine_factory(SPRAY, first_leaf_only=True)  # type: ignore[operator]
    # a planned path is ignored in spray mode, as in ECMP mode
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    _send(ls, range(100, 112))
    via_s1 = ls.fabric.received("L1", UPLINK["S1"])
    via_s2 = ls.fabric.received("L1", UPLINK["S2"])
    uplink = {psn: "S1" for psn in _psns(via_s1)} | {psn: "S2" for psn in _psns(via_s2)}
    assert sorted(uplink) == list(range(100, 112))
    for psn in range(100, 111):
        assert uplink[psn] != uplink[psn + 1], f"PSNs {psn} and {psn + 1} took one uplink"
    for frame in via_s1 + via_s2:
        shim = Ether(frame)[P.IceShim]
        assert shim.path_kind == n.PATH_KIND_SPRAY
        assert shim.path_tag == (TAG_L1_L2_S1 if frame in via_s1 else TAG_L1_L2_S2)


def test_a_sprayed_flow_arrives_whole_over_both_spines(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(SPRAY)  # type: ignore[operator]
    frames = _send(ls, range(12))
    delivered = ls.received("h3")
    assert sorted(f[14:] for f in delivered) == sorted(f[14:] for f in frames.values())
    counts = ls.fabric["L1"].direct_counters("IceIngress.tag_switch.tag_forward", "path_tag")
    assert counts.get(TAG_L1_L2_S1) == 6 and counts.get(TAG_L1_L2_S2) == 6, counts
    # feedback names the path kind, so a sender can tell sprayed feedback from per-flow paths
    fbs = [P.decode_feedback(raw) for raw in ls.received("h1")]
    assert len(fbs) == 12 and {fb.path_kind for fb in fbs} == {n.PATH_KIND_SPRAY}
    assert {fb.path_tag for fb in fbs} == {TAG_L1_L2_S1, TAG_L1_L2_S2}


def test_ecmp_mode_keeps_the_flow_on_one_uplink(leaf_spine_factory: object) -> None:
    # the same traffic and bucket layout without spray: one path for the whole flow
    ls = leaf_spine_factory(  # type: ignore[operator]
        Options(lb_mode=n.LB_MODE_ECMP, interleaved_buckets=True), first_leaf_only=True
    )
    _send(ls, range(12))
    used = [len(ls.fabric.received("L1", UPLINK[s])) for s in ("S1", "S2")]
    assert sorted(used) == [0, 12]
