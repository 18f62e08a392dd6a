"""Heterogeneous mixed training: compute from the model and device tables, communication simulated.

A job trains one model (``model.py``) on *groups* of servers, one accelerator type per group
(``devices.py``). Inside a server the model is split tensor-parallel over its ``gpus`` over
NVLink (not modelled: Megatron keeps tensor parallelism inside the NVLink domain), so a server is
one data-parallel replica or one pipeline stage, and each GPU holds ``1 / gpus`` of its
parameters. Every assumption is a named field of ``Cluster`` or ``Training`` with its source.

**Fabric** (``Cluster``, ``fabric``): ``nics`` NICs per server at ``nic_gbps`` on a
rail-optimised leaf-spine (NVIDIA DGX SuperPOD reference architecture: one leaf per rail per
scalable unit of ``servers_per_leaf`` = 32 servers, NIC k of every server on rail k's leaf), 1:1.
``nics=1`` is the one-NIC-per-server case. The job's servers take the fabric's server slots in a
seeded shuffle (a shared cluster's scheduler does not hand out neighbours), so rings and pipeline
neighbours cross the spines where slots fall in different units.

**Data parallel** (``dp_step``): the global batch is split over the servers by speed (whole
samples, min-max: ``_split``). Backward produces gradients layer by layer from the head down;
they fill buckets of ``max(40 M, 1 M x DP size)`` elements per GPU, Megatron-LM's rule
(``megatron/core/distributed``: ``bucket_size = max(40000000, 1000000 * dp_size)``), and each
bucket's all-reduce starts when every server has produced it and the previous bucket's is done
(one NCCL stream), overlapping the rest of the backward pass (DDP-style; ``overlap=False``: all
after backward). A bucket's all-reduce is one ring per rail: GPU k's shard over NIC k of every
server (with fewer NICs, each NIC carries the shards of ``gpus / nics`` GPUs).

**Pipeline parallel** (``pp_step``): one stage per vendor group (``interleave = v``: v stages per
group, Megatron's interleaved 1F1B), the layers (embedding, blocks, head with their own costs)
split into contiguous stages so that the slowest is as fast as whole layers allow; every group
has the same number ``d`` of servers, so ``d`` pipelines run side by side, each with
``m = global_batch / (d * micro_batch)`` micro-batches. Step: ``m T + (sum_g t_g - max_g t_g) / v
+ 2 (G v - 1) c`` with ``t_g`` a group's compute per micro-batch, ``T = max_g max(t_g, c)`` and
``c`` the simulated time of one micro-batch's activations crossing every stage boundary at once
(Megatron's scatter/gather: each NIC sends ``1 / nics`` of them on its rail); then every stage's
gradients are all-reduced over its ``d`` servers (all stages at once; after the flush, Megatron's
default without ``overlap_grad_reduce``).

**Efficiency** = mixed throughput / the sum of the groups' throughputs alone, as the study defines
it. In data parallel a group alone is the same job (model, global batch, buckets, NICs, network
configuration) on that group's own servers in the slots they had: its compute per step grows as
the group is smaller, its all-reduce takes about as long (a ring takes about 2 S / B at any
size), which is where the network enters. In pipeline parallel a group alone needs no
pipeline (each of its servers holds every layer, tensor-parallel inside the server); it is
charged the mixed pipeline's bubble fraction ``(G - 1) / (v m)``, otherwise two identical groups
would score below 100 % for the pipeline's fill and drain, not for mixing. What the mixed
pipeline loses beyond that is the stage imbalance whole layers leave (the head is not a block)
and its transfers. With an ideal network (``Network(..., ideal=True)``: every transfer takes no
time) what remains below 100 % is the whole-layer / whole-sample split over unequal speeds.

Communication runs in the fluid simulator (``engine.py``) on the fabric under the given
configuration. A ring all-reduce above ``sim_bytes`` is simulated at the larger of ``sim_bytes``
and one NCCL slice per ring step (below that the fluid step, not the network, would limit the
ring's pipeline) and its time scaled linearly; the factor is reported.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from icefabric.control.ccl.job import parse_job
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.devices import Device, device
from icefabric.sim.engine import Simulator
from icefabric.sim.model import LLAMA2_13B, TransformerModel
from icefabric.sim.stripes import stripe
from icefabric.sim.workload import NCCL_SLICE_BYTES, workload_from_jobs
from icefabric.topo.generators import leaf_spine
from icefabric.topo.spec import TopologySpec
from icefabric.traffic.modes import Mode


@dataclass(slots=True, frozen=True, kw_only=True)
class Group:
    """Servers of one accelerator type."""

    device: str
    servers: int


@dataclass(slots=True, frozen=True, kw_only=True)
class Cluster:
    """Servers and fabric."""

    gpus: int = 8  # accelerators per server (an HGX / OAM board of 8)
    nics: int = 8  # NICs per server: one per GPU on rail-optimised fabrics; 1: one per server
    nic_gbps: float = 400.0  # ConnectX-7 / 400GbE per NIC
    servers_per_leaf: int = 32  # DGX SuperPOD scalable unit: 32 servers, one leaf per rail
    channels_per_nic: int = 2  # NCCL rings per NIC (NCCL opens 2 per NIC on such servers)

    def __post_init__(self) -> None:
        for name in ("gpus", "nics", "servers_per_leaf", "channels_per_nic"):
            if getattr(self, name) < 1:
                raise ValueError(f"cluster.{name}: expected >= 1, got {getattr(self, name)!r}")
        if self.gpus % self.nics:
            raise ValueError(
                f"cluster.nics: expected a divisor of gpus={self.gpus}, got {self.nics}"
            )
        if not self.nic_gbps > 0:
            raise ValueError(f"cluster.nic_gbps: expected > 0, got {self.nic_gbps!r}")


@dataclass(slots=True, frozen=True, kw_only=True)
class Training:
    """The model and batch."""

    model: TransformerModel = LLAMA2_13B
    global_batch: int = 256  # samples per step (the study does not publish its batch; 1 M tokens)
    micro_batch: int = 1  # samples per micro-batch (pipeline parallel)
    overlap: bool = True  # data parallel: bucketed all-reduce overlapped with backward
    bucket_elements: int | None = None  # per GPU; None: Megatron's max(40 M, 1 M x DP size)

    def __post_init__(self) -> None:
        if self.global_batch < 1 or self.micro_batch < 1:
            raise ValueError(
                f"training: expected global_batch, micro_batch >= 1, got "
                f"{self.global_batch}, {self.micro_batch}"
            )
        if self.bucket_elements is not None and self.bucket_elements < 1:
            raise ValueError(f"training.bucket_elements: expected >= 1, got {self.bucket_elements}")


@dataclass(slots=True, frozen=True, kw_only=True)
class Scenario:
    """One mixed-training case."""

    name: str
    parallel: str  # "dp" or "pp"
    groups: tuple[Group, ...]
    training: Training = field(default_factory=Training)
    interleave: int = 1  # pipeline parallel: stages per group (Megatron's virtual stages)
    study_efficiency: float | None = None  # the companion study's figure, for comparison

    def __post_init__(self) -> None:
        if self.parallel not in ("dp", "pp"):
            raise ValueError(f"{self.name}: parallel: expected 'dp' or 'pp', got {self.parallel!r}")
        if not self.groups or any(g.servers < 1 for g in self.groups):
            raise ValueError(f"{self.name}: groups: expected at least one, each >= 1 server")
        if self.interleave < 1:
            raise ValueError(f"{self.name}: interleave: expected >= 1, got {self.interleave}")


@dataclass(slots=True, frozen=True, kw_only=True)
class StepTime:
    """One training step of one configuration of servers (seconds)."""

    servers: int
    compute_s: float  # the step with an infinitely fast network
    comm_s: float  # what the network adds: step_s - compute_s
    step_s: float
    throughput: float  # samples / s
    comm_scale: float  # largest factor from simulated to real bytes


@dataclass(slots=True, frozen=True, kw_only=True)
class HeteroResult:
    """A scenario under one network configuration."""

    scenario: str
    parallel: str
    label: str
    gpus: int
    seed: int
    mixed: StepTime
    groups: dict[str, StepTime]
    efficiency: float
    compute_efficiency: float  # the same with an infinitely fast network
    study_efficiency: float | None


@dataclass(slots=True, frozen=True)
class Server:
    """One server of a job: its effective FLOP/s and its NICs' topology hosts (rail order)."""

    speed: float
    hosts: tuple[str, ...]


