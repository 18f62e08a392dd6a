"""The measures of one mode's run, from what the engine observed (DESIGN.md, "Measures").

* per phase: time from its first message posted to its last message arrived, nccl-tests'
  algbw = S / time and busbw = algbw x factor (2(n-1)/n all-reduce, (n-1)/n all-gather,
  reduce-scatter, all-to-all, 1 send-recv), and the **non-blocking bound**: the time the phase
  takes when only the hosts' own links limit it (max over hosts of bytes sent or received / host
  link rate), so busbw / bound_busbw says how close to ideal the fabric got;
* the job: completion time (first post to last arrival), slowest flow, busbw over all phases
  (sum of S x factor over the sum of the phase times; equal to the phase's busbw for one phase);
* per directed link: bytes and utilisation over the run; egress queue depth p50 / p99 / max
  (packets, seen by every packet leaving a switch port, data and control alike) and its
  CDF; drops by reason; CNPs; ECN-marked packets; data packets.

Rates are those of the run (topology rate x scale); ``*_gbps_full`` fields divide by the scale,
i.e. what the fabric gives at the topology's own rates (every time constant scales with it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icefabric.topo.spec import TopologySpec
from icefabric.traffic.workload import Schedule, WorkloadExecutor


@dataclass(slots=True, kw_only=True)
class Observed:
    """What an engine hands back for one mode (raw counts; :func:`measure` turns them into the
    results.json object)."""

    mode: str
    executor: WorkloadExecutor
    ok: bool = True
    error: str | None = None
    end_us: float = 0.0  # virtual time when the run stopped
    link_bytes: dict[str, int] = field(default_factory=dict)  # "a>b" -> bytes sent a to b
    link_bps: dict[str, float] = field(default_factory=dict)  # "a>b" -> rate in the run
    # "a>b" -> bytes of ICE's shim, INT records and feedback frames among link_bytes (engines
    # that can tell them apart; none: wire_overhead is null)
    link_overhead: dict[str, int] | None = None
    queue_hist: dict[int, int] = field(default_factory=dict)  # egress depth (packets) -> count
    drops: dict[str, int] = field(default_factory=dict)  # reason -> packets
    cnps: int = 0  # CNPs sent by receivers
    ecn_marks: int = 0  # CE-marked data packets received
    packets: int = 0  # data packets sent by the hosts
    losses: int = 0  # PSN gaps seen by receivers
    paths: dict[str, list[str]] = field(default_factory=dict)  # flow -> switches (from INT)
    # flow -> (payload bytes received, first and last packet at the receiver, us)
    flow_rx: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # engine-specific counters


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by the nearest-rank method (0 for no values)."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(1, math.ceil(q / 100.0 * len(s)))
    return float(s[min(k, len(s)) - 1])


def hist_percentile(hist: Mapping[int, int], q: float) -> int:
    """The q-th percentile (0..100) of a {value: count} histogram, nearest rank (0 if empty)."""
    total = sum(hist.values())
    if total == 0:
        return 0
    need = max(1, math.ceil(q / 100.0 * total))
    seen = 0
    for v in sorted(hist):
        seen += hist[v]
        if seen >= need:
            return v
    return max(hist)


def cdf_points(hist: Mapping[int, int], points: int = 50) -> list[list[float]]:
    """[[value, fraction <= value], ...] of a histogram at up to ``points`` values (the plot)."""
    total = sum(hist.values())
    if total == 0:
        return []
    distinct = sorted(v for v, k in hist.items() if k)
    step = max(1, len(distinct) // points)
    chosen = set(distinct[::step]) | {distinct[-1]}
    out = []
    seen = 0
    for v in distinct:
        seen += hist[v]
        if v in chosen:
            out.append([float(v), round(seen / total, 6)])
    return out


def host_bps(spec: TopologySpec, scale: float) -> dict[str, float]:
    """Each host's access link rate in the run (bit/s)."""
    return {h.name: spec.host_rate(h) * 1e9 * scale for h in spec.hosts}


