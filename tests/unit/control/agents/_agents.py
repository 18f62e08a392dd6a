"""What the agent client and server tests share: two flow keys, a fast backoff, polling."""

from __future__ import annotations

import time
from collections.abc import Callable

from icefabric.control.agents.client import Backoff
from icefabric.control.agents.protocol import FlowKey

KEY1 = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.2.1", sport=50001, qp=0x101)
KEY2 = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.3.1", sport=50002, qp=0x102)
FAST = Backoff(initial_s=0.01, max_s=0.05)


def until(cond: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll ``cond`` every 5 ms until it holds or ``timeout`` passes; whether it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return cond()
