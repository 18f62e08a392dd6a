"""The jobs a Controller runs: planned on top of each other, saved, installed, removed.

:class:`JobRegistry` keeps the jobs, their flows and the planned flow keys (the Controller's
dicts, changed in place) and runs a job's addition or removal through the planner, the shared
state (saved before any switch sees the change) and the Controller's install path; a job whose
state cannot be saved is forgotten again before anything reaches a switch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from icefabric.control.ccl.demand import Flow, demand_from_job
from icefabric.control.ccl.job import JobSpec, parse_job
from icefabric.control.daemon.state import StateWriteError
from icefabric.control.install import flow_key

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.flowkey import FlowKey
    from icefabric.control.install import ChangeReport
    from icefabric.control.planner.planner import Planner
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


class JobRejected(ValueError):
    """A job the controller will not plan (bad description, unknown host, duplicate name)."""


class JobRegistry:
    """Jobs, flows and planned keys of the Controller that owns it: handed the topology, lock,
    the dicts it keeps, the agent hub and event log explicitly, the planner as a callable (a
    takeover replaces it), the state save and the Controller's install path."""

    def __init__(
        self,
        *,
        spec: TopologySpec,
        topo: Topology,
        lock: threading.RLock,
        jobs: dict[str, JobSpec],
        flows: dict[str, Flow],
        keys: dict[FlowKey, str],
        agents: AgentHub,
        events: EventLog,
        planner: Callable[[], Planner],
        save_state: Callable[..., None],
        install_change: Callable[[str, float], ChangeReport],
    ) -> None:
        self.spec = spec
        self.topo = topo
        self.lock = lock
        self.jobs = jobs
        self.flows = flows
        self.keys = keys  # planned key -> flow id
        self.agents = agents
        self.events = events
        self.planner = planner
        self.save_state = save_state
        self.install_change = install_change

    def flow_of_key(self, key: FlowKey) -> str | None:
        """The planned flow a key belongs to: an agent's real key, else the planned key."""
        return self.agents.flow_of(key) or self.keys.get(key)

    def add(self, job: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
        """Plan a job's flows on top of the others and install them."""
        if not isinstance(job, JobSpec):
            try:
                job = parse_job(job, source="<jobs.add>")
            except ValueError as exc:
                raise JobRejected(str(exc)) from exc
        with self.lock:
            if job.name in self.jobs:
                raise JobRejected(f"job {job.name!r} is already running (remove it first)")
            known = {h.name for h in self.spec.hosts}
            bad = [
                f"ranks[{r.rank}].host: no host {r.host!r}"
                for r in job.ranks
                if r.host not in known
            ]
            if bad:
                raise JobRejected(
                    f"job {job.name}: " + "; ".join(bad) + f" in topology {self.spec.name!r}"
                )
            demand = demand_from_job(job)
            before = self.planner().choices()
            t0 = time.perf_counter()
            self.planner().add(demand)
            plan_s = time.perf_counter() - t0
            self.register(job, demand.flows)
            self.agents.job_added(job.name, job.phases[0].name)
            self.events.record(
                "job_add", f"job {job.name} added: {len(demand.flows)} flow(s)", job=job.name
            )
            try:
                rep = self.install_change(f"job {job.name} added", plan_s)
            except StateWriteError:  # nothing reached a switch: forget the job again
                fids = [f.flow_id for f in demand.flows]
                if fids:
                    self.planner().remove_job(job.name)
                    self.planner().pin(before)
                self.unregister(job.name, fids)
                raise
            return {
                "job": job.name,
                "flows": len(demand.flows),
                "entries": rep.entries,
                "install_ms": rep.install_ms,
                "plan_ms": rep.plan_ms,
                "max_load": rep.max_load,
            }

    def remove(self, name: str) -> dict[str, Any]:
        """Take a job's flows out of the plan and delete their entries."""
        with self.lock:
            if name not in self.jobs:
                raise JobRejected(
                    f"no job {name!r} (running: {', '.join(sorted(self.jobs)) or 'none'})"
                )
            # The state without the job is known before anything changes: written first, so a
            # failed write (StateWriteError) leaves the job running on switches and in the file.
            self.save_state(without_job=name)
            t0 = time.perf_counter()
            gone = [f for f, fl in self.flows.items() if fl.job == name]
            if gone:  # a job of ranks on one host has no network flow: nothing planned
                self.planner().remove_job(name)
            plan_s = time.perf_counter() - t0
            self.unregister(name, gone)
            self.events.record("job_remove", f"job {name} removed", job=name)
            rep = self.install_change(f"job {name} removed", plan_s)
            return {"job": name, "entries": rep.entries, "install_ms": rep.install_ms}

    def ensure(self, job: JobSpec) -> str:
        """Make ``job`` run as given, idempotently (``icectl run --job`` on a restart finds it
        in the state file): "added", "unchanged", or "replaced" when a job of that name ran
        with another description."""
        with self.lock:
            running = self.jobs.get(job.name)
            if running is not None and running.to_dict() == job.to_dict():
                log.info("job %s: already running as given (state file); unchanged", job.name)
                return "unchanged"
            if running is not None:
                log.warning("job %s: running with another description; replacing it", job.name)
                self.remove(job.name)
            self.add(job)
            return "added" if running is None else "replaced"

    def unregister(self, name: str, flow_ids: list[str]) -> None:
        """Forget a job, its flows and their planned keys (the agent hub too)."""
        self.jobs.pop(name, None)
        for fid in flow_ids:
            self.flows.pop(fid, None)
        self.agents.job_removed(name, flow_ids)
        kept = {k: v for k, v in self.keys.items() if v in self.flows}
        self.keys.clear()
        self.keys.update(kept)

    def register(self, job: JobSpec, flows: Iterable[Flow]) -> None:
        """Keep a job, its flows and their planned keys."""
        self.jobs[job.name] = job
        for f in flows:
            self.flows[f.flow_id] = f
            self.keys[flow_key(self.topo, f)] = f.flow_id