def bound_us(schedule: Schedule, phase: str, rates: Mapping[str, float]) -> float:
    """The non-blocking bound of one phase: max over hosts of bytes sent or received / rate."""
    sent, recv = schedule.host_bytes(phase)
    t = 0.0
    for h in set(sent) | set(recv):
        t = max(t, max(sent.get(h, 0), recv.get(h, 0)) * 8 / rates[h] * 1e6)
    return t


def _gbps(nbytes: float, us: float) -> float:
    return nbytes * 8 / us / 1e3 if us > 0 else 0.0


def measure(obs: Observed, schedule: Schedule, spec: TopologySpec, scale: float) -> dict[str, Any]:
    """The results.json object of one mode (traffic/README.md, "results.json")."""
    ex = obs.executor
    rates = host_bps(spec, scale)
    phases = []
    total_busbytes = total_time = total_bound = 0.0
    for ph in schedule.phases:
        times = ex.phase_times(ph)
        b_us = bound_us(schedule, ph.name, rates)
        row: dict[str, Any] = {
            "name": ph.name,
            "collective": ph.collective,
            "algorithm": ph.algorithm,
            "nranks": ph.nranks,
            "channels": ph.channels,
            "message_bytes": ph.message_bytes,
            "busbw_factor": round(ph.busbw_factor, 6),
            "bound_us": round(b_us, 3),
            "bound_busbw_gbps": round(_gbps(ph.message_bytes, b_us) * ph.busbw_factor, 6)
            if b_us
            else None,
        }
        if times is None:
            row.update(time_us=None, algbw_gbps=None, busbw_gbps=None, busbw_over_bound=None)
        else:
            t = times[1] - times[0]
            alg = _gbps(ph.message_bytes, t)
            row.update(
                time_us=round(t, 3),
                algbw_gbps=round(alg, 6),
                busbw_gbps=round(alg * ph.busbw_factor, 6),
                busbw_over_bound=round(b_us / t, 6) if t > 0 and b_us else None,
            )
            total_busbytes += ph.message_bytes * ph.busbw_factor
            total_time += t
            total_bound += b_us
        phases.append(row)
    done = ex.done and obs.ok
    busbw = _gbps(total_busbytes, total_time) if done else None
    bound_busbw = _gbps(total_busbytes, total_bound) if done and total_bound else None
    over = busbw / bound_busbw if busbw and bound_busbw else None
    per_job = _per_job(phases, schedule) if done else {}
    if len(per_job) > 1:  # jobs side by side: each job's figures, the run's are their means
        busbw = sum(j["busbw_gbps"] for j in per_job.values()) / len(per_job)
        bound_busbw = sum(j["bound_busbw_gbps"] for j in per_job.values()) / len(per_job)
        over = sum(j["busbw_over_bound"] for j in per_job.values()) / len(per_job)
        total_bound = max(j["bound_us"] for j in per_job.values())
    flows = ex.flow_times()
    t0 = min(ex.posted_us.values(), default=0.0)
    fct = {f: round(t1 - t0, 3) for f, (_p, t1) in sorted(flows.items())}
    slowest: tuple[str | None, float | None] = (None, None)
    if fct:
        slowest = max(fct.items(), key=lambda kv: (kv[1], kv[0]))
    duration = max(ex.arrived_us.values(), default=t0) - t0
    links: list[dict[str, Any]] = []
    for name in sorted(obs.link_bps):
        nbytes = obs.link_bytes.get(name, 0)
        bps = obs.link_bps[name]
        util = nbytes * 8 / (duration * 1e-6) / bps if duration > 0 and bps > 0 else 0.0
        row = {
            "link": name,
            "rate_gbps": round(bps / 1e9, 9),
            "bytes": nbytes,
            "utilisation": round(util, 6),
        }
        if obs.link_overhead is not None:
            row["overhead_bytes"] = obs.link_overhead.get(name, 0)
        links.append(row)
    q = obs.queue_hist
    return {
        "mode": obs.mode,
        "ok": done,
        "error": obs.error if not done else None,
        "completion_us": round(duration, 3) if done else None,
        "bound_us": round(total_bound, 3) if done else None,
        "busbw_gbps": round(busbw, 6) if busbw is not None else None,
        "busbw_gbps_full": round(busbw / scale, 3) if busbw is not None else None,
        "bound_busbw_gbps": round(bound_busbw, 6) if bound_busbw is not None else None,
        "busbw_over_bound": round(over, 6) if over else None,
        **({"jobs": per_job} if len(per_job) > 1 else {}),
        "phases": phases,
        "flows": {
            "count": len(fct),
            "slowest": {"flow": slowest[0], "completion_us": slowest[1]},
            "completion_us": {
                "p50": round(percentile(list(fct.values()), 50), 3),
                "p99": round(percentile(list(fct.values()), 99), 3),
                "max": round(max(fct.values(), default=0.0), 3),
            },
            "per_flow_us": fct,
            # receiver goodput between its first and last packet (payload, run's rates)
            "goodput_gbps": {
                f: round(b * 8 / (t1 - t0) / 1e3, 6) if t1 > t0 else None
                for f, (b, t0, t1) in sorted(obs.flow_rx.items())
            },
        },
        "messages": {"total": len(schedule.messages), "arrived": len(ex.arrived_us)},
        "links": links,
        "max_link_utilisation": max((float(ln["utilisation"]) for ln in links), default=0.0),
        "wire_overhead": wire_overhead(obs, spec),
        "queue_packets": {
            "samples": sum(q.values()),
            "p50": hist_percentile(q, 50),
            "p99": hist_percentile(q, 99),
            "max": max((v for v, k in q.items() if k), default=0),
            "cdf": cdf_points(q),
        },
        "drops": sum(obs.drops.values()),
        "drops_by_reason": dict(sorted(obs.drops.items())),
        "cnps": obs.cnps,
        "ecn_marks": obs.ecn_marks,
        "data_packets": obs.packets,
        "psn_losses": obs.losses,
        "virtual_end_us": round(obs.end_us, 3),
        "paths": {f: list(p) for f, p in sorted(obs.paths.items())},
        "engine": dict(sorted(obs.extra.items())),
    }


