"""INT only where it is read: the first leaf samples 1 in N packets of a flow for hop records.

N comes from the controller (control.fabric.IntSampling -> IceIngress.path_select.int_sampling);
a packet is sampled when ((psn ^ (psn >> 6)) & (N - 1)) == 0, or when its flow has gone the
controller's max gap without a sample (p4src/README.md).  Unsampled packets carry the 8-byte
shim and nothing else; only sampled ones make feedback and reports.
"""

from __future__ import annotations

import pytest
from leaf_spine import HOSTS, SWITCH_IDS, TAG_L1_L2_S2, UPLINK, LeafSpine, Options, plan_flow
from scapy.layers.l2 import Ether

from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

SPORT, QP = 52000, 0x2468


def _sampled_psns(ls: LeafSpine) -> list[int]:
    """PSNs of the frames that left L1 towards S2 with INT records on them."""
    out = []
    for raw in ls.fabric.received("L1", UPLINK["S2"]):
        pkt = Ether(raw)
        if pkt[P.IceShim].int_enabled:
            out.append(int(pkt[P.BTH].psn))
    return sorted(out)


def _sampled(psn: int, n: int) -> bool:
    return ((psn ^ (psn >> 6)) & (n - 1)) == 0


def _send(ls: LeafSpine, psns: list[int]) -> dict[int, bytes]:
    frames = {psn: ls.roce("h1", "h3", sport=SPORT, qp=QP, psn=psn, ip_id=psn + 1) for psn in psns}
    for frame in frames.values():
        ls.send("h1", frame)
        ls.fabric.run()
    return frames


def _feedback_psns(ls: LeafSpine) -> list[int]:
    out = []
    for raw in ls.received("h1"):
        fb = P.decode_feedback(raw)
        assert fb.hop_count == 3, "a feedback packet without every hop's record"
        assert [h.switch_id for h in fb.hops] == [
            SWITCH_IDS["L2"],
            SWITCH_IDS["S2"],
            SWITCH_IDS["L1"],
        ]
        out.append(int(fb.bth_psn))
    return sorted(out)


@pytest.mark.parametrize("n", [4, 8])
def test_first_leaf_puts_records_on_one_packet_in_n(leaf_spine_factory: object, n: int) -> None:
    ls = leaf_spine_factory(Options(int_sample_n=n), first_leaf_only=True)  # type: ignore[operator]
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    psns = list(range(0, 16)) + list(range(64, 80))  # two 64-PSN blocks: the sample rotates
    frames = _send(ls, psns)
    out = ls.fabric.received("L1", UPLINK["S2"])
    assert len(out) == len(psns)
    sampled = []
    for raw in out:
        pkt = Ether(raw)
        shim = pkt[P.IceShim]
        psn = int(pkt[P.BTH].psn)
        assert shim.path_tag == TAG_L1_L2_S2 and shim.path_kind == P.PATH_KIND_PLANNED
        original = frames[psn]
        if shim.int_enabled:
            sampled.append(psn)
            assert shim.int_hop_count == 1 and shim.hops[0].switch_id == SWITCH_IDS["L1"]
            assert len(raw) == len(original) + P.ICE_SHIM_BYTES + P.INT_HOP_BYTES
        else:  # the shim and nothing else
            assert shim.int_hop_count == 0
            assert len(raw) == len(original) + P.ICE_SHIM_BYTES
            assert raw[14 + P.ICE_SHIM_BYTES :] == original[14:]
    assert sorted(sampled) == [p for p in psns if _sampled(p, n)]
    assert len(sampled) == len(psns) // n  # one in n, in each block of 16 consecutive PSNs
    # the sampled offsets rotate from one 64-PSN block to the next (every spray bucket is seen)
    assert {p % n for p in sampled if p < 64} != {p % n for p in sampled if p >= 64}


def test_only_sampled_packets_make_feedback_every_packet_delivered(
    leaf_spine_factory: object,
) -> None:
    ls = leaf_spine_factory(Options(int_sample_n=4, feedback_every_n=1))  # type: ignore[operator]
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    frames = _send(ls, list(range(16)))
    delivered = ls.received("h3")
    assert sorted(f[14:] for f in delivered) == sorted(f[14:] for f in frames.values())
    assert _feedback_psns(ls) == [0, 4, 8, 12]


def test_n_of_1_samples_every_packet_as_before(leaf_spine_factory: object) -> None:
    written = leaf_spine_factory(Options(int_sample_n=1))  # type: ignore[operator]
    default = leaf_spine_factory(Options())  # type: ignore[operator]
    for ls in (written, default):
        plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
        _send(ls, list(range(6)))
        assert len(ls.received("h3")) == 6
    assert _feedback_psns(written) == _feedback_psns(default) == list(range(6))


def test_reports_come_from_sampled_packets(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(  # type: ignore[operator]
        Options(int_sample_n=4, report_enabled=1, report_every_n=1)
    )
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    _send(ls, list(range(8)))
    pins = ls.fabric["L2"].wait_packet_ins(2)
    reps = [P.decode_report_payload(p.payload) for p in pins]
    assert sorted(int(r.bth_psn) for r in reps) == [0, 4]
    assert all(len(r.hops) == 3 and r.flow_src_addr == HOSTS["h1"].ip for r in reps)
    assert _feedback_psns(ls) == [0, 4]


def test_a_flow_is_sampled_again_once_it_has_gone_the_max_gap_without_a_sample(
    leaf_spine_factory: object,
) -> None:
    """The time floor: a flow's first packet, and the first packet after the gap, carry records
    whatever their PSN; in between only the PSN rule samples.  The gap is 1 s so that a burst
    on a real-time target (BMv2) stays well inside it."""
    gap = 1_000_000
    ls = leaf_spine_factory(  # type: ignore[operator]
        Options(int_sample_n=8, int_sample_max_gap_us=gap), first_leaf_only=True
    )
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    h1 = ls.hosts["h1"]

    def burst(psns: range) -> list[int]:
        frames = [ls.roce("h1", "h3", sport=SPORT, qp=QP, psn=p, ip_id=p + 1) for p in psns]
        ls.fabric.send_paced(h1.leaf, h1.port, frames, 0)
        return _sampled_psns(ls)

    # PSN 1 is no PSN sample (1 & 7 != 0) but the flow's first packet; 8 and 16 by PSN
    assert burst(range(1, 17)) == [1, 8, 16]
    ls.fabric.advance_us(2 * gap)
    # 17 after the gap; 18..23 neither (the floor restarted at 17)
    assert burst(range(17, 24)) == [17]
    ls.fabric.advance_us(2 * gap)
    assert burst(range(24, 26)) == [24]  # a PSN sample after the gap: once, as either


def test_without_a_max_gap_only_the_psn_samples(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(int_sample_n=8), first_leaf_only=True)  # type: ignore[operator]
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    h1 = ls.hosts["h1"]
    frames = [ls.roce("h1", "h3", sport=SPORT, qp=QP, psn=p, ip_id=p + 1) for p in range(1, 17)]
    ls.fabric.send_paced(h1.leaf, h1.port, frames, 0)
    assert _sampled_psns(ls) == [8, 16]
