"""Path choice of ice.p4: planned paths, flowlets (controlled clock) and ECMP / E-ECMP."""

from __future__ import annotations

from collections import Counter

import pytest
from leaf_spine import (
    HOSTS,
    T_TAG_FORWARD,
    TAG_L1_L2_S1,
    TAG_L1_L2_S2,
    LeafSpine,
    Options,
    plan_flow,
)
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

UP_TAGS = (TAG_L1_L2_S1, TAG_L1_L2_S2)


class PathProbe:
    """Which path tag L1 used for each packet, from the per-tag direct counters over P4Runtime."""

    def __init__(self, ls: LeafSpine) -> None:
        self.ls = ls
        self.last = self._read()

    def _read(self) -> dict[int, int]:
        counts = self.ls.fabric["L1"].direct_counters(T_TAG_FORWARD, "path_tag")
        return {tag: counts.get(tag, 0) for tag in UP_TAGS}

    def moved(self) -> dict[int, int]:
        """Packets per tag that left L1 since the last reading (tags that moved only)."""
        now = self._read()
        moved = {t: now[t] - self.last[t] for t in UP_TAGS if now[t] != self.last[t]}
        self.last = now
        return moved

    def send(self, frame: bytes) -> int:
        """Send one frame from h1 and return the tag it left L1 with."""
        self.ls.send("h1", frame)
        self.ls.fabric.run()
        moved = list(self.moved())
        assert len(moved) == 1, f"expected one tag counter to move, got {moved}"
        return moved[0]


def test_planned_flows_take_their_tag_and_arrive_unmodified(fabric: LeafSpine) -> None:
    plan_flow(fabric, "h1", "h3", sport=50000, qp=0x100, tag=TAG_L1_L2_S2)
    plan_flow(fabric, "h1", "h3", sport=50001, qp=0x101, tag=TAG_L1_L2_S1)
    probe = PathProbe(fabric)
    sent = []
    for psn in range(4):
        frame = fabric.roce("h1", "h3", sport=50000, qp=0x100, psn=psn, ip_id=psn + 1)
        assert probe.send(frame) == TAG_L1_L2_S2
        sent.append(frame)
        frame = fabric.roce("h1", "h3", sport=50001, qp=0x101, psn=psn, ip_id=psn + 1)
        assert probe.send(frame) == TAG_L1_L2_S1
        sent.append(frame)
    got = fabric.received("h3")
    assert len(got) == len(sent)
    for tx, rx in zip(sent, got, strict=True):
        # The host gets plain RoCEv2, the IP packet byte for byte as sent (ICRC included);
        # only the Ethernet header is the last hop's.
        assert rx[14:] == tx[14:]
        assert Ether(rx).type == P.ETHERTYPE_IPV4
        assert Ether(rx).dst == HOSTS["h3"].mac
    # spines saw them on the planned tags
    s1 = fabric.fabric["S1"].direct_counters(T_TAG_FORWARD, "path_tag")
    s2 = fabric.fabric["S2"].direct_counters(T_TAG_FORWARD, "path_tag")
    assert s1[TAG_L1_L2_S1] == 4 and s2[TAG_L1_L2_S2] == 4


def test_ecmp_mode_ignores_plans(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(lb_mode=P.LB_MODE_ECMP))  # type: ignore[operator]
    probe = PathProbe(ls)
    frame = ls.roce("h1", "h3", sport=40000, qp=7)
    ecmp_tag = probe.send(frame)
    other = TAG_L1_L2_S1 if ecmp_tag == TAG_L1_L2_S2 else TAG_L1_L2_S2
    plan_flow(ls, "h1", "h3", sport=40000, qp=7, tag=other)
    assert probe.send(frame) == ecmp_tag


