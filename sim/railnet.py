"""The rail-optimised fabric a mixed training job runs on, and its simulated transfer times.

**Fabric** (``Cluster``, ``fabric``): ``nics`` NICs per server at ``nic_gbps`` on a
rail-optimised leaf-spine (NVIDIA DGX SuperPOD reference architecture: one leaf per rail per
scalable unit of ``servers_per_leaf`` = 32 servers, NIC k of every server on rail k's leaf), 1:1.
``nics=1`` is the one-NIC-per-server case. The job's servers take the fabric's server slots in a
seeded shuffle (a shared cluster's scheduler does not hand out neighbours), so rings and pipeline
neighbours cross the spines where slots fall in different units.

Communication runs in the fluid simulator (``engine.py``) on the fabric under the given
configuration. A ring all-reduce above ``sim_bytes`` is simulated at the larger of ``sim_bytes``
and one NCCL slice per ring step (below that the fluid step, not the network, would limit the
ring's pipeline) and its time scaled linearly; the factor is reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.job import parse_job
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import Simulator
from icefabric.sim.stripes import stripe
from icefabric.sim.workload import NCCL_SLICE_BYTES, workload_from_jobs
from icefabric.topo.generators import leaf_spine
from icefabric.topo.spec import TopologySpec


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
