"""The scenarios of the peers matrix, at simulator scale (128-1,024 GPUs): one builder each.

Every scenario is a 400G leaf-spine (16 hosts per leaf, 8 spines: 1:1 unless it says otherwise,
one GPU per NIC) and jobs whose ranks a scheduler scattered over it (seeded shuffle; or, with a
:class:`Layout`, packed in host order or interleaved over the leaves); the seed also draws the
background pairs among the hosts the job left and which link fails (the same link in every
placement). The score is the busbw ÷ non-blocking
bound (``sim/results.py``) of the measured jobs' collectives, averaged over them.

* ``collisions`` (a): one ring all-reduce (8 channels) over every GPU: ECMP's hash collisions.
* ``two-jobs`` (b): two ring all-reduces over half the GPUs each, hosts interleaved at random.
* ``incast`` (c): MoE expert-parallel all-to-all: groups of 16 GPUs (15 senders per receiver),
  all groups at once.
* ``background`` (d): a ring all-reduce over 3/4 of the hosts; each other host sends one
  storage-like flow to another of them on another leaf, as long as the collective at line rate,
  that the controller does not know (no plan, no caps: ice.p4's hash places it). Here the
  "ceiling" (no control at all) is no bound: uncontrolled background at line rate takes more
  of the shared links than any congestion control would give it.
* ``failure`` (e): a ring all-reduce over every GPU; a leaf-spine link the job uses fails at
  20 % of the collective's ideal time; every mode's paths are recomputed ``DETECT_US`` later.
* ``oversubscribed`` (f): a ring all-reduce over every GPU on a 2:1 oversubscribed leaf-spine.
* ``mixed-nics`` (g): a ring all-reduce over every GPU where half the hosts (seeded) have 200G
  NICs (the bound is the slowest NIC's).
* ``job-arrives`` (h): ``two-jobs`` with job-b arriving at a third of job-a's ideal time. Its caps
  start when its flows do (the caps cover the flows that started); the simulator's planner, as
  for every scenario, routes all of the workload's flows at the start, so it knows job-b's
  paths early (the packet level's preset learns the job as it arrives).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from icefabric.control.ccl.demand import Flow
from icefabric.control.ccl.job import JobSpec, parse_job
from icefabric.control.topology import Topology
from icefabric.sim.engine import LinkFailure
from icefabric.sim.fluid import AUTO_DT_BITS
from icefabric.sim.workload import NCCL_SLICE_BYTES, Collective, Workload, workload_from_jobs
from icefabric.topo.generators import leaf_spine
from icefabric.topo.spec import TopologySpec

HOSTS_PER_LEAF = 16
SPINES = 8
NIC_GBPS = 400.0
CHANNELS = 8
EP_GROUP = 16  # MoE expert-parallel group (incast: 15 senders per receiver)
DETECT_US = 200.0  # link down -> new paths installed (the same for every mode)
FAIL_AT = 0.2  # of the collective's ideal time
ARRIVE_AT = 1 / 3  # job-b of job-arrives, of job-a's ideal time


PLACEMENTS = ("scattered", "packed", "interleaved")


@dataclass(slots=True, frozen=True, kw_only=True)
class Layout:
    """How a scenario's jobs are laid out (what the matrix sweeps besides the message size).

    ``channels``: NCCL channels of every ring (one flow per channel and ring neighbour pair;
    ``incast``'s all-to-all keeps one flow per rank pair). ``placement``: which host each rank
    gets: ``scattered`` (a seeded shuffle: a scheduler that placed the job on whatever was
    free), ``packed`` (host order, leaf after leaf: NCCL's ring over a job packed onto
    consecutive hosts, most ring neighbours under one leaf) or ``interleaved`` (round robin over
    the leaves: every ring neighbour on another leaf, all traffic crosses the spines, as a
    rail-aligned ring does across rails)."""

    channels: int = CHANNELS
    placement: str = "scattered"

    def __post_init__(self) -> None:
        if not 1 <= self.channels <= 64:
            raise ValueError(f"channels: expected 1..64, got {self.channels}")
        if self.placement not in PLACEMENTS:
            raise ValueError(
                f"placement: expected one of {', '.join(PLACEMENTS)}, got {self.placement!r}"
            )


DEFAULT_LAYOUT = Layout()


@dataclass(slots=True, frozen=True, kw_only=True)
class ScenarioCase:
    """One scenario at one size and seed: the fabric, the workload and what to measure."""

    name: str
    spec: TopologySpec
    workload: Workload
    measured: tuple[int, ...]  # collective indices whose busbw ÷ bound is the score
    failures: tuple[LinkFailure, ...] = ()
    notes: dict[str, object] = field(default_factory=dict)


def _fabric(gpus: int, *, oversubscription: float = 1.0) -> TopologySpec:
    if gpus % HOSTS_PER_LEAF:
        raise ValueError(f"gpus: expected a multiple of {HOSTS_PER_LEAF}, got {gpus}")
    return leaf_spine(
        leaves=gpus // HOSTS_PER_LEAF,
        spines=SPINES,
        hosts_per_leaf=HOSTS_PER_LEAF,
        host_rate_gbps=NIC_GBPS,
        oversubscription=oversubscription,
    )


def _ring(name: str, hosts: list[str], message: int, channels: int = CHANNELS) -> JobSpec:
    return parse_job(
        {
            "name": name,
            "hosts": hosts,
            "phases": [
                {
                    "name": "all-reduce",
                    "collective": "all-reduce",
                    "algorithm": "ring",
                    "channels": channels,
                    "message_bytes": message,
                }
            ],
        }
    )


def _placed(spec: TopologySpec, rng: np.random.Generator, layout: Layout) -> list[str]:
    """The hosts in rank order for ``layout.placement``; the shuffle is drawn from ``rng`` in
    every placement, so that the seed's later draws (the failing link) are the same whatever
    the placement.  (Packed, the hosts a job leaves free are whole leaves: ``background``'s
    storage flows then run between those leaves only, away from the job's links.)"""
    shuffled = [spec.hosts[i].name for i in rng.permutation(len(spec.hosts))]
    if layout.placement == "packed":
        return [h.name for h in spec.hosts]
    if layout.placement == "interleaved":
        return spec.interleaved_hosts()
    return shuffled


def _ideal_us(message: int, ranks: int, gbps: float) -> float:
    """A ring all-reduce at the non-blocking bound: 2 (n-1)/n S / B."""
    return 2 * (ranks - 1) / ranks * message * 8 / (gbps * 1e9) * 1e6


def ring_step_cap(
    ranks: int, message: int, *, channels: int = CHANNELS, gbps: float = NIC_GBPS
) -> float:
    """The most of the non-blocking bound a ring all-reduce of ``ranks`` ranks (one per NIC) can
    reach in the simulator at its default step, whatever the network and the control do.

    A rank forwards what its predecessor delivered by the end of the previous step
    (``fluid.FluidRun.inject``), at most one NCCL slice ahead (``min(message / (ranks x
    channels), 512 KiB)``): a ring step takes at least one step ``dt`` (200 KB at the NIC's rate,
    ``fluid.AUTO_DT_BITS``), so each flow carries at most one slice per ``dt``, and the
    ``channels`` flows out of a NIC ``channels x slice / dt``; this returns that ÷ the NIC's
    rate. Below 1 the collective is latency-bound: its 2 (n - 1) ring steps at ``dt`` each take
    longer than its bytes at the bound, and every scheme scores at most this (at 1,024 GPUs,
    32 MiB, 8 channels: 4 KiB per step, 0.164); at 1 or more the bytes set the time. NCCL's own
    ring steps cost microseconds each as well (it picks trees for such sizes)."""
    if ranks < 2:
        return 1.0
    dt_s = AUTO_DT_BITS / (gbps * 1e9)
    slice_bytes = min(message / (ranks * channels), float(NCCL_SLICE_BYTES))
    return channels * slice_bytes * 8 / dt_s / (gbps * 1e9)


def collisions(gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT) -> ScenarioCase:
    """(a) one ring all-reduce over every GPU."""
    spec = _fabric(gpus)
    hosts = _placed(spec, np.random.default_rng(seed), layout)
    w = workload_from_jobs([_ring("job", hosts, message, layout.channels)])
    return ScenarioCase(name="collisions", spec=spec, workload=w, measured=(0,))


def two_jobs(gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT) -> ScenarioCase:
    """(b) two ring all-reduces over half the GPUs each."""
    spec = _fabric(gpus)
    hosts = _placed(spec, np.random.default_rng(seed), layout)
    half = len(hosts) // 2
    jobs = [
        _ring("job-a", hosts[:half], message, layout.channels),
        _ring("job-b", hosts[half:], message, layout.channels),
    ]
    return ScenarioCase(
        name="two-jobs", spec=spec, workload=workload_from_jobs(jobs), measured=(0, 1)
    )


def job_arrives(
    gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT
) -> ScenarioCase:
    """(h) two-jobs, the second job arriving a third into the first (``ARRIVE_AT``)."""
    case = two_jobs(gpus, seed, message, layout)
    w = case.workload
    n_a = w.collectives[0].ranks
    at = ARRIVE_AT * _ideal_us(message, n_a, NIC_GBPS)
    colls = tuple(
        replace(c, delay_us=at) if c.job == "job-b" and not c.after else c for c in w.collectives
    )
    return replace(
        case, name="job-arrives", workload=replace(w, collectives=colls), notes={"arrive_us": at}
    )


def incast(gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT) -> ScenarioCase:
    """(c) MoE all-to-all in expert-parallel groups of ``EP_GROUP`` GPUs, all at once."""
    spec = _fabric(gpus)
    hosts = _placed(spec, np.random.default_rng(seed), layout)
    jobs = [
        parse_job(
            {
                "name": f"ep{g}",
                "hosts": hosts[g * EP_GROUP : (g + 1) * EP_GROUP],
                "phases": [
                    {
                        "name": "all-to-all",
                        "collective": "all-to-all",
                        "channels": 1,
                        "message_bytes": message // 4,
                    }
                ],
            }
        )
        for g in range(len(hosts) // EP_GROUP)
    ]
    w = workload_from_jobs(jobs)
    return ScenarioCase(name="incast", spec=spec, workload=w, measured=tuple(range(len(jobs))))


def with_background(w: Workload, flows: list[Flow]) -> Workload:
    """``w`` plus ``flows`` as one more collective that starts at once, unplanned and uncapped."""
    if not flows:
        return w
    gi = len(w.collectives)
    k = len(flows)
    size = np.array([f.bytes for f in flows], dtype=np.float64)
    pred = np.full((k, w.pred.shape[1]), -1, dtype=np.int64)
    unplanned = np.zeros(len(w), dtype=bool) if w.unplanned is None else w.unplanned
    return replace(
        w,
        flows=(*w.flows, *flows),
        group=np.concatenate([w.group, np.full(k, gi, dtype=np.int64)]),
        size=np.concatenate([w.size, size]),
        pred=np.concatenate([w.pred, pred]),
        chunk=np.concatenate([w.chunk, size]),
        lead=np.concatenate([w.lead, np.ones(k)]),
        collectives=(
            *w.collectives,
            Collective(
                index=gi,
                job="background",
                phase="storage",
                iteration=0,
                collective="send-recv",
                algorithm="",
                ranks=k,
                channels=1,
                message_bytes=int(size.max()),
                after=(),
                delay_us=0.0,
            ),
        ),
        unplanned=np.concatenate([unplanned, np.ones(k, dtype=bool)]),
    )


def background(gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT) -> ScenarioCase:
    """(d) a ring all-reduce over 3/4 of the hosts and unplanned storage flows among the rest."""
    spec = _fabric(gpus)
    rng = np.random.default_rng(seed)
    hosts = _placed(spec, rng, layout)
    n_job = len(hosts) * 3 // 4
    job_hosts, others = hosts[:n_job], hosts[n_job:]
    leaf = {h.name: h.leaf for h in spec.hosts}
    volume = _ideal_us(message, n_job, NIC_GBPS) * 1e-6 * NIC_GBPS * 1e9 / 8
    flows = []
    for i, src in enumerate(others):
        cands = [d for d in others if leaf[d] != leaf[src]]
        if not cands:
            continue
        dst = cands[int(rng.integers(len(cands)))]
        flows.append(
            Flow(
                flow_id=f"background/{src}>{dst}/{i}",
                job="background",
                phase="storage",
                channel=0,
                src_host=src,
                dst_host=dst,
                src_rank=-1,
                dst_rank=-1,
                bytes=volume,
            )
        )
    w = with_background(
        workload_from_jobs([_ring("job", job_hosts, message, layout.channels)]), flows
    )
    return ScenarioCase(
        name="background",
        spec=spec,
        workload=w,
        measured=(0,),
        notes={"background_flows": len(flows)},
    )


def failure(gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT) -> ScenarioCase:
    """(e) a ring all-reduce; one leaf-spine link the job's leaves use fails mid-collective."""
    spec = _fabric(gpus)
    rng = np.random.default_rng(seed)
    hosts = _placed(spec, rng, layout)
    topo = Topology(spec)
    ups = [ln.id for ln in topo.links if ln.kind == "fabric" and ln.src.startswith("leaf")]
    link = ups[int(rng.integers(len(ups)))]
    at = FAIL_AT * _ideal_us(message, len(hosts), NIC_GBPS)
    w = workload_from_jobs([_ring("job", hosts, message, layout.channels)])
    return ScenarioCase(
        name="failure",
        spec=spec,
        workload=w,
        measured=(0,),
        failures=(LinkFailure(link=link, at_us=at, detect_us=DETECT_US),),
        notes={"failed_link": topo.link_name(link), "fail_at_us": at},
    )


def oversubscribed(
    gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT
) -> ScenarioCase:
    """(f) a ring all-reduce on a 2:1 oversubscribed leaf-spine."""
    spec = _fabric(gpus, oversubscription=2.0)
    hosts = _placed(spec, np.random.default_rng(seed), layout)
    w = workload_from_jobs([_ring("job", hosts, message, layout.channels)])
    return ScenarioCase(name="oversubscribed", spec=spec, workload=w, measured=(0,))


def mixed_nics(gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT) -> ScenarioCase:
    """(g) a ring all-reduce where half the hosts (seeded) have 200G NICs."""
    base = _fabric(gpus)
    rng = np.random.default_rng(seed)
    slow = set(rng.permutation(len(base.hosts))[: len(base.hosts) // 2].tolist())
    spec = replace(
        base,
        hosts=tuple(
            replace(h, rate_gbps=NIC_GBPS / 2) if i in slow else h for i, h in enumerate(base.hosts)
        ),
    )
    hosts = _placed(spec, rng, layout)
    w = workload_from_jobs([_ring("job", hosts, message, layout.channels)])
    return ScenarioCase(name="mixed-nics", spec=spec, workload=w, measured=(0,))


SCENARIOS: dict[str, Callable[[int, int, int, Layout], ScenarioCase]] = {
    "collisions": collisions,
    "two-jobs": two_jobs,
    "incast": incast,
    "background": background,
    "failure": failure,
    "oversubscribed": oversubscribed,
    "mixed-nics": mixed_nics,
    "job-arrives": job_arrives,
}


def build(
    name: str, gpus: int, seed: int, message: int, layout: Layout = DEFAULT_LAYOUT
) -> ScenarioCase:
    """Scenario ``name`` at ``gpus`` GPUs and ``seed`` (a one-line error for an unknown name)."""
    try:
        fn = SCENARIOS[name]
    except KeyError:
        raise ValueError(
            f"scenario: expected one of {', '.join(SCENARIOS)}, got {name!r}"
        ) from None
    return fn(gpus, seed, message, layout)
