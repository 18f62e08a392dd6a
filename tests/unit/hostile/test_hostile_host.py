"""The hostile tier for a host (issue 26 item 11): unsolicited RoCEv2 frames must not grow its
receive state without bound; the oldest flows are evicted and counted, a live flow keeps its
statistics."""

from __future__ import annotations

import random

from icefabric.traffic.agent import Agent
from icefabric.traffic.endpoint import Endpoint
from icefabric.traffic.roce import OP_SEND_MIDDLE, FrameBuilder

GW = "02:1c:e0:00:00:01"
SEED = 11


def frames_from(rng: random.Random, n: int, dst_ip: str) -> list[bytes]:
    out = []
    for _ in range(n):
        b = FrameBuilder(
            src_mac="02:00:00:00:00:09",
            dst_mac="02:00:00:00:00:02",
            src_ip=f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            dst_ip=dst_ip,
            sport=rng.randrange(1, 1 << 16),
            qp=rng.randrange(1 << 24),
            max_payload=64,
        )
        out.append(b.frame(OP_SEND_MIDDLE, rng.randrange(1 << 24), 64))
    return out


def test_unsolicited_frames_cannot_grow_the_receive_state(monkeypatch: object) -> None:
    import icefabric.traffic.endpoint as endpoint

    bound = 256
    monkeypatch.setattr(endpoint, "MAX_RX_FLOWS", bound)  # type: ignore[attr-defined]
    ep = Endpoint(
        Agent("h2", "10.0.2.1", line_rate_bps=1e9, kind="dcqcn", seed=1),
        mac="02:00:00:00:00:02",
        gateway_mac=GW,
    )
    rng = random.Random(SEED)
    live = FrameBuilder(
        src_mac="02:00:00:00:00:01",
        dst_mac="02:00:00:00:00:02",
        src_ip="10.0.1.1",
        dst_ip="10.0.2.1",
        sport=49152,
        qp=7,
        max_payload=64,
    )
    psn = 0
    for i, f in enumerate(frames_from(rng, 1829, "10.0.2.1")):
        ep.receive(float(i), f)
        if i % 50 == 0:  # a flow that keeps talking is never the oldest
            ep.receive(float(i), live.frame(OP_SEND_MIDDLE, psn, 64))
            psn += 1
    assert len(ep.rx) == bound
    assert ep.counters.rx_evicted == 1829 + 1 - bound
    (kept,) = [s for s in ep.rx_stats().values() if s.packets_received > 1]
    assert kept.packets_received == 37  # every frame of the live flow was counted