# ---------------------------------------------------------------------------- the fabric


def fabric(servers: int, cluster: Cluster) -> TopologySpec:
    """A rail-optimised 1:1 leaf-spine with room for ``servers`` servers (whole units)."""
    per_leaf = min(cluster.servers_per_leaf, servers)
    units = math.ceil(servers / per_leaf)
    return leaf_spine(
        leaves=units * cluster.nics,
        spines=max(1, per_leaf // 2),
        hosts_per_leaf=per_leaf,
        host_rate_gbps=cluster.nic_gbps,
        name=f"rail-{cluster.nics}x{units}u-{per_leaf}",
    )


def slot_hosts(spec: TopologySpec, slot: int, cluster: Cluster, per_leaf: int) -> tuple[str, ...]:
    """The hosts of server slot ``slot``: NIC k on rail k's leaf of the slot's unit."""
    unit, pos = divmod(slot, per_leaf)
    return tuple(
        spec.hosts[(unit * cluster.nics + k) * per_leaf + pos].name for k in range(cluster.nics)
    )


def place(servers: int, cluster: Cluster, seed: int) -> tuple[TopologySpec, list[tuple[str, ...]]]:
    """The fabric and each job server's hosts: the slots in a seeded shuffle."""
    spec = fabric(servers, cluster)
    per_leaf = min(cluster.servers_per_leaf, servers)
    slots = len(spec.hosts) // cluster.nics
    order = np.random.default_rng(seed).permutation(slots)[:servers]
    return spec, [slot_hosts(spec, int(s), cluster, per_leaf) for s in order]


# ---------------------------------------------------------------------------- the network


class Network:
    """Simulated transfer times on one fabric under one configuration (cached by traffic)."""

    def __init__(
        self,
        topo: Topology,
        config: SimConfig,
        *,
        channels: int = 2,
        sim_bytes: int = 64 << 20,
        ideal: bool = False,
        stripes: int = 1,
    ) -> None:
        self.topo = topo
        self.config = config
        self.channels = channels
        self.stripes = stripes  # QPs per connection (E-ECMP's k, spraying's stripes; stripes.py)
        self.sim_bytes = sim_bytes
        self.ideal = ideal
        self.max_scale = 1.0
        self._cache: dict[tuple[object, ...], float] = {}

    def allreduce_s(self, rings: Sequence[Sequence[str]], nbytes: float) -> float:
        """Ring all-reduces of ``nbytes`` each over every ring of ``rings`` at once."""
        rings = [list(r) for r in rings if len(set(r)) > 1]
        if self.ideal or not rings or nbytes <= 0:
            return 0.0
        n = max(len(r) for r in rings)
        cap = max(self.sim_bytes, n * self.channels * NCCL_SLICE_BYTES)
        sim = int(min(nbytes, cap))
        key = ("ar", tuple(tuple(r) for r in rings), sim)
        if key not in self._cache:
            phase = {
                "name": "grads",
                "collective": "all-reduce",
                "algorithm": "ring",
                "channels": self.channels,
                "message_bytes": sim,
            }
            self._cache[key] = self._run([(r, phase) for r in rings])
        self.max_scale = max(self.max_scale, nbytes / sim)
        return self._cache[key] * nbytes / sim

    def sendrecv_s(self, pairs: Sequence[tuple[str, str]], nbytes: float) -> float:
        """Every ``(src, dst)`` of ``pairs`` sends ``nbytes`` at once (send-recv)."""
        pairs = [p for p in pairs if p[0] != p[1]]
        if self.ideal or not pairs or nbytes <= 0:
            return 0.0
        sim = int(min(nbytes, self.sim_bytes))
        key = ("sr", tuple(pairs), sim)
        if key not in self._cache:
            hosts = list(dict.fromkeys(h for pair in pairs for h in pair))
            idx = {h: i for i, h in enumerate(hosts)}
            phase = {
                "name": "act",
                "collective": "send-recv",
                "channels": 1,
                "message_bytes": sim,
                "pairs": [[idx[a], idx[b]] for a, b in pairs],
            }
            self._cache[key] = self._run([(hosts, phase)])
        self.max_scale = max(self.max_scale, nbytes / sim)
        return self._cache[key] * nbytes / sim

    def _run(self, jobs: Sequence[tuple[Sequence[str], dict[str, object]]]) -> float:
        specs = [
            parse_job({"name": f"j{k}", "hosts": list(hosts), "phases": [phase]})
            for k, (hosts, phase) in enumerate(jobs)
        ]
        work = stripe(workload_from_jobs(specs), self.stripes)
        res = Simulator(self.topo, work, self.config).run()
        if res.unfinished:
            raise RuntimeError(f"hetero: {res.unfinished} flows unfinished at max_time_us")
        return float(res.completion_us) * 1e-6


# ---------------------------------------------------------------------------- splits


def _split(total: int, weights: Sequence[float], minimum: int = 0) -> list[int]:
    """Whole units over workers of speed ``weights``, each >= ``minimum``, minimising the
    slowest worker's time ``max(units_i / weights_i)``.

    Every unit beyond the minima goes to the worker that would finish it soonest (ties: the
    first); with separable increasing costs this greedy is optimal for the min-max objective.
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


def stage_split(costs: Sequence[float], speeds: Sequence[float]) -> list[int]:
    """Contiguous stages of ``costs`` (one per entry of ``speeds``, in order, each at least one
    layer) minimising the slowest stage's ``sum(costs) / speed``; returns each stage's layer
    count. Exact (dynamic programming over split points)."""
    n, k = len(costs), len(speeds)
    if k > n:
        raise ValueError(f"pipeline of {k} stages but only {n} layers")
    pre = np.concatenate([[0.0], np.cumsum(costs)])
    inf = math.inf
    best = np.full((k + 1, n + 1), inf)
    cut = np.zeros((k + 1, n + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n - (k - j) + 1):
            for a in range(j - 1, i):
                v = max(best[j - 1, a], (pre[i] - pre[a]) / speeds[j - 1])
                if v < best[j, i]:
                    best[j, i], cut[j, i] = v, a
    counts = []
    i = n
    for j in range(k, 0, -1):
        a = int(cut[j, i])
        counts.append(i - a)
        i = a
    return counts[::-1]


# ---------------------------------------------------------------------------- data parallel


def _buckets(training: Training, gpus: int, dp: int) -> list[tuple[float, float]]:
    """Gradient buckets in backward order: (elements per GPU, backward fraction done when it is
    complete). Megatron fills buckets parameter by parameter; here a layer's gradients appear
    evenly over its backward, so a bucket that closes inside a layer is ready part-way through."""
    model = training.model
    layers = model.layer_list()[::-1]
    cap = float(training.bucket_elements or max(40_000_000, 1_000_000 * dp))
    # backward FLOPs per layer: train_flops_sample less the forward
    bwd = [model.train_flops_sample(x) - x.fwd_flops_token * model.seq for x in layers]
    total = sum(bwd) or 1.0
    out: list[tuple[float, float]] = []
    fill, done = 0.0, 0.0
    for x, b in zip(layers, bwd, strict=True):
        left = x.params / gpus
        share = b / total
        while left > 0 and fill + left >= cap:
            take = cap - fill
            part = share * take / (x.params / gpus)
            done += part
            out.append((cap, min(done, 1.0)))
            fill, left = 0.0, left - take
        fill += left
        done += share * left / (x.params / gpus) if x.params else share
    if fill > 0:
        out.append((fill, 1.0))
    return out


def grad_rings(servers: Sequence[Server], cluster: Cluster) -> list[list[str]]:
    """One ring per rail: NIC k of every server, in the servers' order."""
    return [[s.hosts[k] for s in servers] for k in range(cluster.nics)]


def grad_allreduce_s(
    servers: Sequence[Server],
    elements_per_gpu: float,
    cluster: Cluster,
    net: Network,
    grad_bytes: int,
) -> float:
    """The all-reduce of ``elements_per_gpu`` gradient elements on every GPU of ``servers``."""
    per_nic = elements_per_gpu * grad_bytes * (cluster.gpus // cluster.nics)
    return net.allreduce_s(grad_rings(servers, cluster), per_nic)


def dp_step(
    servers: Sequence[Server], training: Training, cluster: Cluster, net: Network
) -> StepTime:
    """One data-parallel step over ``servers`` (one replica each)."""
    model = training.model
    layers = model.layer_list()
    f_sample = sum(model.train_flops_sample(x) for x in layers)
    fwd_share = sum(x.fwd_flops_token for x in layers) * model.seq / f_sample
    samples = _split(training.global_batch, [s.speed for s in servers])
    compute = [n * f_sample / s.speed for n, s in zip(samples, servers, strict=True)]
    fwd = [c * fwd_share for c in compute]
    bwd = [c - f for c, f in zip(compute, fwd, strict=True)]
    done = max(compute)
    finish = done
    if len(servers) > 1:
        clock = 0.0
        for elements, frac in _buckets(training, cluster.gpus, len(servers)):
            ready = max(f + b * frac for f, b in zip(fwd, bwd, strict=True))
            a = grad_allreduce_s(servers, elements, cluster, net, model.grad_bytes)
            clock = (max(ready, clock) if training.overlap else max(done, clock)) + a
        finish = max(done, clock)
    return StepTime(
        servers=len(servers),
        compute_s=done,
        comm_s=finish - done,
        step_s=finish,
        throughput=training.global_batch / finish,
        comm_scale=net.max_scale,
    )


# ---------------------------------------------------------------------------- pipeline parallel


def pp_step(
    stages: Sequence[Sequence[Server]],
    training: Training,
    cluster: Cluster,
    net: Network,
    *,
    interleave: int = 1,
) -> StepTime:
    """One pipeline-parallel step: ``stages[g]`` are group g's servers (the same count ``d`` in
    every group; server p of every group forms pipeline p)."""
    model = training.model
    g_n = len(stages)
    d = len(stages[0])
    if any(len(s) != d for s in stages):
        raise ValueError(
            f"pipeline parallel: every group needs the same number of servers, got "
            f"{[len(s) for s in stages]}"
        )
    m, rem = divmod(training.global_batch, d * training.micro_batch)
    if m < 1 or rem:
        raise ValueError(
            f"pipeline parallel: global_batch {training.global_batch} is not a whole number of "
            f"micro-batches of {training.micro_batch} over {d} pipelines"
        )
    v = interleave
    if v > 1 and m % g_n:
        raise ValueError(f"interleaved pipeline: micro-batches {m} not a multiple of {g_n} stages")
    layers = model.layer_list()
    costs = [model.train_flops_sample(x) * training.micro_batch for x in layers]
    speeds = [st[0].speed for st in stages]
    chunk_speed = [speeds[j % g_n] for j in range(g_n * v)]
    counts = stage_split(costs, chunk_speed)
    t = [0.0] * g_n
    params = [0.0] * g_n
    k = 0
    for j, cnt in enumerate(counts):
        t[j % g_n] += sum(costs[k : k + cnt]) / chunk_speed[j]
        params[j % g_n] += sum(x.params for x in layers[k : k + cnt])
        k += cnt
    # activations forward and their gradients backward over every stage boundary at once, each
    # NIC sending its 1 / nics share on its rail (Megatron's scatter/gather)
    bounds = [(g, g + 1) for g in range(g_n - 1)] + ([(g_n - 1, 0)] if v > 1 and g_n > 1 else [])
    pairs = [
        (stages[a][p].hosts[r], stages[b][p].hosts[r])
        for a, b in bounds
        for p in range(d)
        for r in range(cluster.nics)
    ]
    pairs += [(y, x) for x, y in pairs]
    c = net.sendrecv_s(pairs, model.activation_bytes(training.micro_batch) / cluster.nics)
    slot = max(max(t), c)
    fill = (sum(t) - max(t)) / v
    pipe = m * slot + fill + 2 * (g_n * v - 1) * c
    ideal = m * max(t) + fill
    rings = [ring for g in range(g_n) for ring in grad_rings(stages[g], cluster)]
    per_nic = max(params) / cluster.gpus * model.grad_bytes * (cluster.gpus // cluster.nics)
    # every stage's all-reduce at once; the stage holding the most parameters sets the time
    grads = net.allreduce_s(rings, per_nic) if d > 1 else 0.0
    step = pipe + grads
    return StepTime(
        servers=g_n * d,
        compute_s=ideal,
        comm_s=step - ideal,
        step_s=step,
        throughput=training.global_batch / step,
        comm_scale=net.max_scale,
    )


def pp_alone_step(
    servers: Sequence[Server],
    training: Training,
    cluster: Cluster,
    net: Network,
    *,
    bubble: float,
) -> StepTime:
    """A group alone in a pipeline-parallel job: every server holds all layers (no pipeline),
    ``m`` micro-batches each, charged the mixed pipeline's ``bubble`` fraction; then the
    gradients of the whole model all-reduced over its servers."""
    model = training.model
    d = len(servers)
    m = training.global_batch // (d * training.micro_batch)
    per_mb = (
        sum(model.train_flops_sample(x) for x in model.layer_list())
        * training.micro_batch
        / servers[0].speed
    )
    ideal = m * per_mb * (1.0 + bubble)
    grads = grad_allreduce_s(servers, model.params / cluster.gpus, cluster, net, model.grad_bytes)
    step = ideal + grads
    return StepTime(
        servers=d,
        compute_s=ideal,
        comm_s=grads,
        step_s=step,
        throughput=training.global_batch / step,
        comm_scale=net.max_scale,
    )


# ---------------------------------------------------------------------------- scenarios


def _efficiency(
    scenario: Scenario,
    placed: Sequence[tuple[int, Server]],
    cluster: Cluster,
    net: Network,
) -> tuple[StepTime, dict[str, StepTime], float]:
    tr = scenario.training
    keys = [f"{gi}:{g.device}" for gi, g in enumerate(scenario.groups)]
    by_group = [[s for gi, s in placed if gi == k] for k in range(len(scenario.groups))]
    groups: dict[str, StepTime] = {}
    if scenario.parallel == "dp":
        mixed = dp_step([s for _, s in placed], tr, cluster, net)
        for key, mine in zip(keys, by_group, strict=True):
            groups[key] = dp_step(mine, tr, cluster, net)
    else:
        mixed = pp_step(by_group, tr, cluster, net, interleave=scenario.interleave)
        d = len(by_group[0])
        m = tr.global_batch // (d * tr.micro_batch)
        bubble = (len(by_group) - 1) / (scenario.interleave * m)
        for key, mine in zip(keys, by_group, strict=True):
            groups[key] = pp_alone_step(mine, tr, cluster, net, bubble=bubble)
    total = sum(g.throughput for g in groups.values())
    return mixed, groups, mixed.throughput / total if total > 0 else 0.0


def run_scenario(
    scenario: Scenario,
    config: SimConfig,
    *,
    seed: int = 1,
    cluster: Cluster | None = None,
    table: Mapping[str, Device] | None = None,
    sim_bytes: int = 64 << 20,
    mode: Mode | None = None,
) -> HeteroResult:
    """Mixed and per-group step times and the efficiency under ``config`` (and with an ideal
    network), the servers placed on a rail-optimised fabric by ``seed``; ``mode``: the
    ``traffic/modes.py`` mode ``config`` runs, whose QPs per connection (E-ECMP, spraying) the
    transfers are striped over."""
    cl = cluster or Cluster()
    need = sum(g.servers for g in scenario.groups)
    spec, hosts = place(need, cl, seed)
    topo = Topology(spec)
    placed: list[tuple[int, Server]] = []
    k = 0
    for gi, g in enumerate(scenario.groups):
        d = device(g.device, table)
        for _ in range(g.servers):
            placed.append((gi, Server(speed=d.flops * cl.gpus, hosts=hosts[k])))
            k += 1
    k = 1
    if mode is not None:
        from icefabric.sim.matrix import stripes_for  # the matrix's rule, one definition

        k = stripes_for(mode, topo, 0)
    net = Network(topo, config, channels=cl.channels_per_nic, sim_bytes=sim_bytes, stripes=k)
    mixed, groups, eff = _efficiency(scenario, placed, cl, net)
    ideal = Network(topo, config, ideal=True)
    _, _, eff_ideal = _efficiency(scenario, placed, cl, ideal)
    return HeteroResult(
        scenario=scenario.name,
        parallel=scenario.parallel,
        label=config.label,
        gpus=need * cl.gpus,
        seed=seed,
        mixed=mixed,
        groups=groups,
        efficiency=eff,
        compute_efficiency=eff_ideal,
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
            Group(device="BIV100", servers=4),
            Group(device="BR104", servers=4),
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
