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
# The registry of end-host rate algorithms: a new one is one class (with ``NEEDS_INT``: whether
# it reads INT hop records, which decides whether a mode that uses it turns INT on) + one line.
RATE_CLASSES: dict[str, type[Dcqcn] | type[IceRate]] = {"dcqcn": Dcqcn, "ice": IceRate}


def rate_needs_int(kind: str) -> bool:
    """Whether the rate algorithm ``kind`` reads INT (``none``: no end-host control, no INT)."""
    if kind == "none":
        return False
    try:
        return RATE_CLASSES[kind].NEEDS_INT
    except KeyError:
        raise ValueError(
            f"rate algorithm: expected one of {', '.join(RATE_CLASSES)} or none, got {kind!r}"
        ) from None


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
    "RATE_CLASSES",
    "RATE_KINDS",
    "Dcqcn",
    "DcqcnParams",
    "HopSample",
    "IceParams",
    "IceRate",
    "RateControl",
    "RateKind",
    "make_rate_control",
    "rate_needs_int",
]
