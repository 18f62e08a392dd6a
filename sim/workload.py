"""Workloads: the network flows of CCL job descriptions with the collectives' dependency structure.

Flows come from ``icefabric.control.ccl.demand`` (the controller's own demand model). On top:

* **Ring collectives** (all-reduce 2(n-1) steps, all-gather / reduce-scatter n-1 steps of
  ``message / (n * channels)`` bytes per channel): a rank forwards what it has received, in
  NCCL's pipelined slices (``min(step, NCCL_SLICE_BYTES)``, NCCL's 4 MiB buffer over its 8
  steps), so a flow may be at most ``lead`` slices ahead of what its predecessor in the ring
  (the network flow into its source rank) has delivered; ``lead`` is 1 plus the intra-host hops
  (NVLink, taken as instantaneous) between the two. One slow link slows the whole ring.
* **Other collectives** (tree, halving-doubling, all-to-all, send-recv): every flow may send all of
  its bytes at once (their internal step order is not modelled).
* **Phases** of a job run one after another; ``compute_us`` before each (training compute).
  ``iterations`` repeats the job's phases (flows keep their keys: the same QPs every step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from icefabric.control.ccl.demand import Flow, demand_from_job
from icefabric.control.ccl.job import JobSpec, Phase

RING_STEPS = {"all-reduce": 2, "all-gather": 1, "reduce-scatter": 1}
NCCL_SLICE_BYTES = (4 << 20) // 8  # NCCL_BUFFSIZE (4 MiB) / NCCL_STEPS (8)


@dataclass(slots=True, frozen=True, kw_only=True)
class Collective:
    """One phase of one job (one iteration): a group of flows that starts and ends together."""

    index: int
    job: str
    phase: str
    iteration: int
    collective: str
    algorithm: str
    ranks: int
    channels: int
    message_bytes: int
    after: tuple[int, ...]  # collectives that must finish before this one starts
    delay_us: float  # compute time after ``after`` finished (from t = 0 when none)


@dataclass(slots=True, frozen=True, kw_only=True)
class Workload:
    """Flows (one row each) with sizes, ring dependencies and their collective."""

    flows: tuple[Flow, ...]
    group: np.ndarray  # collective index per flow
    size: np.ndarray  # bytes
    pred: np.ndarray  # row of the flow this one waits for (-1: none)
    chunk: np.ndarray  # the slack unit of a ring dependency (bytes)
    lead: np.ndarray  # steps a flow may be ahead of its predecessor's deliveries
    collectives: tuple[Collective, ...]

    def __len__(self) -> int:
        return len(self.flows)


def _ring_preds(job: JobSpec, phase: Phase, flows: Sequence[Flow]) -> dict[str, tuple[str, int]]:
    """{flow id: (predecessor flow id, lead)} for a ring phase's network flows."""
    by_pair = {(f.channel, f.src_rank, f.dst_rank): f for f in flows}
    out: dict[str, tuple[str, int]] = {}
    n = len(phase.ranks)
    for f in flows:
        ring = phase.rings[f.channel] if phase.rings else phase.ranks
        pos = {r: i for i, r in enumerate(ring)}
        cur = f.src_rank
        for hops in range(n):
            prev = ring[(pos[cur] - 1) % n]
            if job.host_of(prev) != job.host_of(cur):
                pf = by_pair.get((f.channel, prev, cur))
                if pf is not None:
                    out[f.flow_id] = (pf.flow_id, 1 + hops)
                break
            cur = prev
    return out


def workload_from_jobs(
    jobs: Sequence[JobSpec],
    *,
    iterations: int = 1,
    compute_us: Mapping[str, float] | None = None,
    slices: int | None = None,
) -> Workload:
    """The flows of ``jobs`` (all starting at t = 0, phases in order, ``iterations`` times).

    ``slices``: pipelined slices per ring step (default: NCCL's ``NCCL_SLICE_BYTES`` slices).
    """
    if slices is not None and slices < 1:
        raise ValueError(f"slices: expected >= 1, got {slices}")
    if iterations < 1:
        raise ValueError(f"iterations: expected >= 1, got {iterations}")
    flows: list[Flow] = []
    group: list[int] = []
    chunk: list[float] = []
    pred_id: list[tuple[str, int] | None] = []
    colls: list[Collective] = []
    comp = dict(compute_us or {})
    for job in jobs:
        prev_coll: int | None = None
        for it in range(iterations):
            for phase in job.phases:
                single = JobSpec(name=job.name, ranks=job.ranks, phases=(phase,))
                base = list(demand_from_job(single))
                if iterations > 1:
                    base = [
                        replace(
                            f,
                            flow_id=f"{f.flow_id}#{it}",
                            udp_sport=f.entropy_sport(),
                            qp=f.entropy_qp(),
                        )
                        for f in base
                    ]
                ci = len(colls)
                colls.append(
                    Collective(
                        index=ci,
                        job=job.name,
                        phase=phase.name,
                        iteration=it,
                        collective=phase.collective,
                        algorithm=phase.algorithm,
                        ranks=len(phase.ranks),
                        channels=phase.channels,
                        message_bytes=phase.message_bytes,
                        after=() if prev_coll is None else (prev_coll,),
                        delay_us=float(comp.get(job.name, 0.0)),
                    )
                )
                prev_coll = ci
                ring = phase.algorithm == "ring" and phase.collective in RING_STEPS
                preds = _ring_preds(job, phase, base) if ring else {}
                n = len(phase.ranks)
                for f in base:
                    flows.append(f)
                    group.append(ci)
                    if ring and n > 1:
                        step = float(phase.message_bytes) / (n * phase.channels)
                        if slices is not None:
                            chunk.append(step / slices)
                        else:
                            chunk.append(min(step, float(NCCL_SLICE_BYTES)))
                    else:
                        chunk.append(float(f.bytes))
                    pred_id.append(preds.get(f.flow_id))
    index = {f.flow_id: k for k, f in enumerate(flows)}
    if len(index) != len(flows):
        raise ValueError("flow ids must be unique across the jobs (job names must differ)")
    pred = np.full(len(flows), -1, dtype=np.int64)
    lead = np.ones(len(flows))
    for k, p in enumerate(pred_id):
        if p is not None:
            pred[k] = index[p[0]]
            lead[k] = p[1]
    return Workload(
        flows=tuple(flows),
        group=np.array(group, dtype=np.int64),
        size=np.array([f.bytes for f in flows], dtype=np.float64),
        pred=pred,
        chunk=np.array(chunk, dtype=np.float64),
        lead=lead,
        collectives=tuple(colls),
    )
