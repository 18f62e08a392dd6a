"""The Controller: its state, its lifetime (connect, take over, stop) and its public methods.

It owns one collaborator per concern and hands each what it needs explicitly (the objects it
shares, and callables for what a takeover replaces: the planner, the election id, whether it
is active): :mod:`.installer` (desired state -> entries -> writes), :mod:`.jobs` (jobs added,
removed, kept), :mod:`.changes` (every change's install path), :mod:`.statefile` (the shared
state, saved before every change), :mod:`.failures` (link and switch failures),
:mod:`.linkfail` (link probing), :mod:`.events` (the worker thread and switch events),
:mod:`.election` (etcd terms and fencing), :mod:`.views` (read-only answers), the agent hub,
the rate allocator and the telemetry store. No collaborator holds the Controller. Who is handed
what is :mod:`.assembly` (the constructor's last step).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from icefabric.control import fabric
from icefabric.control.agents.hub import AgentHub, HubContext
from icefabric.control.ccl.demand import Flow
from icefabric.control.ccl.job import JobSpec
from icefabric.control.congestion.allocator import DEFAULT_TARGET, RateAllocator
from icefabric.control.controller.assembly import own_collaborators
from icefabric.control.controller.changes import ChangeInstaller
from icefabric.control.controller.election import Election
from icefabric.control.controller.eventlog import EventLog, events_path
from icefabric.control.controller.events import SwitchEvents, Worker
from icefabric.control.controller.failures import FailureHandling
from icefabric.control.controller.installer import FLOW_TABLES, Installer
from icefabric.control.controller.jobs import JobRegistry
from icefabric.control.controller.linkfail import LinkProbing
from icefabric.control.controller.statefile import StateFile
from icefabric.control.controller.views import ControllerViews
from icefabric.control.fabric import FabricOptions, TagMap
from icefabric.control.flowkey import FlowKey
from icefabric.control.install import ChangeReport
from icefabric.control.linkmon import DEFAULT_INTERVAL_S, DEFAULT_MISSES, LinkMonitor
from icefabric.control.p4rt import Entity, PipelineConfig, SwitchConnection, SwitchPool
from icefabric.control.planner.plan import Plan
from icefabric.control.planner.planner import Planner
from icefabric.control.store import FileStore, StateStore, StoreFenced
from icefabric.control.telemetry.poller import CounterPoller, switch_ports
from icefabric.control.telemetry.reports import ReportLog
from icefabric.control.telemetry.source import MetricsSource
from icefabric.control.telemetry.store import TelemetryStore
from icefabric.control.topology import Topology
from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)

PRIMARY_ELECTION_ID = 100
# A switch whose P4Runtime connection broke is failed over after this long (icectl run
# --switch-dead; a killed process breaks it at once): detection within 1 s + the replan.
DEFAULT_SWITCH_DEAD_S = 1.0
BACKUP_ELECTION_ID = 50


class Controller:
    """Connections to every switch, the planner, what each switch holds, telemetry reports."""

    # Its collaborators of one concern each, built by assembly.own_collaborators.
    registry: JobRegistry
    statefile: StateFile
    changes: ChangeInstaller
    failures: FailureHandling
    probing: LinkProbing
    switch_events: SwitchEvents
    election: Election
    views: ControllerViews

    def __init__(
        self,
        spec: TopologySpec,
        pipeline: PipelineConfig,
        *,
        election_id: int | None = None,
        backup: bool = False,
        options: FabricOptions | None = None,
        method: str = "auto",
        plan_work_budget: int | None = None,
        addresses: Mapping[str, str] | None = None,
        state_file: str | Path | None = None,
        store: StateStore | None = None,
        report_buffer: int = 1000,
        connect_timeout: float = 10.0,
        switch_dead_s: float | None = DEFAULT_SWITCH_DEAD_S,
        probe_interval_s: float = DEFAULT_INTERVAL_S,
        probe_misses: int = DEFAULT_MISSES,
        rate_target: float = DEFAULT_TARGET,
        counter_poll_s: float = 0.0,
    ) -> None:
        self.spec = spec
        self.topo = Topology(spec)
        self.pipeline = pipeline
        self.backup = backup
        self.election_id = election_id or (BACKUP_ELECTION_ID if backup else PRIMARY_ELECTION_ID)
        self.tags: TagMap = fabric.allocate_tags(self.topo)
        # None: the planner stops on the wall clock (a live controller must answer in time);
        # counted steps make its plans independent of the load (the experiment engines)
        self.planner = Planner(self.topo, method=method, work_budget=plan_work_budget)
        self._planner_args = (method, plan_work_budget)
        self.jobs: dict[str, JobSpec] = {}
        self.flows: dict[str, Flow] = {}
        self._keys: dict[FlowKey, str] = {}  # planned key -> flow id
        self.reports = ReportLog(report_buffer, flow_of=self._flow_of_key)
        self.rates = RateAllocator(self.topo, target=rate_target)  # max-min fair caps
        if store is not None and state_file:
            raise ValueError("Controller: give a state_file or a store, not both")
        # the shared state: a FileStore for state_file (the default), or the store given (etcd)
        self.store: StateStore | None = FileStore(state_file) if state_file else store
        self.state_file = Path(state_file) if state_file else None
        # what happened, in order (icectl events): kept next to the state file across restarts
        self.events = EventLog(events_path(self.state_file) if self.state_file else None)
        self.lock = threading.RLock()
        self.worker = Worker()  # runs switch, link and agent events one at a time
        self.agents = AgentHub(  # host agents: real flow keys, caps (icectl run listens)
            HubContext(
                spec=spec,
                topo=self.topo,
                lock=self.lock,
                events=self.events,
                rates=self.rates,
                flows=self.flows,
                jobs=self.jobs,
                backup=backup,
                is_active=lambda: self.active,
                post=self.post,
                plan=lambda: self.planner.plan(),  # the planner is replaced on a new term
                save_state=lambda: self.statefile.save(),
                store_keeps_caps=lambda: self.store is not None and self.store.kind != "file",
                write_flow_entries=self.apply_flow_entries,
            )
        )
        self.telemetry = TelemetryStore(
            self.topo,
            target=rate_target,
            planned_path=self.agents.planned_path,
            on_over_target=self.agents.over_target,
        )
        self.connect_timeout = connect_timeout
        self.switch_dead_s = switch_dead_s
        self.history: list[ChangeReport] = []
        self.last_resync: dict[str, Any] = {}  # switch -> ResyncSummary of the last takeover
        self._addresses = dict(addresses or {})
        self._down_since: dict[str, float] = {}
        self.failed_switches: set[str] = set()
        if probe_interval_s < 0 or probe_misses < 1:
            raise ValueError(
                f"link probes: expected interval >= 0 s and misses >= 1, got "
                f"{probe_interval_s} s and {probe_misses}"
            )
        self.probe_interval_s = probe_interval_s  # 0: no link probing
        self.probe_misses = probe_misses
        self._resyncing: set[str] = set()  # reconnected switches not yet resynced: not probed
        self._probe_down: set[int] = set()  # links (even directed id) the probes took down
        self._stopping = False
        self.active = False  # True once this controller has installed the fabric as primary
        self.startup_jobs: list[JobSpec] = []  # etcd store: added after a takeover if missing
        self.takeovers: list[dict[str, Any]] = []  # etcd store: term, ms, writes of each takeover
        self.fenced: list[dict[str, Any]] = []  # etcd store: when and why it stopped writing
        self.pool = SwitchPool(
            SwitchConnection(
                s.name,
                self._addresses.get(s.name, s.grpc_addr),
                device_id=s.device_id,
                election_id=self.election_id,
                p4info=pipeline.index,
                connect_timeout=connect_timeout,
                backoff_initial=0.05,
                backoff_max=1.0,
            )
            for s in spec.switches
        )
        self.installer = Installer(  # what every switch should hold and holds; the writes
            self.topo,
            self.tags,
            self.pool,
            options=options or FabricOptions(),
            may_write=lambda: self.active,
            check_fence=self.check_fence,
            resync_later=lambda sw: self.post(lambda: self.switch_events.resync_out_of_step(sw)),
        )
        self.counter_poller = CounterPoller(  # wire losses and drop reasons for telemetry
            self.pool,
            self.telemetry,
            switch_ports(self.topo),
            interval_s=counter_poll_s,
            enabled=lambda: self.active,
        )
        own_collaborators(self, probe_interval_s, probe_misses)

    @property
    def options(self) -> FabricOptions:
        """The fabric options the switches run with (the installer's)."""
        return self.installer.options

    @property
    def installed(self) -> dict[str, dict[tuple[object, ...], Entity]]:
        """What each switch holds as far as this controller knows (the installer's)."""
        return self.installer.installed

    # ------------------------------------------------------------------ read-only views

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every running job with its size."""
        return self.views.list_jobs()

    def paths(self, flow: str | None = None, job: str | None = None) -> list[dict[str, Any]]:
        """Per planned flow: first hop, tag, switch path, match key (optionally one flow/job)."""
        return self.views.paths(flow, job)

    def status(self) -> dict[str, Any]:
        """Role, mode, switches (connected, primary, entries), jobs, the store and replicas."""
        return self.views.status()

    def switches(self) -> dict[str, dict[str, Any]]:
        """Address and device id of every switch (for icectl shell)."""
        return self.views.switches()

    def stats(self, switch: str | None = None) -> dict[str, dict[str, Any]]:
        """Per switch: port rx/tx counters, per-tag packets, drops by reason (read live)."""
        return self.views.stats(switch)

    def _flow_of_key(self, key: FlowKey) -> str | None:
        """The planned flow a key belongs to: an agent's real key, else the planned key."""
        return self.registry.flow_of_key(key)

    # ------------------------------------------------------------------ worker and switches

    def start_worker(self) -> None:
        """Start the thread that runs queued events (switch, link and agent events)."""
        self.worker.start()

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the controller's worker thread (events from other threads)."""
        self.worker.post(fn)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until queued switch events (resyncs, takeovers) are processed."""
        return self.worker.wait_idle(timeout)

    def resync_switch(self, name: str) -> dict[str, Any]:
        """Make one switch hold exactly the desired state (after a restart): read back, write
        only the difference; push the pipeline first when the switch lost it."""
        return self.switch_events.resync_switch(name)

    def metrics_source(self) -> MetricsSource:
        """What /metrics reads of this controller (control/telemetry/source.py)."""
        return MetricsSource(
            topo=self.topo,
            pool=self.pool,
            lock=self.lock,
            telemetry=self.telemetry,
            reports=self.reports,
            flows=self.flows,
            jobs=self.jobs,
            agents=self.agents,
            rates=self.rates,
            history=self.history,
            events=self.events,
            failed_switches=self.failed_switches,
            status=self.status,
            is_active=lambda: self.active,
        )

    @property
    def linkmon(self) -> LinkMonitor | None:
        """The link monitor while this controller probes (primary), else None."""
        return self.probing.monitor

    def links(self) -> dict[str, Any]:
        """Link probing for icectl links / status: per link state, last probe, events."""
        return self.probing.status()

    @property
    def state_errors(self) -> list[str]:
        """What the last state load could not read (the state file's)."""
        return self.statefile.errors

    # ------------------------------------------------------------------ failures

    def link_between(self, a: str, b: str) -> int:
        """The directed link id from switch a to switch b (TopologyError if none)."""
        return self.failures.link_between(a, b)

    def fail_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b down, replan the flows that crossed it and install the result."""
        return self.failures.fail_link(a, b)

    def fail_switch(self, switch: str) -> ChangeReport:
        """A switch died: every link of it is down; replan and install."""
        return self.failures.fail_switch(switch)

    def restore_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b up again and rebalance every flow over the larger fabric."""
        return self.failures.restore_link(a, b)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Connect to every switch; as primary push the pipeline and install everything."""
        for name, conn in self.pool.items():
            conn.on("packet", functools.partial(self.switch_events.on_packet, name))
            conn.on("connection", functools.partial(self.switch_events.on_connection, name))
            conn.on("arbitration", functools.partial(self.switch_events.on_arbitration, name))
        self.start_worker()
        self.counter_poller.start()
        if self.store is not None and self.store.elects:
            # etcd elects the primary: switches are connected (election id = term) once won
            log.info("standby: campaigning through %s", self.store.where())
            self.post(self.election.warm_base)
            self.store.start(self.election.on_elected, self.election.on_fenced)  # type: ignore[attr-defined]
            return
        self.pool.connect_all(self.connect_timeout)
        primaries = self.pool.primaries()
        if len(primaries) == len(self.pool):
            self.take_over()
        elif self.backup:
            log.info(
                "backup controller (election id %d) ready on %d switches",
                self.election_id,
                len(self.pool),
            )
        else:
            others = sorted(set(self.pool) - set(primaries))
            log.warning(
                "not primary on %s: another controller holds a higher election id",
                ", ".join(others),
            )

    def stop(self) -> None:
        """Close every connection and stop the worker (an elected replica resigns)."""
        self._stopping = True
        if self.store is not None:
            self.store.close()
        self.agents.stop()
        self.counter_poller.stop()
        if self.linkmon is not None:
            self.linkmon.stop()
        self.worker.stop()
        self.pool.close_all()

    def take_over(self) -> None:
        """Become the active controller: load shared state, push pipelines, resync everything."""
        with self.lock:
            t0 = time.perf_counter()
            if not self.jobs and self.store is not None:
                self.statefile.load()
            self.check_fence()
            self.pool.run_all(self._ensure_pipeline, operation="pipeline")
            desired = self.desired()
            summaries = self.pool.run_all(
                lambda c: c.resync(desired.get(c.name, []), scope="all"), operation="resync"
            )
            for name in self.pool:
                self.installer.holds(name, desired.get(name, []))
            self.last_resync = summaries
            self.installer.base_written()
            self.active = True
            self.probing.start()
            self.agents.reallocate("takeover")
            writes = sum(s.writes for s in summaries.values())
            self.events.record(
                "controller_start",
                f"controller primary (election id {self.election_id}) on {len(self.pool)} "
                f"switches: {writes} writes",
                writes=writes,
            )
            log.info(
                "active on %d switches: %d writes to reach the desired state in %.1f ms",
                len(self.pool),
                writes,
                (time.perf_counter() - t0) * 1e3,
            )

    def check_fence(self) -> None:
        """StoreFenced unless this replica may write to the switches now (etcd: the lease
        certainly holds; the file store: always)."""
        if self.store is not None and not self.store.wait_writable():
            raise StoreFenced(
                f"{self.store.where()}: not the primary (lease lost or not elected); "
                "nothing written to the switches"
            )

    # ------------------------------------------------------------------ etcd election

    def _set_election_id(self, term: int) -> None:
        """Follow ``term`` as the election id, here and on every switch connection."""
        self.election_id = term
        for conn in self.pool.values():
            conn.close()
            conn.election_id = term

    def _deactivate(self) -> bool:
        """Stop being the active primary; whether it was."""
        was = self.active
        self.active = False
        return was

    def _reset_shared_state(self) -> None:
        """Forget jobs, failures and keys before loading them from the store (a takeover)."""
        self.jobs.clear()
        self.flows.clear()
        self._keys.clear()
        self.planner = Planner(
            self.topo, method=self._planner_args[0], work_budget=self._planner_args[1]
        )
        self.topo.failed[:] = False
        self.failed_switches.clear()
        self._probe_down.clear()
        self.agents.reset()
        self.installer.forget_base()

    def _ensure_pipeline(self, conn: SwitchConnection) -> bool:
        """Push the pipeline unless the switch already runs it (same cookie); True if pushed."""
        try:
            current = conn.get_pipeline(response_type="COOKIE_ONLY")
            if current.cookie == self.pipeline.cookie:
                return False
        except Exception as exc:  # no pipeline yet: FAILED_PRECONDITION on most targets
            log.debug("%s: no pipeline to compare (%s)", conn.name, exc)
        conn.set_pipeline(self.pipeline)
        return True

    # ------------------------------------------------------------------ installs

    def desired(self, plan: Plan | None = None) -> dict[str, list[Entity]]:
        """Every switch's entities: base forwarding plus the planned flows."""
        p = plan if plan is not None else self.planner.plan()
        return self.installer.desired(p, self.flows, self.agents.flows.install_keys())

    def flow_entries(self, plan: Plan | None = None) -> dict[str, list[Entity]]:
        """The planned flows' entries, matching the real keys agents reported."""
        p = plan if plan is not None else self.planner.plan()
        return self.installer.flow_entries(p, self.flows, self.agents.flows.install_keys())

    def apply_flow_entries(self) -> int:
        """Write the flow_path difference only (real keys reported, plan unchanged)."""
        with self.lock:
            return self.installer.apply(self.flow_entries(), tables=FLOW_TABLES)

    def set_mode(self, mode: str) -> dict[str, Any]:
        """Switch every leaf to ICE ("ice", "planned-ecmp"), the ECMP baseline ("ecmp") or spray."""
        with self.lock:
            self.installer.options = replace(self.installer.options, mode=mode)
            t0 = time.perf_counter()
            written = self.installer.apply(self.desired())
            self.installer.base_written()
            return {
                "mode": mode,
                "switches": len(self.topo.leaves),
                "entries": written,
                "ms": (time.perf_counter() - t0) * 1e3,
            }

    # ------------------------------------------------------------------ jobs

    def add_job(self, job: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
        """Plan a job's flows on top of the others and install them."""
        return self.registry.add(job)

    def remove_job(self, name: str) -> dict[str, Any]:
        """Take a job's flows out of the plan and delete their entries."""
        return self.registry.remove(name)

    def ensure_job(self, job: JobSpec) -> str:
        """Make ``job`` run as given, idempotently: "added", "unchanged" or "replaced"."""
        return self.registry.ensure(job)
