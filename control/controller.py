"""The ICE controller: P4Runtime to every switch, base forwarding, plans, failures, telemetry.

One :class:`Controller` object holds all state (no module globals). It connects to every switch
of the topology with one election id; as primary it pushes the pipeline where the switch's cookie
differs, then makes every switch hold exactly base forwarding + the planned flows (a resync: read
back, write only the difference). Started with ``backup=True`` (lower election id) it watches; when
the switches promote it (the primary died) it loads the shared state file (the jobs), replans and
resyncs, so the fabric keeps its paths. A switch that comes back after a restart is resynced the
same way. Link failures replan the flows that crossed the link and install the moved flows first,
then the base-forwarding difference (candidate groups and routes without the dead link).

The daemon (``icectl run``) wraps this in the Unix-socket API of :mod:`icefabric.control.api`;
see :mod:`icefabric.control.daemon`.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from icefabric.control import fabric
from icefabric.control import ice_names as n
from icefabric.control.agents.hub import AgentHub
from icefabric.control.ccl.demand import Flow, demand_from_job
from icefabric.control.ccl.job import JobSpec, check_hosts, parse_job
from icefabric.control.congestion.allocator import DEFAULT_TARGET, RateAllocator
from icefabric.control.fabric import FabricOptions, TagMap, entity_key
from icefabric.control.install import (
    ChangeReport,
    diff_updates,
    flow_key,
    merge,
    plan_entries,
)
from icefabric.control.linkfail import LinkFailures
from icefabric.control.linkmon import DEFAULT_INTERVAL_S, DEFAULT_MISSES, LinkMonitor
from icefabric.control.p4rt import (
    ArbitrationUpdate,
    ConnectionEvent,
    Entity,
    PacketIn,
    PipelineConfig,
    SwitchConnection,
    SwitchPool,
    TableEntry,
)
from icefabric.control.paths import write_private
from icefabric.control.planner.plan import Plan
from icefabric.control.planner.planner import Planner
from icefabric.control.state import encode_state, load_state
from icefabric.control.telemetry.poller import CounterPoller, switch_ports
from icefabric.control.telemetry.reports import ReportLog
from icefabric.control.telemetry.store import TelemetryStore
from icefabric.control.topology import Topology, TopologyError
from icefabric.control.views import ControllerViews
from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)

PRIMARY_ELECTION_ID = 100
BACKUP_ELECTION_ID = 50


class JobRejected(ValueError):
    """A job the controller will not plan (bad description, unknown host, duplicate name)."""


class Controller(ControllerViews, LinkFailures):
    """Connections to every switch, the planner, what each switch holds, telemetry reports."""

    def __init__(
        self,
        spec: TopologySpec,
        pipeline: PipelineConfig,
        *,
        election_id: int | None = None,
        backup: bool = False,
        options: FabricOptions | None = None,
        method: str = "auto",
        addresses: Mapping[str, str] | None = None,
        state_file: str | Path | None = None,
        report_buffer: int = 1000,
        connect_timeout: float = 10.0,
        switch_dead_s: float | None = None,
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
        self.options = options or FabricOptions()
        self.tags: TagMap = fabric.allocate_tags(self.topo)
        self.planner = Planner(self.topo, method=method)
        self.jobs: dict[str, JobSpec] = {}
        self.flows: dict[str, Flow] = {}
        self._keys: dict[tuple[str, str, int, int], str] = {}
        self.installed: dict[str, dict[tuple[object, ...], Entity]] = {
            s.name: {} for s in spec.switches
        }
        self.reports = ReportLog(report_buffer, flow_of=self._flow_of_key)
        self.rates = RateAllocator(self.topo, target=rate_target)  # max-min fair caps
        self.agents = AgentHub(self)  # host agents: real flow keys, caps (icectl run listens)
        self.telemetry = TelemetryStore(
            self.topo,
            target=rate_target,
            planned_path=self.agents.planned_path,
            on_over_target=self.agents.over_target,
        )
        self.state_file = Path(state_file) if state_file else None
        self.state_errors: list[str] = []  # what the last state-file load could not read
        self._state_written = b""  # bytes last written, so an unchanged state is not rewritten
        self.takeover_retry_s = 1.0  # a failed takeover is retried after this long
        self.connect_timeout = connect_timeout
        self.switch_dead_s = switch_dead_s
        self.history: list[ChangeReport] = []
        self.last_resync: dict[str, Any] = {}  # switch -> ResyncSummary of the last takeover
        self.lock = threading.RLock()
        self._addresses = dict(addresses or {})
        self._events: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._down_since: dict[str, float] = {}
        self.failed_switches: set[str] = set()
        if probe_interval_s < 0 or probe_misses < 1:
            raise ValueError(
                f"link probes: expected interval >= 0 s and misses >= 1, got "
                f"{probe_interval_s} s and {probe_misses}"
            )
        self.probe_interval_s = probe_interval_s  # 0: no link probing
        self.probe_misses = probe_misses
        self.linkmon: LinkMonitor | None = None  # probing runs while this controller is primary
        self._resyncing: set[str] = set()  # reconnected switches not yet resynced: not probed
        self._probe_down: set[int] = set()  # links (even directed id) the probes took down
        self._install_marks = (0.0, 0.0)  # time.monotonic() when flows / base were installed
        self._base_cache: tuple[tuple[bytes, FabricOptions], dict[str, list[Entity]]] | None = None
        self._applied_base: tuple[bytes, FabricOptions] | None = None  # base the switches hold
        self._stopping = False
        self.active = False  # True once this controller has installed the fabric as primary
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
        self.counter_poller = CounterPoller(  # wire losses and drop reasons for telemetry
            self.pool,
            self.telemetry,
            switch_ports(self.topo),
            interval_s=counter_poll_s,
            enabled=lambda: self.active,
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Connect to every switch; as primary push the pipeline and install everything."""
        for name, conn in self.pool.items():
            conn.on("packet", functools.partial(self._on_packet, name))
            conn.on("connection", functools.partial(self._on_connection, name))
            conn.on("arbitration", functools.partial(self._on_arbitration, name))
        self.start_worker()
        self.counter_poller.start()
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

    def start_worker(self) -> None:
        """Start the thread that runs queued events (switch, link and agent events)."""
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="icectl-worker", daemon=True)
            self._worker.start()

    def stop(self) -> None:
        """Close every connection and stop the worker."""
        self._stopping = True
        self.agents.stop()
        self.counter_poller.stop()
        if self.linkmon is not None:
            self.linkmon.stop()
        self._events.put(None)
        if self._worker is not None:
            self._worker.join(timeout=5)
            self._worker = None
        self.pool.close_all()

    def take_over(self) -> None:
        """Become the active controller: load shared state, push pipelines, resync everything."""
        with self.lock:
            t0 = time.perf_counter()
            if not self.jobs and self.state_file is not None:
                self._load_state()
            self.pool.run_all(self._ensure_pipeline, operation="pipeline")
            desired = self.desired()
            summaries = self.pool.run_all(
                lambda c: c.resync(desired.get(c.name, []), scope="all"), operation="resync"
            )
            for name in self.pool:
                self.installed[name] = {entity_key(e): e for e in desired.get(name, [])}
            self.last_resync = summaries
            self._applied_base = self._base_key()
            self.active = True
            self._start_link_monitor()
            self.agents.reallocate("takeover")
            writes = sum(s.writes for s in summaries.values())
            log.info(
                "active on %d switches: %d writes to reach the desired state in %.1f ms",
                len(self.pool),
                writes,
                (time.perf_counter() - t0) * 1e3,
            )

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

    # ------------------------------------------------------------------ desired state

    def desired(self, plan: Plan | None = None) -> dict[str, list[Entity]]:
        """Every switch's entities: base forwarding plus the planned flows."""
        return merge(self._base(), self._flow_entries(plan))

    def _base_key(self) -> tuple[bytes, FabricOptions]:
        return (self.topo.failed.tobytes(), self.options)

    def _base(self) -> dict[str, list[Entity]]:
        """Base forwarding, recomputed only when failures or options changed."""
        key = self._base_key()
        if self._base_cache is None or self._base_cache[0] != key:
            self._base_cache = (key, fabric.base_entries(self.topo, self.options, self.tags))
        return self._base_cache[1]

    def _flow_entries(self, plan: Plan | None = None) -> dict[str, list[Entity]]:
        p = plan if plan is not None else self.planner.plan()
        return plan_entries(self.topo, p, self.flows, self.tags, self.agents.flows.install_keys())

    def apply_flow_entries(self) -> int:
        """Write the flow_path difference only (real keys reported, plan unchanged)."""
        with self.lock:
            return self._apply(self._flow_entries(), tables={n.TABLE_FLOW_PATH})

    def _apply(
        self, desired: Mapping[str, Iterable[Entity]], *, tables: set[str] | None = None
    ) -> int:
        """Write the difference between what is installed and ``desired`` on every switch.

        With ``tables`` only entries of those tables are compared (the others stay as they are).
        """
        plans: dict[str, tuple[list[Any], dict[tuple[object, ...], Entity]]] = {}
        for sw in self.installed:
            new = list(desired.get(sw, []))
            old = list(self.installed[sw].values())
            if tables is not None:
                new = [e for e in new if _table_of(e) in tables]
                old = [e for e in old if _table_of(e) in tables]
            updates = diff_updates(old, new)
            if not updates:
                continue
            after = dict(self.installed[sw])
            for u in updates:
                if u.type == "DELETE":
                    after.pop(entity_key(u.entity), None)
                else:
                    after[entity_key(u.entity)] = u.entity
            plans[sw] = (updates, after)
        if not plans:
            return 0
        # A switch that is down gets everything by resync when it returns.
        live = [sw for sw in plans if self.pool[sw].is_connected]
        if self.active and live:
            self.pool.run_all(lambda c: c.write(plans[c.name][0]), names=live, operation="write")
        for sw, (_, after) in plans.items():
            self.installed[sw] = after
        return sum(len(u) for u, _ in plans.values())

    def _install_change(self, what: str, plan_s: float) -> ChangeReport:
        """After the planner changed: planned flows first, then the rest of base forwarding."""
        t1 = time.perf_counter()
        plan = self.planner.plan()
        written = self._apply(self._flow_entries(plan), tables={n.TABLE_FLOW_PATH})
        t2 = time.perf_counter()
        flows_at = time.monotonic()
        if self._applied_base != self._base_key():  # failures changed groups and routes
            written += self._apply(self.desired(plan))
            self._applied_base = self._base_key()
        t3 = time.perf_counter()
        self._install_marks = (flows_at, time.monotonic())
        rep = ChangeReport(
            what=what,
            moved=len(self.planner.changed),
            entries=written,
            plan_ms=plan_s * 1e3,
            install_ms=(t2 - t1) * 1e3,
            base_ms=(t3 - t2) * 1e3,
            max_load=plan.max_load_s,
        )
        self.history.append(rep)
        try:
            self.agents.reallocate(what)
        except Exception:  # the new paths are installed; caps follow on the next change
            log.exception("%s: rate allocation failed", what)
        log.info(
            "%s: %d flow(s) moved, %d entries; plan %.1f ms, install %.1f ms, base %.1f ms",
            what,
            rep.moved,
            rep.entries,
            rep.plan_ms,
            rep.install_ms,
            rep.base_ms,
        )
        return rep

    # ------------------------------------------------------------------ jobs

    def add_job(self, job: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
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
            t0 = time.perf_counter()
            self.planner.add(demand)
            plan_s = time.perf_counter() - t0
            self._register(job, demand.flows)
            self.agents.job_added(job.name, job.phases[0].name)
            rep = self._install_change(f"job {job.name} added", plan_s)
            self._save_state()
            return {
                "job": job.name,
                "flows": len(demand.flows),
                "entries": rep.entries,
                "install_ms": rep.install_ms,
                "plan_ms": rep.plan_ms,
                "max_load": rep.max_load,
            }

    def remove_job(self, name: str) -> dict[str, Any]:
        """Take a job's flows out of the plan and delete their entries."""
        with self.lock:
            if name not in self.jobs:
                raise JobRejected(
                    f"no job {name!r} (running: {', '.join(sorted(self.jobs)) or 'none'})"
                )
            t0 = time.perf_counter()
            gone = [f for f, fl in self.flows.items() if fl.job == name]
            if gone:  # a job of ranks on one host has no network flow: nothing planned
                self.planner.remove_job(name)
            plan_s = time.perf_counter() - t0
            del self.jobs[name]
            for fid in gone:
                del self.flows[fid]
            self.agents.job_removed(name, gone)
            self._keys = {k: v for k, v in self._keys.items() if v in self.flows}
            rep = self._install_change(f"job {name} removed", plan_s)
            self._save_state()
            return {"job": name, "entries": rep.entries, "install_ms": rep.install_ms}

    # ------------------------------------------------------------------ mode and failures

    def set_mode(self, mode: str) -> dict[str, Any]:
        """Switch every leaf to ICE ("ice", "planned-ecmp") or the ECMP baseline ("ecmp")."""
        with self.lock:
            self.options = replace(self.options, mode=mode)
            t0 = time.perf_counter()
            written = self._apply(self.desired())
            self._applied_base = self._base_key()
            return {
                "mode": mode,
                "switches": len(self.topo.leaves),
                "entries": written,
                "ms": (time.perf_counter() - t0) * 1e3,
            }

    def link_between(self, a: str, b: str) -> int:
        """The directed link id from switch a to switch b (TopologyError if none)."""
        ids = self.topo.links_between(a, b)
        if not ids:
            raise TopologyError(f"no link between {a!r} and {b!r} in topology {self.spec.name!r}")
        return ids[0]

    def fail_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b down, replan the flows that crossed it and install the result."""
        return self.fail_link_id(self.link_between(a, b), what=f"link {a}-{b} down")

    def fail_link_id(self, lid: int, *, what: str) -> ChangeReport:
        """The failure path of one link (either directed id): replan its flows, install."""
        with self.lock:
            t0 = time.perf_counter()
            self.planner.replan_after_failure(links=[lid])
            rep = self._install_change(what, time.perf_counter() - t0)
            self._save_state()
            return rep

    def port_down(self, switch: str, port: int) -> ChangeReport:
        """A port-down event from the data plane: the link on that port failed."""
        with self.lock:
            t0 = time.perf_counter()
            self.planner.replan_after_failure(ports=[(switch, port)])
            rep = self._install_change(f"{switch} port {port} down", time.perf_counter() - t0)
            self._save_state()
            return rep

    def fail_switch(self, switch: str) -> ChangeReport:
        """A switch died: every link of it is down; replan and install."""
        with self.lock:
            t0 = time.perf_counter()
            self.failed_switches.add(switch)
            self.planner.replan_after_failure(switches=[switch])
            rep = self._install_change(f"switch {switch} down", time.perf_counter() - t0)
            self._save_state()
            return rep

    def restore_switch(self, switch: str) -> ChangeReport:
        """A failed switch is back: its links are up again; rebalance every flow and install."""
        ids = [ln.id for ln in self.topo.links if switch in (ln.src, ln.dst)]
        with self.lock:
            t0 = time.perf_counter()
            self.failed_switches.discard(switch)
            self.planner.restore(ids)
            rep = self._install_change(f"switch {switch} up", time.perf_counter() - t0)
            self._save_state()
            return rep

    def restore_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b up again and rebalance every flow over the larger fabric."""
        return self.restore_link_id(self.link_between(a, b), what=f"link {a}-{b} up")

    def restore_link_id(self, lid: int, *, what: str) -> ChangeReport:
        """Both directions of one link up again; rebalance every flow and install."""
        with self.lock:
            t0 = time.perf_counter()
            self.planner.restore([lid & ~1, lid | 1])
            rep = self._install_change(what, time.perf_counter() - t0)
            self._save_state()
            return rep

    # ------------------------------------------------------------------ switch events

    def resync_switch(self, name: str) -> dict[str, Any]:
        """Make one switch hold exactly the desired state (after a restart): read back, write
        only the difference; push the pipeline first when the switch lost it."""
        with self.lock:
            conn = self.pool[name]
            t0 = time.perf_counter()
            pushed = self._ensure_pipeline(conn)
            desired = self.desired().get(name, [])
            summary = conn.resync(desired, scope="all")
            self.installed[name] = {entity_key(e): e for e in desired}
            return {
                "switch": name,
                "pipeline_pushed": pushed,
                "inserted": summary.inserted,
                "modified": summary.modified,
                "deleted": summary.deleted,
                "unchanged": summary.unchanged,
                "ms": (time.perf_counter() - t0) * 1e3,
            }

    def _on_connection(self, switch: str, ev: ConnectionEvent) -> None:
        if not ev.connected:
            if self._stopping:
                return
            self._down_since[switch] = time.monotonic()
            log.warning("%s: connection lost (%s)", switch, ev.reason)
            if self.switch_dead_s is not None:
                timer = threading.Timer(self.switch_dead_s, self._check_dead, args=(switch,))
                timer.daemon = True
                timer.start()
            return
        self._down_since.pop(switch, None)
        if ev.attempt > 0 and self.active:
            log.info("%s: back after a reconnection; resyncing", switch)
            self._resyncing.add(switch)
            self._events.put(lambda: self._after_restart(switch))

    def _after_restart(self, switch: str) -> None:
        try:
            if self.pool[switch].wait_primary(self.connect_timeout):
                res = self.resync_switch(switch)
                log.info("%s: resync %s", switch, res)
                if switch in self.failed_switches:
                    self.restore_switch(switch)
        finally:
            self._resyncing.discard(switch)

    def _check_dead(self, switch: str) -> None:
        since = self._down_since.get(switch)
        if since is not None and self.active and switch not in self.failed_switches:

            def fail() -> None:
                self.fail_switch(switch)

            self._events.put(fail)

    def _on_arbitration(self, switch: str, update: ArbitrationUpdate) -> None:
        if (
            update.is_primary
            and not self.active
            and self.backup
            and len(self.pool.primaries()) == len(self.pool)
        ):
            log.warning("primary controller gone: backup %d takes over", self.election_id)
            self._events.put(self._take_over_once)

    def _take_over_once(self) -> None:
        if self.active or self._stopping:
            return
        try:
            self.take_over()
        except Exception:
            # A standby that gave up here would stay a headless backup for ever: retry.
            log.exception("takeover failed; retrying in %.1f s", self.takeover_retry_s)
            timer = threading.Timer(
                self.takeover_retry_s, lambda: self._events.put(self._take_over_once)
            )
            timer.daemon = True
            timer.start()

    def _on_packet(self, switch: str, pkt: PacketIn) -> None:
        reason = int(pkt.metadata.get("reason", 0))
        if reason == n.PUNT_REASON_TELEMETRY:
            rep = self.reports.add(switch, pkt.payload, pkt.metadata)
            if rep is not None:
                self.telemetry.add_report(rep)
        elif reason == n.PUNT_REASON_LINK_PROBE:
            mon = self.linkmon
            if mon is not None:
                mon.on_probe(switch, int(pkt.metadata.get("ingress_port", 0)), pkt.payload)
        else:
            log.debug(
                "%s: packet-in reason %d (%d bytes) ignored", switch, reason, len(pkt.payload)
            )

    def _flow_of_key(self, src: str, dst: str, sport: int, qp: int) -> str | None:
        return self.agents.flow_of(src, dst, sport, qp) or self._keys.get((src, dst, sport, qp))

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the controller's worker thread (events from other threads)."""
        self._events.put(fn)

    def _work(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                self._events.task_done()
                return
            try:
                item()
            except Exception:  # one failed event must not stop the next
                log.exception("controller event failed")
            finally:
                self._events.task_done()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until queued switch events (resyncs, takeovers) are processed."""
        deadline = time.monotonic() + timeout
        while self._events.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    # ------------------------------------------------------------------ state file

    def _save_state(self) -> None:
        if self.state_file is not None:
            failed = [i for i in range(self.topo.n_links) if self.topo.failed[i]]
            by_flow = self.planner.choices()
            choices = {
                name: [by_flow.get(fid, -1) for fid in fids]
                for name, fids in self._flows_by_job().items()
            }
            data = encode_state(
                self.spec.name,
                self.jobs.values(),
                failed_links=failed,
                failed_switches=self.failed_switches,
                probe_down_links=self._probe_down,
                flow_keys=self.agents.flows.to_state(),
                choices=choices,
            )
            if data == self._state_written and self.state_file.exists():
                return
            write_private(self.state_file, data)
            self._state_written = data

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

    def _register(self, job: JobSpec, flows: Iterable[Flow]) -> None:
        self.jobs[job.name] = job
        for f in flows:
            self.flows[f.flow_id] = f
            k = flow_key(self.topo, f)
            self._keys[(k.src_ip, k.dst_ip, k.udp_sport, k.dst_qp)] = f.flow_id


def _table_of(e: Entity) -> str:
    return e.table if isinstance(e, TableEntry) else "clone_session"
