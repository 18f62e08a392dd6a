"""An experiment as data: what ``experiment/config.py`` builds from an experiment file
(topology, job, modes, seed, rates, limits, ICE's knobs, background flows, a link going down) and
the topology a run uses. The file format and its validation are ``experiment/config.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefabric.control.ccl.job import JobSpec
from icefabric.topo.spec import SpecError, TopologySpec
from icefabric.traffic.modes import MODES

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("virtual", "mininet")
TARGETS = ("embedded", "bmv2")


class ExperimentError(SpecError):
    """An experiment file failed validation; ``errors`` lists every problem."""


def packet_modes() -> tuple[str, ...]:
    """The modes the packet-level engines carry (the others are simulator-only: ``icectl sim``)."""
    return tuple(n for n, m in MODES.items() if "virtual" in m.engines or "mininet" in m.engines)


@dataclass(frozen=True, slots=True, kw_only=True)
class Background:
    """One flow the controller does not know of (storage-like traffic from other hosts)."""

    src: str
    dst: str
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkDown:
    """A fabric link taken down mid-run (times at the spec's rates; the engine runs x 1/scale)."""

    a: str
    b: str
    at_us: float
    drain_us: float = 0.0


MAX_BACKGROUND = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """How the topology's link rates map onto the run."""

    scale: float = 1e-3
    mtu_bytes: int = 4096
    link_delay_us: float = 1.0  # one-way delay of every link at the spec's rates (x 1/scale)
    # the controller's caps reach the agents this long after it computed them, at the spec's
    # rates (x 1/scale): the agent channel's TCP/Unix-socket hop plus the agent applying them
    control_delay_us: float = 100.0

    def run_control_delay_us(self) -> float:
        """The control delay as the engines run it (x 1/scale)."""
        return self.control_delay_us / self.scale


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """When a mode gives up (it then fails with the reason)."""

    virtual_ms: float = 60000.0
    wall_s: float = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class IceKnobs:
    """ICE's end-side rule as the run uses it (``IceParams`` fields; traffic/README.md)."""

    anchor: bool = True  # capped flows send at their caps until an unforeseen queue
    derived_ai: bool = True  # a capped flow's W_AI = (1 - eta) x cap
    eta: float = 0.95
    # INT records and feedback on 1 in sample_n packets of a flow (a power of two: ice.p4
    # samples on the PSN at the first leaf) and on any packet of a flow that has gone
    # sample_gap base RTTs without a sample (0: no such floor; traffic/README.md)
    sample_n: int = 32
    sample_gap: float = 0.0
    # each host's start table goes with its caps: a flow no plan covers starts at what the
    # caps leave on its candidate paths, not at the line rate (control/congestion/starts.py)
    starts: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain data (results.json)."""
        return {
            "anchor": self.anchor,
            "derived_ai": self.derived_ai,
            "eta": self.eta,
            "sample_n": self.sample_n,
            "sample_gap": self.sample_gap,
            "starts": self.starts,
        }


_DEF_RATES = Rates()
_DEF_LIMITS = Limits()


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """A validated experiment: everything a run needs, and the plain data it came from."""

    name: str
    description: str
    source: str
    topology: TopologySpec
    job: JobSpec
    slices: int
    modes: tuple[str, ...]
    seed: int
    rates: Rates
    engine: str
    target: str
    limits: Limits
    data: Mapping[str, Any]  # the file's content, for results.json
    ice: IceKnobs = IceKnobs()

    @property
    def phases_known_ahead(self) -> bool:
        """Whether the controller knows the job's phases before they start (a job file or a
        collective: the scheduler submitted it), or learns each as it starts (a job read from
        an NCCL log: the CCL is only watched)."""
        w = self.data.get("workload")
        return not (isinstance(w, Mapping) and "nccl_log" in w)

    background: tuple[Background, ...] = ()
    link_down: LinkDown | None = None
    # more jobs sharing the fabric (config key ``jobs``): (job, slices) each, started with ``job``
    more_jobs: tuple[tuple[JobSpec, int], ...] = ()
    # arrival of the jobs that do not start with ``job`` (``start_us`` of a jobs entry): job
    # name -> the spec's microseconds
    job_starts: Mapping[str, float] = field(default_factory=dict)

    @property
    def jobs(self) -> tuple[tuple[JobSpec, int], ...]:
        """Every job of the experiment with its slices, ``job`` first."""
        return ((self.job, self.slices), *self.more_jobs)

    def to_dict(self) -> dict[str, Any]:
        """The normalised config (what results.json records)."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "topology": self.topology.to_dict(),
            "job": self.job.to_dict(),
            "slices": self.slices,
            "modes": list(self.modes),
            "seed": self.seed,
            "rates": {
                "scale": self.rates.scale,
                "mtu_bytes": self.rates.mtu_bytes,
                "link_delay_us": self.rates.link_delay_us,
                "control_delay_us": self.rates.control_delay_us,
            },
            "engine": self.engine,
            "target": self.target,
            "limits": {"virtual_ms": self.limits.virtual_ms, "wall_s": self.limits.wall_s},
            "ice": self.ice.to_dict(),
            "background": [{"src": b.src, "dst": b.dst, "bytes": b.bytes} for b in self.background],
            **(
                {
                    "jobs": [
                        {
                            "job": j.to_dict(),
                            "slices": k,
                            **(
                                {"start_us": self.job_starts[j.name]}
                                if j.name in self.job_starts
                                else {}
                            ),
                        }
                        for j, k in self.more_jobs
                    ]
                }
                if self.more_jobs
                else {}
            ),
            "link_down": None
            if self.link_down is None
            else {
                "a": self.link_down.a,
                "b": self.link_down.b,
                "at_us": self.link_down.at_us,
                "drain_us": self.link_down.drain_us,
            },
        }


def run_topology(exp: Experiment) -> TopologySpec:
    """The topology as an engine runs it: links without a delay get ``rates.link_delay_us``,
    and every delay is stretched by 1/scale like the other time constants (1 us at 100 Gbit/s
    becomes 1 ms at 100 Mbit/s), so a path holds as many packets in flight as at full rate."""
    from dataclasses import replace

    spec = exp.topology
    k = 1.0 / exp.rates.scale
    return replace(
        spec,
        defaults=replace(spec.defaults, link_delay_us=exp.rates.link_delay_us * k),
        links=tuple(
            replace(ln, delay_us=ln.delay_us * k) if ln.delay_us is not None else ln
            for ln in spec.links
        ),
    )
