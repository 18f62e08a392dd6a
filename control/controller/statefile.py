"""The shared state a primary saves and a backup loads when it takes over, through the
Controller's store (:mod:`icefabric.control.store`: the local state file or etcd).

It holds the running jobs, failed links and switches, the links the probes took down, the real
flow keys agents reported and each flow's chosen path (and, in etcd, the jobs' phases and the
caps), so a backup that takes over plans the same paths and writes nothing to the switches.
File format: :mod:`icefabric.control.daemon.state`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import check_hosts
from icefabric.control.daemon.state import StateWriteError
from icefabric.control.store.base import Snapshot, StoreError

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.congestion.allocator import RateAllocator
    from icefabric.control.planner.planner import Planner
    from icefabric.control.store.base import StateStore
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)

__all__ = ["StateFile", "StateWriteError"]


@dataclass(slots=True)
class _Snapshot:
    failed: np.ndarray
    failed_switches: set[str]
    probe_down: set[int]
    choices: dict[str, int]


class StateFile:
    """Saving and loading the shared state through the store, for the Controller that owns
    it: handed the topology, the switch names, the job registry, failures, the agent hub and
    rate allocator explicitly, the planner as a callable (a takeover replaces it)."""

    def __init__(
        self,
        *,
        spec: TopologySpec,
        topo: Topology,
        switches: Container[str],
        store: StateStore | None,
        jobs: dict[str, JobSpec],
        flows: dict[str, Flow],
        failed_switches: set[str],
        probe_down: set[int],
        agents: AgentHub,
        rates: RateAllocator,
        planner: Callable[[], Planner],
        register: Callable[[JobSpec, Iterable[Flow]], None],
    ) -> None:
        self.spec = spec
        self.topo = topo
        self.switches = switches
        self.store = store
        self.jobs = jobs
        self.flows = flows
        self.failed_switches = failed_switches
        self.probe_down = probe_down
        self.agents = agents
        self.rates = rates
        self.planner = planner
        self.register = register
        self.errors: list[str] = []  # what the last load could not read

    def snapshot(self, *, without_job: str | None = None) -> Snapshot:
        """What the store keeps: jobs, failures, real keys, path choices, phases, caps
        (``without_job``: as it will be once that job is removed)."""
        by_flow = self.planner().choices()
        gone = {fid for fid, f in self.flows.items() if f.job == without_job}
        return Snapshot(
            topology=self.spec.name,
            jobs=[j for j in self.jobs.values() if j.name != without_job],
            failed_links=[i for i in range(self.topo.n_links) if self.topo.failed[i]],
            failed_switches=sorted(self.failed_switches),
            probe_down_links=sorted(self.probe_down),
            flow_keys={k: v for k, v in self.agents.flows.to_state().items() if k not in gone},
            choices={
                name: [by_flow.get(fid, -1) for fid in fids]
                for name, fids in self.flows_by_job().items()
                if name != without_job
            },
            phases={j: p for j, p in self.agents.phases.items() if j != without_job},
            caps={k: v for k, v in self.rates.rates.items() if k not in gone},
        )

    def save(self, *, without_job: str | None = None) -> None:
        """Write the state as it is in memory (``without_job``: as it will be once that job is
        removed) to the store. The rule every change follows: the state is written *before* its
        entries reach a switch (:meth:`ChangeInstaller.install` saves first), so when the
        write fails (StateWriteError; with etcd also when this replica is no longer primary)
        the caller rolls its change back and the switches keep what the store says."""
        if self.store is None:
            return
        try:
            self.store.save(self.snapshot(without_job=without_job))
        except StateWriteError:
            raise
        except StoreError as exc:
            log.error("%s", exc)
            raise StateWriteError(
                f"{exc}; the change was not applied: the switches still hold what the store says"
            ) from exc

    def mark(self) -> _Snapshot:
        """What a change may alter, to put back when its state write fails."""
        return _Snapshot(
            failed=self.topo.failed.copy(),
            failed_switches=set(self.failed_switches),
            probe_down=set(self.probe_down),
            choices=self.planner().choices(),
        )

    def rollback(self, snap: _Snapshot) -> None:
        """Undo a failure/restore change whose state write failed (nothing was written to a
        switch): the failed links and switches as they were, every flow on its old path."""
        self.topo.failed[:] = snap.failed
        self.failed_switches.clear()
        self.failed_switches.update(snap.failed_switches)
        self.probe_down.clear()
        self.probe_down.update(snap.probe_down)
        self.planner().pin(snap.choices)

    def load(self) -> None:
        """Jobs, failures, real keys, path choices and phases from the store (a takeover);
        what cannot be read is kept in ``errors`` and logged, never raised."""
        assert self.store is not None
        where = self.store.where()
        state = self.store.load(self.spec.name)
        n_links = self.topo.n_links
        bad_links = [i for i in state.failed_links + state.probe_down_links if not 0 <= i < n_links]
        if bad_links:
            state.errors.append(
                f"{where}: link ids {bad_links[:5]} are not links of {self.spec.name} "
                f"(0..{n_links - 1}); ignored"
            )
        failed_links = [i for i in state.failed_links if 0 <= i < n_links]
        if failed_links:
            self.topo.failed[failed_links] = True
        self.failed_switches.update(s for s in state.failed_switches if s in self.switches)
        # Links the old primary's probes took down: ours restore them when probes come back.
        self.probe_down.update(i for i in state.probe_down_links if 0 <= i < n_links)
        for job in state.jobs:
            problems = check_hosts(job, (h.name for h in self.spec.hosts), topology=self.spec.name)
            if problems or job.name in self.jobs:
                state.errors.append(
                    problems[0] if problems else f"job {job.name!r} listed twice; second ignored"
                )
                continue
            try:
                demand = demand_from_job(job)
                got = state.choices.get(job.name, [])
                if len(got) == len(demand.flows):  # straight onto the primary's paths
                    ids = [f.flow_id for f in demand.flows]
                    self.planner().add_pinned(demand, dict(zip(ids, got, strict=True)))
                else:
                    self.planner().add(demand)
            except Exception as exc:  # a job that cannot be planned must not stop the takeover
                state.errors.append(f"{where}: job {job.name!r}: {exc}")
                continue
            self.register(job, demand.flows)
            self.agents.job_added(job.name, job.phases[0].name)
        for fid, key in state.flow_keys.items():  # real keys agents reported to the old primary
            if fid in self.flows:
                self.agents.flows.set_key(fid, key)
        saved: dict[str, int] = {}
        for name, fids in self.flows_by_job().items():
            got = state.choices.get(name, [])
            if len(got) == len(fids):
                saved.update(zip(fids, got, strict=True))
        for job_name, phase in state.phases.items():  # the phase each job runs (etcd store)
            spec = self.jobs.get(job_name)
            if spec is not None and phase in {p.name for p in spec.phases}:
                self.agents.phases[job_name] = phase
        moved = self.planner().pin(saved)
        if moved:
            log.info("%s: %d flow(s) put back on the primary's paths", where, moved)
        self.errors[:] = state.errors
        for e in state.errors:
            log.error("state store: %s", e)
        if state.errors:
            log.error(
                "%s: %d problem(s); taking over with the %d job(s) that could be read",
                where,
                len(state.errors),
                len(self.jobs),
            )
        log.info(
            "%s: %d job(s), %d failed link(s) loaded",
            where,
            len(self.jobs),
            len(failed_links) // 2,
        )

    def flows_by_job(self) -> dict[str, list[str]]:
        """Each job's flow ids in the order they were registered (the order of its demand)."""
        out: dict[str, list[str]] = {name: [] for name in self.jobs}
        for fid, f in self.flows.items():
            if f.job in out:
                out[f.job].append(fid)
        return out