def test_flowlet_moves_only_after_the_gap(leaf_spine_factory: object) -> None:
    """Packets closer than the timeout keep their path; after an idle gap the slot picks again.

    A flowlet's packets are sent paced (`send_paced`), not one `advance_us` apart: on a
    real-time target (BMv2) `advance_us` also waits for the fabric to go quiet, so its gaps
    are the spacing plus that wait, longer than the timeout, and every packet would start a
    flowlet of its own. The path is read once per flowlet from the per-tag counters.

    The pacing (25 ms) is a sixteenth of the timeout (400 ms): at a 100 ms timeout, BMv2 under
    load 10 (the dataplane tier beside two unit tiers) once held a 25 ms gap past 100 ms and a
    flowlet of 5 packets split 3 + 2; 375 ms of slack leaves room for such stalls."""
    timeout = 400_000
    ls = leaf_spine_factory(Options(flowlet_timeout_us=timeout))  # type: ignore[operator]
    h1 = ls.hosts["h1"]
    probe = PathProbe(ls)
    psn = 0

    def flowlet(n: int) -> int:
        nonlocal psn
        frames = []
        for _ in range(n):
            psn += 1
            frames.append(ls.roce("h1", "h3", sport=41000, qp=9, psn=psn, ip_id=psn))
        ls.fabric.send_paced(h1.leaf, h1.port, frames, timeout // 16)
        moved = probe.moved()
        assert sorted(moved.values()) == [n], f"path changed inside a flowlet: {moved}"
        return next(iter(moved))

    flowlets = [flowlet(9)]
    for _ in range(10):
        ls.fabric.advance_us(timeout * 2)
        flowlets.append(flowlet(5))
    assert len(set(flowlets)) == 2, f"no flowlet ever moved to the other path: {flowlets}"
    # all data arrived, in order
    got = [Ether(f)[P.BTH].psn for f in ls.received("h3")]
    assert got == list(range(1, psn + 1))


def test_planned_path_wins_over_flowlet(fabric: LeafSpine) -> None:
    probe = PathProbe(fabric)
    frame = fabric.roce("h1", "h3", sport=42000, qp=3)
    first = probe.send(frame)
    other = TAG_L1_L2_S1 if first == TAG_L1_L2_S2 else TAG_L1_L2_S2
    plan_flow(fabric, "h1", "h3", sport=42000, qp=3, tag=other)
    assert probe.send(frame) == other


def test_ecmp_spreads_flows_and_keeps_each_on_one_path(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(lb_mode=P.LB_MODE_ECMP))  # type: ignore[operator]
    probe = PathProbe(ls)
    flows = [(43000 + 17 * i, 0x200 + i) for i in range(48)]
    first = {}
    for sport, qp in flows:
        first[(sport, qp)] = probe.send(ls.roce("h1", "h3", sport=sport, qp=qp))
    spread = Counter(first.values())
    assert set(spread) == set(UP_TAGS), spread
    assert min(spread.values()) >= 12, f"hash spread too uneven: {spread}"
    for rnd in range(2):
        ls.fabric.advance_us(1_000_000)  # time does not matter to ECMP
        for sport, qp in flows:
            tag = probe.send(ls.roce("h1", "h3", sport=sport, qp=qp, psn=rnd + 1))
            assert tag == first[(sport, qp)], f"flow {sport}/{qp} moved"


@pytest.mark.parametrize("use_qp", [0, 1])
def test_e_ecmp_separates_qps_of_one_5_tuple(leaf_spine_factory: object, use_qp: int) -> None:
    ls = leaf_spine_factory(Options(lb_mode=P.LB_MODE_ECMP, use_qp_in_hash=use_qp))  # type: ignore[operator]
    probe = PathProbe(ls)
    tags = {probe.send(ls.roce("h1", "h3", sport=44000, qp=qp)) for qp in range(1, 33)}
    if use_qp:
        assert tags == set(UP_TAGS)
    else:
        assert len(tags) == 1


def test_weights_follow_bucket_shares(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(lb_mode=P.LB_MODE_ECMP, s1_buckets=P.PATH_BUCKETS))  # type: ignore[operator]
    probe = PathProbe(ls)
    tags = {probe.send(ls.roce("h1", "h3", sport=45000 + i, qp=i)) for i in range(24)}
    assert tags == {TAG_L1_L2_S1}


def test_same_leaf_roce_is_routed_without_a_tag(fabric: LeafSpine) -> None:
    frame = fabric.roce("h1", "h2", sport=46000, qp=5)
    fabric.send("h1", frame)
    fabric.fabric.run()
    got = fabric.received("h2")
    assert len(got) == 1
    assert Ether(got[0]).type == P.ETHERTYPE_IPV4 and P.IceShim not in Ether(got[0])
    assert Ether(got[0])[IP].ttl == Ether(frame)[IP].ttl - 1
