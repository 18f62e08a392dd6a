"""Heterogeneous mixed training: compute from the model and device tables, communication simulated.

A job trains one model (``model.py``) on *groups* of servers, one accelerator type per group
(``devices.py``). Inside a server the model is split tensor-parallel over its ``gpus`` over
NVLink (not modelled: Megatron keeps tensor parallelism inside the NVLink domain), so a server is
one data-parallel replica or one pipeline stage, and each GPU holds ``1 / gpus`` of its
parameters. Every assumption is a named field of ``Cluster`` or ``Training`` with its source.

The fabric and its transfer times are in ``railnet.py``, the data- and pipeline-parallel step
models in ``parallel.py``; this module runs a scenario through them.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.devices import Device, device
from icefabric.sim.parallel import (
    Server,
    StepTime,
    Training,
    dp_step,
    pp_alone_step,
    pp_step,
)
from icefabric.sim.railnet import Cluster, Network, place
from icefabric.traffic.modes import Mode

# re-exported: the step models and the fabric live in parallel.py and railnet.py
__all__ = [
    "STUDY_SCENARIOS",
    "Cluster",
    "Group",
    "HeteroResult",
    "Network",
    "Scenario",
    "Server",
    "StepTime",
    "Training",
    "run_scenario",
]


@dataclass(slots=True, frozen=True, kw_only=True)
class Group:
    """Servers of one accelerator type."""

    device: str
    servers: int


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