def _per_job(phases: list[dict[str, Any]], schedule: Schedule) -> dict[str, dict[str, float]]:
    """Per job of ``schedule`` (its phases as ``measure`` reports them, all finished): busbw
    and its bound over the job's phases, their ratio, the job's time and bound."""
    sums: dict[str, list[float]] = {}  # job -> [bus bytes, time, bound]
    for ph, row in zip(schedule.phases, phases, strict=True):
        acc = sums.setdefault(ph.job, [0.0, 0.0, 0.0])
        acc[0] += ph.message_bytes * ph.busbw_factor
        acc[1] += float(row["time_us"] or 0.0)
        acc[2] += float(row["bound_us"] or 0.0)
    out = {}
    for job, (busbytes, t, b) in sums.items():
        bw, bound = _gbps(busbytes, t), _gbps(busbytes, b)
        out[job] = {
            "busbw_gbps": round(bw, 6),
            "bound_busbw_gbps": round(bound, 6),
            "busbw_over_bound": round(bw / bound, 6) if bw and bound else 0.0,
            "time_us": round(t, 3),
            "bound_us": round(b, 3),
        }
    return out


def wire_overhead(obs: Observed, spec: TopologySpec) -> float | None:
    """ICE's bytes on the fabric links (shim + INT records + feedback frames) as a fraction of
    the other bytes there (data, and whatever else the mode sends), summed over every directed
    switch-to-switch link; None when the engine did not tell them apart."""
    if obs.link_overhead is None:
        return None
    over = data = 0
    for ln in spec.links:
        for name in (f"{ln.a.node}>{ln.b.node}", f"{ln.b.node}>{ln.a.node}"):
            o = obs.link_overhead.get(name, 0)
            over += o
            data += obs.link_bytes.get(name, 0) - o
    return round(over / data, 6) if data > 0 else None
