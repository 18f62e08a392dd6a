"""What a run measured, as data: per collective, per link, queues, pauses; JSON and PNG out."""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from icefabric.files import write_output
from icefabric.sim.config import SimConfig

# queue-depth histogram edges in bytes (fabric links, one sample per link per step)
QUEUE_EDGES = np.concatenate([[0.5], np.logspace(2, 9, 71)])
QUEUE_EDGES.flags.writeable = False


@dataclass(slots=True, frozen=True, kw_only=True)
class CollectiveResult:
    """One collective (one phase of one job, one iteration)."""

    index: int
    job: str
    phase: str
    iteration: int
    collective: str
    algorithm: str
    ranks: int
    flows: int
    message_bytes: int
    start_us: float
    end_us: float
    time_us: float  # nan when unfinished
    algbw_bps: float  # message / time (nccl-tests algbw)
    busbw_bps: float  # algbw x the collective's factor (nccl-tests busbw)
    nic_bps: float  # the slowest sender NIC: the non-blocking bound on busbw
    busbw_over_bound: float


@dataclass(slots=True)
class Trace:
    """Sampled time series for the plots."""

    t_us: list[float] = field(default_factory=list)
    goodput_bps: list[float] = field(default_factory=list)
    max_queue: list[float] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    paused: list[int] = field(default_factory=list)

    @classmethod
    def empty(cls) -> Trace:
        """No samples yet."""
        return cls()

    def add(
        self, t: float, *, goodput_bps: float, max_queue: float, active: int, paused: int
    ) -> None:
        """One sample."""
        self.t_us.append(t)
        self.goodput_bps.append(goodput_bps)
        self.max_queue.append(max_queue)
        self.active.append(active)
        self.paused.append(paused)


def _pct(hist: np.ndarray, q: float) -> float:
    """The ``q`` quantile (0..1) of a histogram over QUEUE_EDGES (upper bin edge, bytes)."""
    total = int(hist.sum())
    if total == 0:
        return 0.0
    k = int(np.searchsorted(np.cumsum(hist), q * total))
    if k == 0:
        return 0.0
    return float(QUEUE_EDGES[min(k, len(QUEUE_EDGES) - 1)])


@dataclass(slots=True, frozen=True, kw_only=True)
class SimResult:
    """A run's figures (plain data; ``to_dict`` for JSON)."""

    topology: str
    label: str
    config: dict[str, Any]
    flows: int
    sim_time_us: float
    wall_s: float
    route_s: float
    steps: int
    collectives: tuple[CollectiveResult, ...]
    fabric_util_mean: float
    fabric_util_max: float
    fabric_util_busiest: str
    queue_p50_bytes: float
    queue_p99_bytes: float
    queue_max_bytes: float
    pfc_pause_us_total: float
    pfc_pause_us_max_link: float
    cnps: int
    unfinished: int
    base_rtt_us: float
    flowlet_moves: int
    dt_us: float
    flow_finish_us: tuple[float, ...]  # per flow (workload order), nan if unfinished
    trace: Trace
    reroutes: int = 0  # rows a link failure's rerouting moved

    @classmethod
    def build(
        cls,
        *,
        topology: str,
        config: SimConfig,
        flows: int,
        sim_time_us: float,
        wall_s: float,
        route_s: float,
        steps: int,
        collectives: list[CollectiveResult],
        fabric_util: np.ndarray,
        fabric_names: list[str],
        queue_hist: np.ndarray,
        fabric_qmax: np.ndarray,
        pause_us: np.ndarray,
        cnps: int,
        unfinished: int,
        trace: Trace,
        base_rtt_us: float,
        flowlet_moves: int,
        dt_us: float,
        flow_finish_us: np.ndarray,
        reroutes: int = 0,
    ) -> SimResult:
        """Reduce the engine's arrays to the published figures."""
        busiest = int(np.argmax(fabric_util)) if fabric_util.size else -1
        return cls(
            topology=topology,
            label=config.label,
            config={k: getattr(config, k) for k in config.__dataclass_fields__ if k != "progress"},
            flows=flows,
            sim_time_us=sim_time_us,
            wall_s=wall_s,
            route_s=route_s,
            steps=steps,
            collectives=tuple(collectives),
            fabric_util_mean=float(fabric_util.mean()) if fabric_util.size else 0.0,
            fabric_util_max=float(fabric_util.max()) if fabric_util.size else 0.0,
            fabric_util_busiest=fabric_names[busiest] if busiest >= 0 else "",
            queue_p50_bytes=_pct(queue_hist, 0.50),
            queue_p99_bytes=_pct(queue_hist, 0.99),
            queue_max_bytes=float(fabric_qmax.max()) if fabric_qmax.size else 0.0,
            pfc_pause_us_total=float(pause_us.sum()),
            pfc_pause_us_max_link=float(pause_us.max()) if pause_us.size else 0.0,
            cnps=cnps,
            unfinished=unfinished,
            base_rtt_us=base_rtt_us,
            flowlet_moves=flowlet_moves,
            dt_us=dt_us,
            flow_finish_us=tuple(float(x) for x in flow_finish_us.tolist()),
            trace=trace,
            reroutes=reroutes,
        )

    @property
    def completion_us(self) -> float:
        """When the last collective ended (nan if some did not)."""
        ends = [c.end_us for c in self.collectives]
        return max(ends) if ends and not any(math.isnan(e) for e in ends) else float("nan")

    def to_dict(self, *, trace: bool = False) -> dict[str, Any]:
        """Plain data for JSON (nan as null)."""
        d = {
            k: getattr(self, k)
            for k in self.__dataclass_fields__
            if k not in ("collectives", "trace", "flow_finish_us")
        }
        d["completion_us"] = self.completion_us
        d["collectives"] = [asdict(c) for c in self.collectives]
        if trace:
            d["trace"] = asdict(self.trace)
            d["flow_finish_us"] = list(self.flow_finish_us)
        out: dict[str, Any] = _clean(d)
        return out

    def write_json(self, path: str | Path) -> None:
        """The result as a JSON file (with the trace), never written through a symlink or over
        another user's file (:func:`icefabric.files.write_output`)."""
        write_output(path, json.dumps(self.to_dict(trace=True), indent=1) + "\n")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def plot_results(results: list[SimResult], path: str | Path, title: str = "") -> None:
    """PNG: goodput and the deepest fabric queue over time, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for r in results:
        t = np.array(r.trace.t_us) / 1e3
        ax1.plot(t, np.array(r.trace.goodput_bps) / 1e12, label=r.label)
        ax2.plot(t, np.array(r.trace.max_queue) / 1e3, label=r.label)
    ax1.set_ylabel("goodput (Tbit/s)")
    ax2.set_ylabel("deepest fabric queue (KB)")
    ax2.set_xlabel("time (ms)")
    ax1.legend(loc="best", fontsize=8)
    if title:
        ax1.set_title(title)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    write_output(path, png.getvalue())
    plt.close(fig)
