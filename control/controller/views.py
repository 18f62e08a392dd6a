"""Read-only views of the controller for icectl: status, jobs, paths, switches, counters."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from icefabric.control.controller.health import fabric_health
from icefabric.control.install import explain
from icefabric.control.stats import read_stats
from icefabric.control.topology import TopologyError

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.controller.installer import Installer
    from icefabric.control.fabric import TagMap
    from icefabric.control.install import ChangeReport
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.planner.planner import Planner
    from icefabric.control.store.base import StateStore
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import TopologySpec


class ControllerViews:
    """The controller's answers to read commands, handed what they read explicitly (the
    Controller owns it; the callables read what a takeover replaces)."""

    def __init__(
        self,
        *,
        spec: TopologySpec,
        topo: Topology,
        tags: TagMap,
        pool: SwitchPool,
        lock: threading.RLock,
        jobs: Mapping[str, JobSpec],
        flows: Mapping[str, Flow],
        installer: Installer,
        agents: AgentHub,
        history: Sequence[ChangeReport],
        failed_switches: AbstractSet[str],
        down_since: Mapping[str, float],
        store: StateStore | None,
        takeovers: Sequence[dict[str, Any]],
        fenced: Sequence[dict[str, Any]],
        planner: Callable[[], Planner],
        election_id: Callable[[], int],
        is_active: Callable[[], bool],
        state_errors: Callable[[], list[str]],
        links: Callable[[], dict[str, Any]],
    ) -> None:
        self.spec = spec
        self.topo = topo
        self.tags = tags
        self.pool = pool
        self.lock = lock
        self.jobs = jobs
        self.flows = flows
        self.installer = installer
        self.agents = agents
        self.history = history
        self.failed_switches = failed_switches
        self.down_since = down_since
        self.store = store
        self.takeovers = takeovers
        self.fenced = fenced
        self.planner = planner
        self.election_id = election_id
        self.is_active = is_active
        self.state_errors = state_errors
        self.links = links

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every running job with its size."""
        with self.lock:
            out = []
            for name, job in self.jobs.items():
                flows = [f for f in self.flows.values() if f.job == name]
                out.append(
                    {
                        "name": name,
                        "ranks": len(job.ranks),
                        "hosts": len(job.hosts),
                        "phases": len(job.phases),
                        "flows": len(flows),
                        "bytes": float(sum(f.bytes for f in flows)),
                    }
                )
            return out

    def paths(self, flow: str | None = None, job: str | None = None) -> list[dict[str, Any]]:
        """Per planned flow: first hop, tag, switch path, match key (optionally one flow/job)."""
        with self.lock:
            keys = self.agents.flows.install_keys()
            rows = explain(self.topo, self.planner().plan(), self.flows, self.tags, keys)
        if flow is not None:
            rows = [r for r in rows if r["flow"] == flow]
        if job is not None:
            rows = [r for r in rows if r["job"] == job]
        return rows

    def status(self) -> dict[str, Any]:
        """Role, mode, switches (connected, primary, entries), jobs, the store and replicas."""
        store = self.store.describe() if self.store is not None else {"kind": "none"}
        standby = "standby" if self.store is not None and self.store.elects else "backup"
        with self.lock:
            plan = self.planner().plan()
            out = {
                "role": "primary" if self.is_active() else standby,
                "store": store,
                "takeovers": list(self.takeovers[-5:]),
                "fenced": list(self.fenced[-5:]),
                "election_id": self.election_id(),
                "mode": self.installer.options.mode,
                "topology": self.spec.name,
                "jobs": len(self.jobs),
                "flows": len(plan.flows),
                "max_load": plan.max_load_s,
                "failed_links": [
                    self.topo.link_name(i)
                    for i in range(0, self.topo.n_links, 2)
                    if self.topo.failed[i]
                ],
                "switches": {
                    name: {
                        "address": conn.address,
                        "device_id": conn.device_id,
                        "connected": conn.is_connected,
                        "primary": conn.is_primary,
                        "entries": len(self.installer.installed[name]),
                    }
                    for name, conn in self.pool.items()
                },
                "history": [h.to_dict() for h in self.history[-10:]],
                "state_errors": list(self.state_errors()),
                "link_probes": self.links(),
            }
            out["health"] = fabric_health(
                out, failed_switches=self.failed_switches, down_since=self.down_since
            )
            return out

    def switches(self) -> dict[str, dict[str, Any]]:
        """Address and device id of every switch (for icectl shell)."""
        election_id = self.election_id()
        return {
            name: {"address": c.address, "device_id": c.device_id, "election_id": election_id}
            for name, c in self.pool.items()
        }

    def stats(self, switch: str | None = None) -> dict[str, dict[str, Any]]:
        """Per switch: port rx/tx counters, per-tag packets, drops by reason (read live)."""
        names = [switch] if switch else list(self.pool)
        for name in names:
            if name not in self.pool:
                raise TopologyError(f"no switch {name!r} in topology {self.spec.name!r}")
        ports: dict[str, dict[int, str]] = {name: {} for name in names}
        for ln in self.topo.links:
            if ln.src in ports:
                ports[ln.src][ln.src_port] = "fabric" if ln.kind == "fabric" else "host"
        out: dict[str, dict[str, Any]] = {}
        results = self.pool.run_all(
            lambda c: read_stats(c, ports[c.name]),
            names=names,
            operation="stats",
            raise_errors=False,
        )
        for name in names:
            out[name] = results.get(name, {"error": "switch unreachable"})
        return out
