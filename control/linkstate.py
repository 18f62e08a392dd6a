"""What the link monitor (``linkmon.py``) knows: its events and the per-link, per-direction state
it evaluates every interval, as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, kw_only=True)
class LinkEvent:
    """A link declared down or up by the monitor, and what the controller did about it."""

    link: str  # "leaf1:3-spine1:1"
    lid: int  # directed id a -> b (even)
    a: str
    b: str
    kind: str  # "down" | "up"
    at: float  # monitor clock when declared
    wall: float  # time.time() when declared
    # down: last probe seen (or probing began, if none came since) -> declared;
    # up: first probe back -> declared
    detection_ms: float | None
    reason: str  # which direction missed, or "probes back in both directions"
    moved: int | None = None
    plan_ms: float | None = None
    install_ms: float | None = None  # planned flows (flow_path) written
    base_ms: float | None = None  # candidate groups and routes rewritten after that
    paths_installed_at: float | None = None  # monitor clock when the moved flows were installed
    done_at: float | None = None  # monitor clock when the whole change was installed
    note: str | None = None  # why nothing was changed, or the error

    @property
    def total_ms(self) -> float | None:
        """Declared -> new paths installed (the controller's reaction, queueing included)."""
        if self.paths_installed_at is None:
            return None
        return (self.paths_installed_at - self.at) * 1e3

    def to_dict(self) -> dict[str, Any]:
        """Plain data for icectl."""
        return {
            "link": self.link,
            "kind": self.kind,
            "time": self.wall,
            "detection_ms": self.detection_ms,
            "reason": self.reason,
            "moved": self.moved,
            "plan_ms": self.plan_ms,
            "install_ms": self.install_ms,
            "base_ms": self.base_ms,
            "reaction_ms": self.total_ms,
            "note": self.note,
        }


@dataclass(slots=True)
class DirectionState:
    """One direction of a link as the probes see it."""

    lid: int
    name: str  # "leaf1:3->spine1:1"
    src: str
    dst: str
    seen: bool = False  # a probe arrived since the last tick
    round_count: int = 0  # probes of this direction since the last tick
    missed: int = 0  # consecutive intervals without a probe
    streak: int = 0  # consecutive intervals with probes
    last_seen: float | None = None
    probed_since: float | None = None  # probes expected since (both ends reachable); None: frozen
    first_back: float | None = None  # first probe of the current streak
    received: int = 0
    rx_port: int = 0  # the receiving switch's port
    rx_window: list[int | None] = field(default_factory=list)  # rx counter per missed round

    def seen_while_probed(self) -> bool:
        """Whether a probe arrived since its probes were last (re)started."""
        return self.last_seen is not None and (
            self.probed_since is None or self.last_seen >= self.probed_since
        )

    def alive_since(self) -> float | None:
        """The last sign of life: the last probe, or when probing began if later."""
        times = [t for t in (self.last_seen, self.probed_since) if t is not None]
        return max(times) if times else None

    def to_status(self, now: float) -> dict[str, Any]:
        """This direction as icectl links shows it."""
        return {
            "direction": self.name,
            "last_seen_ms": None if self.last_seen is None else (now - self.last_seen) * 1e3,
            "missed": self.missed,
            "received": self.received,
        }


@dataclass(slots=True)
class LinkState:
    """One physical link: both directions, the declared state, its events."""

    name: str
    lid: int
    a: str
    a_port: int
    b: str
    b_port: int
    dirs: tuple[DirectionState, DirectionState]
    state: str = "up"  # "up" | "down"
    frozen: bool = False  # an end switch is unreachable: no evidence either way
    since: float = 0.0
    events: int = 0

    def to_status(self, now: float) -> dict[str, Any]:
        """This link as icectl links shows it (``now``: the monitor's clock)."""
        seen = [d.last_seen for d in self.dirs if d.last_seen is not None]
        # the staler direction decides: a link is as alive as its worse half
        ago = (now - min(seen)) * 1e3 if len(seen) == len(self.dirs) else None
        return {
            "link": self.name,
            "a": self.a,
            "a_port": self.a_port,
            "b": self.b,
            "b_port": self.b_port,
            "state": "unknown" if self.frozen else self.state,
            "last_seen_ms": ago,
            "directions": [d.to_status(now) for d in self.dirs],
            "events": self.events,
        }


@dataclass(slots=True)
class Miswire:
    """A probe that does not match the topology: who sent it, where it should have come from."""

    seen: str
    expected: str
    count: int = 0
    first: float = 0.0
    last: float = 0.0

    def to_status(self, now: float) -> dict[str, Any]:
        """This miswiring as icectl links shows it."""
        return {
            "seen": self.seen,
            "expected": self.expected,
            "count": self.count,
            "last_ms": (now - self.last) * 1e3,
        }


@dataclass(slots=True)
class ProbeCounters:
    """What the monitor has done since it started (icectl links, /metrics)."""

    ticks: int = 0
    sent: int = 0
    send_errors: int = 0
    received: int = 0
    undecodable: int = 0
    late_ticks: int = 0  # ticks that started more than one interval late (overloaded host)
    stalled: int = 0  # rounds not counted: no probe came back at all, or the round ran late
    alive_by_traffic: int = 0  # directions kept up: probes lost, but data kept arriving


@dataclass(slots=True)
class MonitorOptions:
    """The probe interval, the misses that declare a link down, the probes' LLDP TTL."""

    interval_s: float
    misses: int
    ttl_s: int


def disabled_status() -> dict[str, Any]:
    """What status shows when probing is off (--probe-interval 0, or a standby controller)."""
    return {"enabled": False, "links": [], "down": [], "events": [], "miswired": []}
