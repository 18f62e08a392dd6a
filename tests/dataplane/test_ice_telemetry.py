"""INT, feedback to the sender and telemetry reports to the controller."""

from __future__ import annotations

import itertools

import pytest
from leaf_spine import (
    HOSTS,
    LINK_RATE_MBPS,
    SWITCH_IDS,
    SWITCH_MACS,
    TAG_L1_L2_S2,
    UPLINK,
    LeafSpine,
    Options,
    plan_flow,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

SPORT, QP = 51000, 0x3456
# Drain rate of the rate-limited port: slow enough that a burst from a Python sender on a busy
# host still arrives faster than it drains on a real-time target.
LIMITED_PPS = 200


def _feedbacks(ls: LeafSpine) -> list[P.IceFeedback]:
    out = []
    for frame in ls.received("h1"):
        assert UDP in Ether(frame), (
            f"h1 got something other than feedback: {Ether(frame).summary()}"
        )
        out.append(P.decode_feedback(frame))
    return out


def _burst(ls: LeafSpine, n: int, *, ecn: int = 2) -> None:
    """n packets of the planned flow sent back to back, then the queues drained."""
    frames = [
        ls.roce("h1", "h3", sport=SPORT, qp=QP, psn=psn, ip_id=psn + 1, ecn=ecn) for psn in range(n)
    ]
    for frame in frames:  # built first: back to back even on a real-time target
        ls.send("h1", frame)
    ls.fabric.run()
    for _ in range(n):
        ls.fabric.advance_us(1_000_000 // LIMITED_PPS)


def test_feedback_reaches_the_source_with_every_hops_record(fabric: LeafSpine) -> None:
    plan_flow(fabric, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    frame = fabric.roce("h1", "h3", sport=SPORT, qp=QP, psn=77)
    fabric.send("h1", frame)
    fabric.fabric.run()

    assert [f[14:] for f in fabric.received("h3")] == [frame[14:]]
    raw = fabric.received("h1")
    assert len(raw) == 1
    pkt = Ether(raw[0])
    assert pkt[Ether].dst == HOSTS["h1"].mac and pkt[Ether].src == SWITCH_MACS["L1"]
    assert pkt[IP].src == HOSTS["h3"].ip and pkt[IP].dst == HOSTS["h1"].ip
    assert pkt[IP].tos >> 2 == P.ICE_FEEDBACK_DSCP
    assert pkt[UDP].dport == P.UDP_PORT_ICE_FEEDBACK
    # lengths are consistent and the data payload was cut off
    n_bytes = 20 + 8 + P.ICE_FEEDBACK_BYTES + 3 * P.INT_HOP_BYTES
    assert pkt[IP].len == n_bytes and len(raw[0]) == 14 + n_bytes
    fixed = IP(bytes(pkt[IP]))
    del fixed.chksum
    assert IP(bytes(fixed)).chksum == pkt[IP].chksum

    fb = pkt[P.IceFeedback]
    assert fb.hop_count == 3
    assert (fb.flow_src_addr, fb.flow_dst_addr) == (HOSTS["h1"].ip, HOSTS["h3"].ip)
    assert (fb.flow_src_port, fb.flow_dst_port, fb.flow_dst_qp) == (SPORT, P.UDP_PORT_ROCEV2, QP)
    assert fb.bth_psn == 77 and fb.path_tag == TAG_L1_L2_S2
    assert fb.path_kind == P.PATH_KIND_PLANNED and fb.switch_id == SWITCH_IDS["L2"]
    last, spine, first = fb.hops
    assert [h.switch_id for h in fb.hops] == [SWITCH_IDS["L2"], SWITCH_IDS["S2"], SWITCH_IDS["L1"]]
    assert (first.ingress_port, first.egress_port) == (HOSTS["h1"].port, UPLINK["S2"])
    assert (spine.ingress_port, spine.egress_port) == (1, 2)
    assert (last.ingress_port, last.egress_port) == (UPLINK["S2"], HOSTS["h3"].port)
    for hop in fb.hops:
        assert hop.link_rate_mbps == LINK_RATE_MBPS
    assert first.tx_bytes >= len(frame) and spine.tx_bytes >= len(frame) + P.ICE_SHIM_BYTES
    # Timestamps are per switch: separate switches have separate clocks (BMv2 processes count
    # from their own start, real switches are not synchronised), so only a hop's own earlier
    # records are comparable, never another hop's.
    assert all(hop.egress_ts > 0 for hop in fb.hops)

    # The last hop's own record comes from its host port's registers, which the copy may read
    # before the data packet itself left: the next feedback shows the first packet's bytes.
    fabric.send("h1", fabric.roce("h1", "h3", sport=SPORT, qp=QP, psn=78))
    fabric.fabric.run()
    (second,) = _feedbacks(fabric)
    assert second.hops[0].tx_bytes >= len(frame)
    assert second.hops[2].tx_bytes >= 2 * len(frame)
    for i, (before, after) in enumerate(zip(fb.hops, second.hops, strict=True)):
        assert after.switch_id == before.switch_id
        assert after.egress_ts >= before.egress_ts, "a switch's clock went backwards"
        # the last hop (i == 0) may read its counter before or after its data packet left
        assert after.tx_bytes >= before.tx_bytes if i == 0 else after.tx_bytes > before.tx_bytes


def test_feedback_every_nth_packet(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(feedback_every_n=3))  # type: ignore[operator]
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    _burst(ls, 9)
    fbs = _feedbacks(ls)
    assert [fb.bth_psn for fb in fbs] == [2, 5, 8]
    assert len(ls.received("h3")) == 9


def test_no_int_no_feedback(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(int_kinds=()))  # type: ignore[operator]
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    _burst(ls, 3)
    assert ls.received("h1") == []
    assert len(ls.received("h3")) == 3


def test_int_queue_depth_grows_on_a_rate_limited_port(fabric: LeafSpine) -> None:
    plan_flow(fabric, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    # calm: 10 ms apart (back to back, a real-time switch's egress pipeline may queue a burst)
    calm_frames = [fabric.roce("h1", "h3", sport=SPORT, qp=QP, psn=p) for p in range(6)]
    fabric.fabric.send_paced(HOSTS["h1"].leaf, HOSTS["h1"].port, calm_frames, 10_000)
    calm = [fb.hops[2].enq_qdepth for fb in sorted(_feedbacks(fabric), key=lambda f: f.bth_psn)]
    if fabric.fabric.kind == "embedded":
        assert calm == [0] * 6
    else:  # a loaded host can hold a real-time switch's egress thread up for a packet time
        assert len(calm) == 6 and max(calm) <= 1, calm
    fabric.received("h3")

    fabric.fabric.set_queue_rate("L1", UPLINK["S2"], pps=LIMITED_PPS)
    _burst(fabric, 6)
    fbs = sorted(_feedbacks(fabric), key=lambda f: f.bth_psn)
    assert len(fbs) == 6
    depths = [fb.hops[2].enq_qdepth for fb in fbs]  # L1's record: the limited port
    if fabric.fabric.kind == "embedded":  # the manual clock: the burst is truly back to back
        assert all(a <= b for a, b in itertools.pairwise(depths)), depths
        assert depths[-1] >= 3, depths
    else:  # real time: a pause of the sender lets the queue drain a little meanwhile
        assert max(depths) >= 3, depths
    assert all(fb.hops[2].switch_id == SWITCH_IDS["L1"] for fb in fbs)
    # the spine's queue stayed empty (on a real-time target: at most the packet time a loaded
    # host may hold its egress thread up, as in the calm phase; far below L1's queue)
    spine = [fb.hops[1].enq_qdepth for fb in fbs]
    if fabric.fabric.kind == "embedded":
        assert spine == [0] * 6, (spine, depths)
    else:
        assert max(spine) <= 1 < max(depths), (spine, depths)


def test_sampled_reports_reach_the_controller(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(Options(report_enabled=1, report_every_n=2))  # type: ignore[operator]
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    _burst(ls, 4)
    pins = ls.fabric["L2"].wait_packet_ins(2)
    assert len(pins) == 2
    for pin in pins:
        assert pin.metadata["reason"] == P.PUNT_REASON_TELEMETRY
        assert pin.metadata["egress_port"] == HOSTS["h3"].port
        assert pin.metadata["ingress_port"] == UPLINK["S2"]
        rep = P.decode_report_payload(pin.payload)
        assert rep.reason == P.REPORT_REASON_SAMPLED
        assert rep.switch_id == SWITCH_IDS["L2"] and rep.path_tag == TAG_L1_L2_S2
        assert (rep.flow_src_addr, rep.flow_dst_qp) == (HOSTS["h1"].ip, QP)
        assert [h.switch_id for h in rep.hops] == [
            SWITCH_IDS["L2"],
            SWITCH_IDS["S2"],
            SWITCH_IDS["L1"],
        ]
    assert sorted(P.decode_report_payload(p.payload).bth_psn for p in pins) == [1, 3]
    # feedback still went to the sender for every packet
    assert len(_feedbacks(ls)) == 4
    assert ls.fabric["L1"].packet_ins() == []


def test_queue_alarm_reports_every_deep_queue(leaf_spine_factory: object) -> None:
    ls = leaf_spine_factory(  # type: ignore[operator]
        Options(report_enabled=1, report_every_n=0, report_qdepth_threshold=2)
    )
    plan_flow(ls, "h1", "h3", sport=SPORT, qp=QP, tag=TAG_L1_L2_S2)
    ls.fabric.set_queue_rate("L1", UPLINK["S2"], pps=LIMITED_PPS)
    _burst(ls, 7)
    fbs = _feedbacks(ls)
    deep = sorted(fb.bth_psn for fb in fbs if max(h.enq_qdepth for h in fb.hops) > 2)
    assert deep, "the limited port never queued more than 2 packets"
    pins = ls.fabric["L2"].wait_packet_ins(len(deep))
    reps = [P.decode_report_payload(p.payload) for p in pins]
    assert sorted(r.bth_psn for r in reps) == deep
    assert all(r.reason == P.REPORT_REASON_QUEUE_ALARM for r in reps)


def test_feedback_in_the_other_direction(fabric: LeafSpine) -> None:
    frame = fabric.roce("h3", "h1", sport=SPORT, qp=QP, psn=3)
    fabric.send("h3", frame)
    fabric.fabric.run()
    assert [f[14:] for f in fabric.received("h1")] == [frame[14:]]
    (raw,) = fabric.received("h3")
    fb = P.decode_feedback(raw)
    assert Ether(raw)[IP].dst == HOSTS["h3"].ip
    assert fb.switch_id == SWITCH_IDS["L1"] and fb.flow_src_addr == HOSTS["h3"].ip
    assert [h.switch_id for h in fb.hops][0::2] == [SWITCH_IDS["L1"], SWITCH_IDS["L2"]]


def test_unplanned_flow_feedback_names_its_flowlet_path(fabric: LeafSpine) -> None:
    fabric.send("h1", fabric.roce("h1", "h3", sport=SPORT + 1, qp=QP))
    fabric.fabric.run()
    (fb,) = _feedbacks(fabric)
    assert fb.path_kind == P.PATH_KIND_FLOWLET
    spine = fb.hops[1].switch_id
    expected_tag = {SWITCH_IDS["S1"]: 0x121, SWITCH_IDS["S2"]: 0x122}[spine]
    assert fb.path_tag == expected_tag
