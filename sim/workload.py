"""Workloads: the network flows of CCL job descriptions with the collectives' dependency structure.

Flows come from ``icefabric.control.ccl.demand`` (the controller's own demand model). On top:

* **Ring collectives** (all-reduce 2(n-1) steps, all-gather / reduce-scatter n-1 steps of
  ``message / (n * channels)`` bytes per channel): a rank forwards what it has received, in
  NCCL's pipelined slices (``min(step, NCCL_SLICE_BYTES)``, NCCL's 4 MiB buffer over its 8
  steps), so a flow may be at most ``lead`` slices ahead of what its predecessor in the ring
  (the network flow into its source rank) has delivered; ``lead`` is 1 plus the intra-host hops
  (NVLink, taken as instantaneous) between the two. One slow link slows the whole ring.
* **Tree all-reduce**: a rank sends up what all its children have sent it, the root's reductions
  feed the broadcast down, every rank forwards down what its parent sent (in NCCL slices, one
  slice of slack; intra-host tree edges pass through instantly).
* **Other collectives** (halving-doubling, all-to-all, send-recv): every flow may send all of its
  bytes at once (their internal step order is not modelled).
* **Windowed all-to-all** (``a2a_window=W``): instead of one row per rank pair, each rank works
  on W peers at a time in rounds of shifted peers, two rows per slot re-armed as rounds progress
  (``window.py``); the same pairs, bytes and flow keys in ``2 W n`` rows per channel.
* **Phases** of a job run one after another; ``compute_us`` before each (training compute).
  ``iterations`` repeats the job's phases (flows keep their keys: the same QPs every step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from icefabric.control.ccl.demand import Flow, default_tree, demand_from_job
from icefabric.control.ccl.job import JobSpec, Phase, estimate_flows
from icefabric.sim.config import MAX_ITERATIONS, MAX_SIM_FLOWS
from icefabric.sim.window import A2aWindow

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
    pred: np.ndarray  # [F, P] rows of the flows this one waits for (-1: none)
    chunk: np.ndarray  # the slack unit of a ring dependency (bytes)
    lead: np.ndarray  # steps a flow may be ahead of its predecessor's deliveries
    collectives: tuple[Collective, ...]
    windows: tuple[A2aWindow, ...] = ()  # windowed all-to-all channels (rows re-armed in a run)
    # striped connections (stripes.py): each row's QP index among its connection's ``stripes``
    stripe: np.ndarray | None = None
    stripes: int = 1
    # rows the controller knows nothing of (background traffic): ice.p4's fallback paths under
    # planned routing, never capped
    unplanned: np.ndarray | None = None

    @property
    def total_bytes(self) -> float:
        """Every byte the workload puts on the network (windowed rows start empty)."""
        return float(self.size.sum()) + sum(w.total_bytes for w in self.windows)

    def __len__(self) -> int:
        return len(self.flows)


def _ring_preds(job: JobSpec, phase: Phase, flows: Sequence[Flow]) -> dict[str, tuple[str, int]]:
    """{flow id: (predecessor flow id, lead)} for a ring phase's network flows."""
    by_pair = {(f.channel, f.src_rank, f.dst_rank): f for f in flows}
    out: dict[str, tuple[str, int]] = {}
    n = len(phase.ranks)
    # each ring's rank positions once (built per flow, this was quadratic: 4 s at 8,192 flows)
    positions: dict[int, tuple[Sequence[int], dict[int, int]]] = {}
    for f in flows:
        if f.channel not in positions:
            order: Sequence[int] = phase.rings[f.channel] if phase.rings else phase.ranks
            positions[f.channel] = (order, {r: i for i, r in enumerate(order)})
        ring, pos = positions[f.channel]
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


@dataclass(slots=True, frozen=True)
class _Tree:
    """One channel's tree: parents, children and its network flows by (src, dst) rank."""

    parent: Mapping[int, int]
    children: Mapping[int, list[int]]
    flow: Mapping[tuple[int, int], str]

    def up_into(self, r: int) -> list[str]:
        """The network flows that bring ``r`` its children's partial sums."""
        got: list[str] = []
        for c in self.children.get(r, []):
            fid = self.flow.get((c, r))
            got.extend([fid] if fid is not None else self.up_into(c))
        return got

    def down_into(self, r: int) -> list[str]:
        """The network flows whose arrival lets ``r`` broadcast to its children."""
        parent = self.parent[r]
        if parent < 0:
            return self.up_into(r)
        fid = self.flow.get((parent, r))
        return [fid] if fid is not None else self.down_into(parent)


def _tree_preds(phase: Phase, flows: Sequence[Flow]) -> dict[str, list[str]]:
    """{flow id: flow ids it waits for} of a tree all-reduce: a rank sends up once every child
    has sent it that part; the root's reductions feed the broadcast down, each rank forwarding
    down what came from its parent. Intra-host edges (no network flow) pass straight through."""
    out: dict[str, list[str]] = {}
    for ch in sorted({f.channel for f in flows}):
        parents = phase.trees[ch] if phase.trees else default_tree(phase.ranks, ch)
        children: dict[int, list[int]] = {}
        for r, p in parents.items():
            if p >= 0:
                children.setdefault(p, []).append(r)
        t = _Tree(
            parent=parents,
            children=children,
            flow={(f.src_rank, f.dst_rank): f.flow_id for f in flows if f.channel == ch},
        )
        for r, p in parents.items():
            if p < 0:
                continue
            up = t.flow.get((r, p))
            if up is not None:
                out[up] = t.up_into(r)
            down = t.flow.get((p, r))
            if down is not None:
                out[down] = t.down_into(p)
    return out


