"""The state file a primary writes and a backup loads when it takes over.

It holds the running jobs, failed links and switches, the links the probes took down, the real
flow keys agents reported and each flow's chosen path, so a backup that takes over plans the same
paths and writes nothing to the switches. Format: :mod:`icefabric.control.daemon.state`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import check_hosts
from icefabric.control.daemon.state import StateWriteError, encode_state, load_state
from icefabric.private import write_private

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.planner.planner import Planner
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
    """Saving and loading the shared state file for the Controller (mixed in)."""

    spec: TopologySpec
    topo: Topology
    planner: Planner
    pool: SwitchPool
    agents: AgentHub
    jobs: dict[str, JobSpec]
    flows: dict[str, Flow]
    failed_switches: set[str]
    state_file: Path | None
    state_errors: list[str]
    _state_written: bytes
    _probe_down: set[int]

    if TYPE_CHECKING:  # the Controller's job registry

        def _register(self, job: JobSpec, flows: Iterable[Flow]) -> None: ...

    def _save_state(self, *, without_job: str | None = None) -> None:
        """Write the state as it is in memory (``without_job``: as it will be once that job is
        removed). The rule every change follows: the state is written *before* its entries
        reach a switch (:meth:`DesiredState._install_change` saves first), so when the write
        fails (StateWriteError) the caller rolls its change back and the switches keep what the
        file says."""
        if self.state_file is None:
            return
        failed = [i for i in range(self.topo.n_links) if self.topo.failed[i]]
        by_flow = self.planner.choices()
        choices = {
            name: [by_flow.get(fid, -1) for fid in fids]
            for name, fids in self._flows_by_job().items()
            if name != without_job
        }
        keys = self.agents.flows.to_state()
        if without_job is not None:
            keys = {
                fid: k
                for fid, k in keys.items()
                if getattr(self.flows.get(fid), "job", None) != without_job
            }
        data = encode_state(
            self.spec.name,
            [j for j in self.jobs.values() if j.name != without_job],
            failed_links=failed,
            failed_switches=self.failed_switches,
            probe_down_links=self._probe_down,
            flow_keys=keys,
            choices=choices,
        )
        if data == self._state_written and self.state_file.exists():
            return
        try:
            write_private(self.state_file, data)
        except OSError as exc:
            log.error("state file %s: cannot write: %s", self.state_file, exc.strerror or exc)
            raise StateWriteError(
                f"state file {self.state_file}: cannot write ({exc.strerror or exc}); the change "
                "was not applied: the switches still hold what the file says"
            ) from exc
        self._state_written = data

    def _snapshot(self) -> _Snapshot:
        """What a change may alter, to put back when its state write fails."""
        return _Snapshot(
            failed=self.topo.failed.copy(),
            failed_switches=set(self.failed_switches),
            probe_down=set(self._probe_down),
            choices=self.planner.choices(),
        )

    def _rollback(self, snap: _Snapshot) -> None:
        """Undo a failure/restore change whose state write failed (nothing was written to a
        switch): the failed links and switches as they were, every flow on its old path."""
        self.topo.failed[:] = snap.failed
        self.failed_switches.clear()
        self.failed_switches.update(snap.failed_switches)
        self._probe_down.clear()
        self._probe_down.update(snap.probe_down)
        self.planner.pin(snap.choices)

    def _load_state(self) -> None:
        assert self.state_file is not None
        state = load_state(self.state_file, self.spec.name)
        n_links = self.topo.n_links
        bad_links = [i for i in state.failed_links + state.probe_down_links if not 0 <= i < n_links]
        if bad_links:
            state.errors.append(
                f"{self.state_file}: link ids {bad_links[:5]} are not links of {self.spec.name} "
                f"(0..{n_links - 1}); ignored"
            )
        failed_links = [i for i in state.failed_links if 0 <= i < n_links]
        if failed_links:
            self.topo.failed[failed_links] = True
        self.failed_switches.update(s for s in state.failed_switches if s in self.pool)
        # Links the old primary's probes took down: ours restore them when probes come back.
        self._probe_down.update(i for i in state.probe_down_links if 0 <= i < n_links)
        for job in state.jobs:
            problems = check_hosts(job, (h.name for h in self.spec.hosts), topology=self.spec.name)
            if problems or job.name in self.jobs:
                state.errors.append(
                    problems[0] if problems else f"job {job.name!r} listed twice; second ignored"
                )
                continue
            try:
                demand = demand_from_job(job)
                self.planner.add(demand)
            except Exception as exc:  # a job that cannot be planned must not stop the takeover
                state.errors.append(f"{self.state_file}: job {job.name!r}: {exc}")
                continue
            self._register(job, demand.flows)
            self.agents.job_added(job.name, job.phases[0].name)
        for fid, key in state.flow_keys.items():  # real keys agents reported to the old primary
            if fid in self.flows:
                self.agents.flows.set_key(fid, key)
        saved: dict[str, int] = {}
        for name, fids in self._flows_by_job().items():
            got = state.choices.get(name, [])
            if len(got) == len(fids):
                saved.update(zip(fids, got, strict=True))
        moved = self.planner.pin(saved)
        if moved:
            log.info("%s: %d flow(s) put back on the primary's paths", self.state_file, moved)
        self.state_errors = state.errors
        for e in state.errors:
            log.error("state file: %s", e)
        if state.errors:
            log.error(
                "%s: %d problem(s); taking over with the %d job(s) that could be read",
                self.state_file,
                len(state.errors),
                len(self.jobs),
            )
        log.info(
            "%s: %d job(s), %d failed link(s) loaded",
            self.state_file,
            len(self.jobs),
            len(failed_links) // 2,
        )

    def _flows_by_job(self) -> dict[str, list[str]]:
        """Each job's flow ids in the order they were registered (the order of its demand)."""
        out: dict[str, list[str]] = {name: [] for name in self.jobs}
        for fid, f in self.flows.items():
            if f.job in out:
                out[f.job].append(fid)
        return out
