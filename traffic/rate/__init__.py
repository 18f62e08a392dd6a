"""Per-flow rate algorithms (DCQCN, ICE) as pure classes: no clock, no I/O, no threads.

Shared by the hosts (``traffic/agent.py``), the experiment runner and the fluid simulator.
Algorithms and parameters: ``traffic/README.md``.
"""

from __future__ import annotations

from typing import Literal

from icefabric.traffic.rate.base import HopSample, RateControl
from icefabric.traffic.rate.dcqcn import DCQCN_REFERENCE_BPS, Dcqcn, DcqcnParams
from icefabric.traffic.rate.ice import ICE_REFERENCE_BPS, IceParams, IceRate

RateKind = Literal["dcqcn", "ice"]
RATE_KINDS: tuple[RateKind, ...] = ("dcqcn", "ice")


def make_rate_control(
    kind: str,
    line_rate_bps: float,
    *,
    base_rtt_us: float | None = None,
    dcqcn: DcqcnParams | None = None,
    ice: IceParams | None = None,
) -> RateControl:
    """A fresh rate controller of ``kind`` with its defaults scaled to ``line_rate_bps``.

    ``dcqcn`` / ``ice`` replace the reference defaults before scaling; ``base_rtt_us`` sets
    ICE's T directly (the fabric's base RTT at this line rate).
    """
    if kind == "dcqcn":
        return Dcqcn((dcqcn or DcqcnParams()).scaled(line_rate_bps))
    if kind == "ice":
        return IceRate((ice or IceParams()).scaled(line_rate_bps, base_rtt_us))
    raise ValueError(f"make_rate_control: unknown kind {kind!r} (expected one of {RATE_KINDS})")


__all__ = [
    "DCQCN_REFERENCE_BPS",
    "ICE_REFERENCE_BPS",
    "RATE_KINDS",
    "Dcqcn",
    "DcqcnParams",
    "HopSample",
    "IceParams",
    "IceRate",
    "RateControl",
    "RateKind",
    "make_rate_control",
]
