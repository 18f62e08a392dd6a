"""One definition of a mode, shared by the experiment engines, the simulator and the matrix.

A mode is what a fabric + its hosts do with a job's traffic:

* **balance**: how a connection's packets are put on paths: ``ecmp`` (ice.p4's hash of the
  5-tuple + QP), ``eecmp`` (E-ECMP, Meta: ``qps`` QPs per connection, each message striped over
  them, each QP with its own UDP source port and QP number so the hash spreads them), ``planned``
  (the controller's paths, ICE), ``flowlet`` (ice.p4's flowlet switching: a new bucket after an
  idle gap, LetFlow / CONGA family), ``spray`` (per-packet over every uplink, Spectrum-X / Ultra
  Ethernet, with NICs that reorder);
* **rate**: the end-host rate algorithm (``icefabric.traffic.rate``: ``dcqcn``, ``ice`` = ICE's
  HPCC-style INT control, shown as "hpcc" in peer names) or ``none`` (line rate);
* **caps**: the controller's max-min fair caps (ICE's global congestion control);
* **pfc**: lossless with PFC pauses (the simulator models it; the packet level has no PFC);
* **INT** is not a knob: it is on exactly when the rate algorithm declares it reads INT
  (``NEEDS_INT`` on its class).

A new mode is one :class:`Mode` line in :data:`MODES`. A new rate algorithm is one class in
``traffic/rate`` and one line in ``RATE_CLASSES``: every registered algorithm ``R`` also runs as
the composed modes ``ecmp+R``, ``flowlet+R``, ``spray+R`` and ``planned+R`` (no caps) without a
line here (:func:`get_mode`). ``engines`` says which engines can carry a mode (``sim``: the fluid
simulator; ``virtual`` / ``mininet``: the packet-level engines).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from icefabric.traffic.rate import RATE_CLASSES, rate_kinds, rate_needs_int

BALANCES = ("ecmp", "eecmp", "planned", "flowlet", "spray")
ENGINES = ("sim", "virtual", "mininet")
PACKET = ("sim", "virtual", "mininet")  # every engine
SIM_ONLY = ("sim",)


class ModeError(ValueError):
    """An unknown mode name or an inconsistent mode (the message names it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Mode:
    """Load balancing + end-host control + caps (+ PFC); INT follows from the rate algorithm."""

    name: str
    balance: str
    rate: str
    caps: bool = False
    pfc: bool = False
    qps: int = 1  # QPs per connection (E-ECMP's k)
    peer: bool = True  # something a user could deploy instead of ICE (False: ICE and its ablations)
    engines: tuple[str, ...] = PACKET
    about: str = ""

    def __post_init__(self) -> None:
        if self.balance not in BALANCES:
            raise ModeError(
                f"mode {self.name}: balance: expected one of {BALANCES}, got {self.balance!r}"
            )
        if self.rate != "none" and self.rate not in RATE_CLASSES:  # the registry as it is now
            raise ModeError(
                f"mode {self.name}: rate: expected one of {(*rate_kinds(), 'none')}, "
                f"got {self.rate!r}"
            )
        if not 1 <= self.qps <= 64 or (self.qps > 1) != (self.balance == "eecmp"):
            raise ModeError(
                f"mode {self.name}: qps: expected > 1 exactly for eecmp (1..64), got {self.qps}"
            )
        if self.caps and self.balance != "planned":
            raise ModeError(f"mode {self.name}: caps need planned paths (the controller's plan)")
        bad = [e for e in self.engines if e not in ENGINES]
        if bad or not self.engines:
            raise ModeError(
                f"mode {self.name}: engines: expected some of {ENGINES}, got {self.engines}"
            )

    @property
    def int_on(self) -> bool:
        """Whether the fabric carries INT for this mode's flows (the rate algorithm reads it)."""
        return rate_needs_int(self.rate)

    @property
    def planned(self) -> bool:
        """The job's flows get the controller's planned paths installed."""
        return self.balance == "planned"

    @property
    def lb_mode(self) -> str:
        """ice.p4's load-balancing mode (``control/fabric.py``): ``ice`` (planned, else
        flowlet) for planned and flowlet, ``ecmp`` for (E-)ECMP, ``spray`` for spraying."""
        if self.balance in ("planned", "flowlet"):
            return "ice"
        return "spray" if self.balance == "spray" else "ecmp"

    @property
    def sim_routing(self) -> str:
        """The simulator's routing (``sim/network.py``): E-ECMP is ECMP over its QPs."""
        return {"ecmp": "ecmp", "eecmp": "ecmp", "planned": "ice"}.get(self.balance, self.balance)


def _m(**kw: object) -> Mode:
    return Mode(**kw)  # type: ignore[arg-type]


MODES: Mapping[str, Mode] = {
    m.name: m
    for m in (
        _m(
            name="ecmp+dcqcn",
            balance="ecmp",
            rate="dcqcn",
            about="RoCEv2 as shipped: ice.p4's ECMP hash, ECN marking, DCQCN senders",
        ),
        _m(
            name="ice",
            balance="planned",
            rate="ice",
            caps=True,
            peer=False,
            about="ICE: planned paths, INT-driven ICE senders, controller caps",
        ),
        _m(
            name="ice-paths",
            balance="planned",
            rate="dcqcn",
            peer=False,
            about="ablation: planned paths, DCQCN senders",
        ),
        _m(
            name="ice-nocaps",
            balance="planned",
            rate="ice",
            peer=False,
            about="ablation: planned paths, ICE senders, no controller caps",
        ),
        _m(
            name="flowlet+dcqcn",
            balance="flowlet",
            rate="dcqcn",
            about="flowlet switching (unplanned), DCQCN senders",
        ),
        _m(
            name="ecmp+hpcc",
            balance="ecmp",
            rate="ice",
            about="ICE's end-side control alone (HPCC-style) on ECMP paths, no planner, no caps",
        ),
        _m(
            name="flowlet+hpcc",
            balance="flowlet",
            rate="ice",
            about="flowlet switching (LetFlow / CONGA family) with HPCC-style senders",
        ),
        _m(
            name="ecmp+pfc",
            balance="ecmp",
            rate="none",
            pfc=True,
            engines=SIM_ONLY,
            about="Meta's production choice: ECMP, PFC lossless, no end-host control",
        ),
        _m(
            name="eecmp4+dcqcn",
            balance="eecmp",
            rate="dcqcn",
            qps=4,
            engines=SIM_ONLY,
            about="E-ECMP: 4 QPs per connection (own UDP sport + QP each), DCQCN",
        ),
        _m(
            name="eecmp16+dcqcn",
            balance="eecmp",
            rate="dcqcn",
            qps=16,
            engines=SIM_ONLY,
            about="E-ECMP: 16 QPs per connection, DCQCN",
        ),
        _m(
            name="eecmp4+hpcc",
            balance="eecmp",
            rate="ice",
            qps=4,
            engines=SIM_ONLY,
            about="E-ECMP: 4 QPs per connection, HPCC-style senders",
        ),
        _m(
            name="eecmp16+hpcc",
            balance="eecmp",
            rate="ice",
            qps=16,
            engines=SIM_ONLY,
            about="E-ECMP: 16 QPs per connection, HPCC-style senders",
        ),
        _m(
            name="spray+hpcc",
            balance="spray",
            rate="ice",
            engines=("sim", "virtual"),  # ice.p4's spray mode; the NICs reorder (endpoint.py)
            about="per-packet spraying over every uplink, reordering NICs, HPCC-style senders",
        ),
    )
}
DEFAULT_MODES = ("ecmp+dcqcn", "ice")


COMPOSED = ("ecmp", "flowlet", "spray", "planned")  # balances of the BALANCE+RATE modes


def get_mode(name: str) -> Mode:
    """The mode called ``name``: one of :data:`MODES`, else ``BALANCE+RATE`` for a balance of
    :data:`COMPOSED` and any registered rate algorithm (a one-line error otherwise)."""
    if name in MODES:
        return MODES[name]
    balance, _, rate = name.partition("+")
    if balance in COMPOSED and rate in RATE_CLASSES:
        return Mode(
            name=name,
            balance=balance,
            rate=rate,
            engines=("sim", "virtual") if balance == "spray" else PACKET,
            about=f"{balance} paths, {rate} senders (composed: traffic/modes.py get_mode)",
        )
    raise ModeError(
        f"mode: expected one of {', '.join(MODES)} or BALANCE+RATE ({'|'.join(COMPOSED)} + "
        f"{'|'.join(rate_kinds())}), got {name!r}"
    )


def modes_for(engine: str) -> tuple[str, ...]:
    """The names of the modes ``engine`` can carry."""
    return tuple(n for n, m in MODES.items() if engine in m.engines)
