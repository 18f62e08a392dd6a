"""Heterogeneous mixed training: compute from a device table, communication from the simulator.

A job trains one model on *groups* of servers (one accelerator type per group, ``gpus`` per
server, one NIC per server = one topology host). Per training step:

* **Data parallel**: the global batch is split over the servers in proportion to their speed
  (whole samples, largest remainder), so compute takes ``max_i samples_i * 6 P L / speed_i``;
  then a ring all-reduce of the gradients (``P * grad_bytes``) over all servers (one rank per
  server: the reduction inside a server runs over its own links and is not modelled).
* **Pipeline parallel**: one stage per server, the model's layers split over the servers so
  that the slowest stage is as fast as whole layers allow (at least one each; ``_split``:
  min-max, which is the proportional split where speeds divide the layers evenly);
  ``m = global_batch / micro_batch`` micro-batches in 1F1B:
  ``(m + b - 1) * max(t_stage, c) + 2 (b - 1) c`` with ``c`` the time one micro-batch's
  activations (forward) and gradients (backward) take between neighbouring stages when every
  boundary sends at once (simulated as send-recv) and ``b`` the pipeline depth whose fill and
  drain the step pays (its own stage count, except in the baselines below).

Communication runs through the fluid simulator on the given topology under the given
configuration (ECMP + DCQCN, ICE, ...). To keep runs short, messages above ``sim_bytes`` are
simulated at ``sim_bytes`` and the time is scaled linearly (steady-state rates dominate at these
sizes; the scale factor is reported).

Efficiency = mixed throughput / sum of the groups' homogeneous throughputs, where a group's
homogeneous throughput is the same job on that group's servers alone: the same model, batch,
parallel strategy and micro-batch count and, for pipeline parallel, the same fill/drain bubble
as the mixed pipeline (``b`` = the mixed job's stage count). Without that, two *identical* groups
would score (m + p_g - 1) / (m + p - 1) < 1: a deeper pipeline's bubble, not a cost of mixing
devices or of the network. What remains below 1 is the whole-layer (pipeline) or whole-sample
(data parallel) split over unequal speeds and the communication, which in data parallel does not
shrink when groups join (a ring all-reduce takes about 2 S / B at any size) while compute halves.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from icefabric.control.ccl.job import parse_job
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.devices import Device, device
from icefabric.sim.engine import Simulator
from icefabric.sim.workload import workload_from_jobs


@dataclass(slots=True, frozen=True, kw_only=True)
class Group:
    """Servers of one accelerator type."""

    device: str
    servers: int
    gpus: int = 8  # accelerators per server


@dataclass(slots=True, frozen=True, kw_only=True)
class ModelSpec:
    """The trained model and batch (a 13B-parameter transformer by default)."""

    params: float = 13e9
    layers: int = 40
    hidden: int = 5120
    seq: int = 4096
    global_batch: int = 256  # samples per step
    micro_batch: int = 1  # samples per micro-batch (pipeline parallel)
    grad_bytes: int = 2  # bytes per gradient element (bf16)
    act_bytes: int = 2


@dataclass(slots=True, frozen=True, kw_only=True)
class Scenario:
    """One mixed-training case."""

    name: str
    parallel: str  # "dp" or "pp"
    groups: tuple[Group, ...]
    model: ModelSpec = field(default_factory=ModelSpec)
    study_efficiency: float | None = None  # the companion study's figure, for comparison


@dataclass(slots=True, frozen=True, kw_only=True)
class StepTime:
    """One configuration of servers: compute and communication per step (seconds)."""

    servers: int
    compute_s: float
    comm_s: float
    step_s: float
    throughput: float  # samples / s
    comm_scale: float  # simulated bytes x this = real bytes


@dataclass(slots=True, frozen=True, kw_only=True)
class HeteroResult:
    """A scenario under one network configuration."""

    scenario: str
    parallel: str
    label: str
    mixed: StepTime
    groups: dict[str, StepTime]
    efficiency: float
    study_efficiency: float | None


def _split(total: int, weights: Sequence[float], minimum: int = 0) -> list[int]:
    """Whole units over workers of speed ``weights``, each >= ``minimum``, minimising the
    slowest worker's time ``max(units_i / weights_i)``.

    Every unit beyond the minima goes to the worker that would finish it soonest (ties: the
    first); with separable increasing costs this greedy is optimal for the min-max objective.
    (A largest-remainder proportional split is not: 40 layers over four servers of speed 312 and
    four of 256 gave some of the slower ones five layers: 1.6 % slower than six and four.)
    """
    if any(not x > 0 for x in weights):
        raise ValueError(f"weights: expected all > 0, got {list(weights)}")
    out = [minimum] * len(weights)
    heap = [((minimum + 1) / x, i) for i, x in enumerate(weights)]
    heapq.heapify(heap)
    for _ in range(max(0, total - minimum * len(weights))):
        _, i = heapq.heappop(heap)
        out[i] += 1
        heapq.heappush(heap, ((out[i] + 1) / weights[i], i))
    return out


def _comm_us(
    topo: Topology,
    hosts: Sequence[str],
    phase: dict[str, object],
    config: SimConfig,
) -> float:
    job = parse_job({"name": "hetero", "hosts": list(hosts), "phases": [phase]})
    res = Simulator(topo, workload_from_jobs([job]), config).run()
    if res.unfinished:
        raise RuntimeError(f"{phase['name']}: {res.unfinished} flows unfinished at max_time_us")
    return res.completion_us


def step_time(
    topo: Topology,
    hosts: Sequence[str],
    speeds: Sequence[float],
    parallel: str,
    model: ModelSpec,
    config: SimConfig,
    *,
    sim_bytes: int = 64 << 20,
    channels: int = 8,
    bubble_stages: int | None = None,
) -> StepTime:
    """The step time of the job on ``hosts`` (one server each, effective FLOP/s ``speeds``).

    ``bubble_stages``: pipeline parallel only, the depth whose fill/drain the step pays (default
    the number of stages, ``len(hosts)``); the homogeneous baselines pass the mixed job's depth.
    """
    n = len(hosts)
    flops_sample = 6.0 * model.params * model.seq
    if parallel == "dp":
        samples = _split(model.global_batch, speeds)
        compute = max(s * flops_sample / v for s, v in zip(samples, speeds, strict=True))
        grads = int(model.params * model.grad_bytes)
        sim = min(grads, sim_bytes)
        comm_s = 0.0
        if n > 1:
            phase = {
                "name": "grads",
                "collective": "all-reduce",
                "algorithm": "ring",
                "channels": channels,
                "message_bytes": sim,
            }
            comm_s = _comm_us(topo, hosts, phase, config) * 1e-6 * grads / sim
        step = compute + comm_s
        return StepTime(
            servers=n,
            compute_s=compute,
            comm_s=comm_s,
            step_s=step,
            throughput=model.global_batch / step,
            comm_scale=grads / sim,
        )
    if parallel != "pp":
        raise ValueError(f"parallel: expected 'dp' or 'pp', got {parallel!r}")
    if n > model.layers:
        raise ValueError(f"pipeline of {n} stages but only {model.layers} layers")
    layers = _split(model.layers, speeds, minimum=1)
    m = max(1, model.global_batch // model.micro_batch)
    flops_layer_mb = flops_sample * model.micro_batch / model.layers
    t_stage = max(k * flops_layer_mb / v for k, v in zip(layers, speeds, strict=True))
    act = model.micro_batch * model.seq * model.hidden * model.act_bytes
    c = 0.0
    scale = 1.0
    if n > 1:
        sim = min(act, sim_bytes)
        scale = act / sim
        pairs = [[i, i + 1] for i in range(n - 1)] + [[i + 1, i] for i in range(n - 1)]
        phase = {
            "name": "activations",
            "collective": "send-recv",
            "channels": 1,
            "message_bytes": sim,
            "pairs": pairs,
        }
        c = _comm_us(topo, hosts, phase, config) * 1e-6 * scale
    b = n if bubble_stages is None else bubble_stages
    if b < 1:
        raise ValueError(f"bubble_stages: expected >= 1, got {b}")
    compute = (m + b - 1) * t_stage
    step = (m + b - 1) * max(t_stage, c) + 2 * (b - 1) * c
    return StepTime(
        servers=n,
        compute_s=compute,
        comm_s=step - compute,
        step_s=step,
        throughput=model.global_batch / step,
        comm_scale=scale,
    )


def run_scenario(
    topo: Topology,
    scenario: Scenario,
    config: SimConfig,
    *,
    hosts: Sequence[str] | None = None,
    table: Mapping[str, Device] | None = None,
    sim_bytes: int = 64 << 20,
) -> HeteroResult:
    """Mixed and per-group step times and the efficiency under ``config``."""
    pool = list(hosts) if hosts is not None else [h.name for h in topo.spec.hosts]
    need = sum(g.servers for g in scenario.groups)
    if need > len(pool):
        raise ValueError(f"{scenario.name}: needs {need} servers, topology has {len(pool)}")
    placed: list[tuple[str, float, str]] = []  # (host, speed, group key)
    k = 0
    for gi, g in enumerate(scenario.groups):
        d = device(g.device, table)
        for _ in range(g.servers):
            placed.append((pool[k], d.flops * g.gpus, f"{gi}:{g.device}"))
            k += 1
    mixed = step_time(
        topo,
        [p[0] for p in placed],
        [p[1] for p in placed],
        scenario.parallel,
        scenario.model,
        config,
        sim_bytes=sim_bytes,
    )
    groups: dict[str, StepTime] = {}
    for key in dict.fromkeys(p[2] for p in placed):
        mine = [p for p in placed if p[2] == key]
        groups[key] = step_time(
            topo,
            [p[0] for p in mine],
            [p[1] for p in mine],
            scenario.parallel,
            scenario.model,
            config,
            sim_bytes=sim_bytes,
            bubble_stages=len(placed),
        )
    total = sum(g.throughput for g in groups.values())
    return HeteroResult(
        scenario=scenario.name,
        parallel=scenario.parallel,
        label=config.label,
        mixed=mixed,
        groups=groups,
        efficiency=mixed.throughput / total if total > 0 else 0.0,
        study_efficiency=scenario.study_efficiency,
    )


STUDY_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="NVIDIA + Biren, pipeline parallel",
        parallel="pp",
        groups=(Group(device="A100", servers=4), Group(device="BR104", servers=4)),
        study_efficiency=0.9977,
    ),
    Scenario(
        name="three vendors, pipeline parallel",
        parallel="pp",
        groups=(
            Group(device="A100", servers=4),
            Group(device="BR104", servers=4),
            Group(device="910B", servers=4),
        ),
        study_efficiency=0.9903,
    ),
    Scenario(
        name="NVIDIA + Biren, data parallel",
        parallel="dp",
        groups=(Group(device="A100", servers=8), Group(device="BR104", servers=8)),
        study_efficiency=0.9288,
    ),
)
