"""What the agent client and server tests share: two flow keys, a fast backoff, polling."""

from __future__ import annotations

from collections.abc import Callable

from icefabric.control.agents.client import Backoff
from icefabric.control.flowkey import FlowKey
from icefabric.waiting import poll_until

KEY1 = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.2.1", udp_sport=50001, dst_qp=0x101)
KEY2 = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.3.1", udp_sport=50002, dst_qp=0x102)
FAST = Backoff(initial_s=0.01, max_s=0.05)


def until(cond: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll ``cond`` every 5 ms until it holds or ``timeout`` passes; whether it holds."""
    return poll_until(cond, timeout, 0.005)
