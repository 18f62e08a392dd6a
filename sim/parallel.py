"""Step times of data- and pipeline-parallel training over servers of unequal speed.

Compute comes from the model (``model.py``) and each server's speed; communication from a
:class:`~icefabric.sim.railnet.Network` (the fluid simulator on the job's fabric).

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
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icefabric.sim.model import LLAMA2_13B, TransformerModel
from icefabric.sim.railnet import Cluster, Network


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
class StepTime:
    """One training step of one configuration of servers (seconds)."""

    servers: int
    compute_s: float  # the step with an infinitely fast network
    comm_s: float  # what the network adds: step_s - compute_s
    step_s: float
    throughput: float  # samples / s
    comm_scale: float  # largest factor from simulated to real bytes


@dataclass(slots=True, frozen=True)
class Server:
    """One server of a job: its effective FLOP/s and its NICs' topology hosts (rail order)."""

    speed: float
    hosts: tuple[str, ...]


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
