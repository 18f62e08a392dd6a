"""Per-flow rate algorithms (DCQCN, ICE) as pure classes: no clock, no I/O, no threads.

Shared by the hosts (``traffic/agent.py``), the experiment runner and the fluid simulator.
Algorithms and parameters: ``traffic/README.md``.
"""

from __future__ import annotations

from icefabric.traffic.rate.base import HopSample, RateAlgorithm, RateControl
from icefabric.traffic.rate.dcqcn import DCQCN_REFERENCE_BPS, Dcqcn, DcqcnParams
from icefabric.traffic.rate.ice import ICE_REFERENCE_BPS, IceParams, IceRate

# The registry of end-host rate algorithms. A new one is one class (the RateControl methods,
# ``NEEDS_INT``: whether it reads INT hop records, which decides whether a mode that uses it turns
# INT on, and ``for_line``: a fresh one per flow) + one line here; the hosts, both experiment
# engines and the simulator then run it (traffic/README.md, "Adding a rate algorithm").
RATE_CLASSES: dict[str, type[RateAlgorithm]] = {"dcqcn": Dcqcn, "ice": IceRate}


def rate_kinds() -> tuple[str, ...]:
    """The registered rate algorithms' names."""
    return tuple(RATE_CLASSES)


def _algorithm(kind: str) -> type[RateAlgorithm]:
    try:
        return RATE_CLASSES[kind]
    except KeyError:
        raise ValueError(
            f"rate algorithm: unknown kind {kind!r} (expected one of "
            f"{', '.join(RATE_CLASSES)} or none)"
        ) from None


def rate_needs_int(kind: str) -> bool:
    """Whether the rate algorithm ``kind`` reads INT (``none``: no end-host control, no INT)."""
    return False if kind == "none" else _algorithm(kind).NEEDS_INT


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
    if kind == "dcqcn" and dcqcn is not None:
        return Dcqcn(dcqcn.scaled(line_rate_bps))
    if kind == "ice" and ice is not None:
        return IceRate(ice.scaled(line_rate_bps, base_rtt_us))
    return _algorithm(kind).for_line(line_rate_bps, base_rtt_us=base_rtt_us)


__all__ = [
    "DCQCN_REFERENCE_BPS",
    "ICE_REFERENCE_BPS",
    "RATE_CLASSES",
    "Dcqcn",
    "DcqcnParams",
    "HopSample",
    "IceParams",
    "IceRate",
    "RateAlgorithm",
    "RateControl",
    "make_rate_control",
    "rate_kinds",
    "rate_needs_int",
]