def _rows_of(phase: Phase, a2a_window: int | None) -> int:
    """The rows ``phase`` takes in a run: its flows, or for a windowed all-to-all the 2 W n
    rows per channel that carry its n (n - 1) pairs (``window.py``), whichever is fewer."""
    est = estimate_flows(phase)
    if a2a_window is not None and phase.collective == "all-to-all":
        return min(est, 2 * a2a_window * len(phase.ranks) * phase.channels)
    return est


def workload_from_jobs(
    jobs: Sequence[JobSpec],
    *,
    iterations: int = 1,
    compute_us: Mapping[str, float] | None = None,
    slices: int | None = None,
    a2a_window: int | None = None,
) -> Workload:
    """The flows of ``jobs`` (all starting at t = 0, phases in order, ``iterations`` times).

    ``slices``: pipelined slices per ring step (default: NCCL's ``NCCL_SLICE_BYTES`` slices).
    ``a2a_window``: all-to-all phases as windowed rounds of that many peers per rank
    (``window.py``; default: every rank pair a flow from the start).
    """
    if a2a_window is not None and a2a_window < 1:
        raise ValueError(f"a2a_window: expected >= 1, got {a2a_window}")
    if slices is not None and slices < 1:
        raise ValueError(f"slices: expected >= 1, got {slices}")
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations: expected 1..{MAX_ITERATIONS:,}, got {iterations}")
    total = iterations * sum(_rows_of(p, a2a_window) for job in jobs for p in job.phases)
    if total > MAX_SIM_FLOWS:
        raise ValueError(
            f"iterations: {iterations} x the jobs' flows = {total:,} flows, at most "
            f"{MAX_SIM_FLOWS:,} per run"
        )
    flows: list[Flow] = []
    group: list[int] = []
    chunk: list[float] = []
    pred_id: list[tuple[list[str], int]] = []
    colls: list[Collective] = []
    windows: list[tuple[int, A2aWindow]] = []  # (first row, window with rows relative to it)
    comp = dict(compute_us or {})
    for job in jobs:
        prev_coll: int | None = None
        for it in range(iterations):
            for phase in job.phases:
                windowed = a2a_window is not None and phase.collective == "all-to-all"
                single = JobSpec(name=job.name, ranks=job.ranks, phases=(phase,))
                base = [] if windowed else list(demand_from_job(single))
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
                if windowed and a2a_window is not None:
                    for ch in range(phase.channels):
                        win, rows = _window(job, phase, ch, ci, a2a_window, it, iterations)
                        windows.append((len(flows), win))
                        flows.extend(rows)
                        group.extend([ci] * len(rows))
                        chunk.extend([1.0] * len(rows))
                        pred_id.extend([([], 1)] * len(rows))
                    continue
                ring = phase.algorithm == "ring" and phase.collective in RING_STEPS
                tree = phase.algorithm == "tree" and phase.collective == "all-reduce"
                preds: dict[str, tuple[list[str], int]] = {}
                if ring:
                    preds = {k: ([v[0]], v[1]) for k, v in _ring_preds(job, phase, base).items()}
                elif tree:
                    preds = {k: (v, 1) for k, v in _tree_preds(phase, base).items()}
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
                    elif tree:
                        chunk.append(min(float(f.bytes), float(NCCL_SLICE_BYTES)))
                    else:
                        chunk.append(float(f.bytes))
                    pred_id.append(preds.get(f.flow_id, ([], 1)))
    index = {f.flow_id: k for k, f in enumerate(flows)}
    if len(index) != len(flows):
        raise ValueError("flow ids must be unique across the jobs (job names must differ)")
    width = max((len(p[0]) for p in pred_id), default=0)
    pred = np.full((len(flows), max(width, 1)), -1, dtype=np.int64)
    lead = np.ones(len(flows))
    for k, (ids, ahead) in enumerate(pred_id):
        for j, fid in enumerate(ids):
            pred[k, j] = index[fid]
        lead[k] = ahead
    sizes = np.array([f.bytes for f in flows], dtype=np.float64)
    wins = tuple(replace(w, rows=w.rows + first) for first, w in windows)
    for w in wins:
        sizes[w.rows.ravel()] = 0.0
    return Workload(
        flows=tuple(flows),
        group=np.array(group, dtype=np.int64),
        size=sizes,
        pred=pred,
        chunk=np.array(chunk, dtype=np.float64),
        lead=lead,
        collectives=tuple(colls),
        windows=wins,
    )


def _window(
    job: JobSpec, phase: Phase, ch: int, ci: int, width: int, it: int, iterations: int
) -> tuple[A2aWindow, list[Flow]]:
    """One channel of a windowed all-to-all: its description (rows from 0) and a placeholder
    flow per row (no bytes; the run gives each row its peers' flows as rounds progress)."""
    ranks = tuple(phase.ranks)
    hosts = tuple(job.host_of(r) for r in ranks)
    n = len(ranks)
    tag = f"#{it}" if iterations > 1 else ""
    rows: list[Flow] = []
    for i, r in enumerate(ranks):
        for j in range(width):
            for d in range(2):
                rows.append(
                    Flow(
                        flow_id=f"{job.name}/{phase.name}/c{ch}/r{r}/slot{j}.{d}{tag}",
                        job=job.name,
                        phase=phase.name,
                        channel=ch,
                        src_host=hosts[i],
                        dst_host=hosts[i],
                        src_rank=r,
                        dst_rank=r,
                        bytes=0.0,
                    )
                )
    win = A2aWindow(
        group=ci,
        job=job.name,
        phase=phase.name,
        channel=ch,
        ranks=ranks,
        hosts=hosts,
        pair_bytes=float(phase.message_bytes) / n / phase.channels,
        window=width,
        rows=np.arange(n * width * 2, dtype=np.int64).reshape(n, width, 2),
    )
    return win, rows
