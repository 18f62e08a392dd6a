"""The controller's side of the host agents, as one object the :class:`Controller` owns.

* the channel (:class:`AgentServer`), started by ``icectl run``;
* what the agents report (:class:`AgentFlows`): real flow keys are installed as ``flow_path``
  entries in place of the stand-ins (insert the real key, then delete the stand-in), and kept
  in the state file so a restarted controller or a backup installs them from the start;
* the active flows of every job (the job's current phase plus what agents report pending or
  active, less the flows of hosts whose agent was lost), their max-min fair rates
  (the controller's :class:`RateAllocator`) and the caps pushed to each connected host,
  recomputed on job and phase changes, replans, agents joining, reporting and leaving, and
  links telemetry shows above target; with each cap set goes the host's start table, the
  rates flows no plan covers start at (control/congestion/starts.py).

Events from the channel's thread are queued on the controller's worker; everything here runs
under the controller's lock. The hub is handed what it uses of its controller explicitly
(:class:`HubContext`) and reaches into nothing else.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icefabric.control.agents.protocol import AgentAddress
from icefabric.control.agents.registry import AgentFlows
from icefabric.control.agents.server import AgentServer, EventKind
from icefabric.control.congestion.starts import Start, unplanned_starts
from icefabric.control.daemon.state import StateWriteError
from icefabric.control.flowkey import FlowKey
from icefabric.control.install import flow_key
from icefabric.control.telemetry.metrics import LatencyTally

if TYPE_CHECKING:
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.congestion.allocator import RateAllocator
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.planner.plan import Plan
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True, kw_only=True)
class KeyInstall:
    """Real keys written to the switches after agents reported them."""

    why: str
    flows: int
    entries: int
    ms: float
    at: float  # wall clock

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "why": self.why,
            "flows": self.flows,
            "entries": self.entries,
            "ms": round(self.ms, 3),
            "at": self.at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HubContext:
    """What the hub is handed by its controller (and all it uses of it)."""

    spec: TopologySpec
    topo: Topology
    lock: threading.RLock
    events: EventLog
    rates: RateAllocator  # the max-min fair allocation (recomputed here)
    flows: Mapping[str, Flow]  # the planned flows (the controller's, kept current)
    jobs: Mapping[str, JobSpec]
    backup: bool
    is_active: Callable[[], bool]  # the active primary (agents are accepted, caps pushed)
    post: Callable[[Callable[[], None]], None]  # queue on the controller's worker
    plan: Callable[[], Plan]  # the planner's current plan
    save_state: Callable[[], None]  # the shared state (StateWriteError when it cannot be)
    store_keeps_caps: Callable[[], bool]  # the store saves caps (etcd; the state file does not)
    write_flow_entries: Callable[[], int]  # the installer's flow_path difference, written


class AgentHub:
    """Agents, real keys, active flows and caps of one controller."""

    def __init__(self, ctx: HubContext) -> None:
        self.ctx = ctx
        self.flows = AgentFlows()
        self.server: AgentServer | None = None
        self.phases: dict[str, str] = {}  # job -> the phase it runs now
        self.pushed: dict[str, dict[FlowKey, float]] = {}  # host -> caps last pushed
        self.pushed_starts: dict[str, tuple[Start, ...]] = {}  # host -> start table pushed
        self.key_installs: deque[KeyInstall] = deque(maxlen=100)
        self.key_latency = LatencyTally()  # for /metrics
        self.planned_nodes: dict[str, tuple[str, ...]] = {}  # flow id -> switches of its path

    # -- channel ---------------------------------------------------------------------------

    def listen(
        self,
        unix_path: str | Path | None,
        *,
        tcp: str | AgentAddress | None = None,
        token: str | None = None,
        heartbeat_s: float = 1.0,
    ) -> AgentServer:
        """Start accepting agents (AgentServerError when the channel cannot listen)."""
        hosts = {h.name for h in self.ctx.spec.hosts}
        server = AgentServer(
            unix_path,
            tcp=tcp,
            token=token,
            heartbeat_s=heartbeat_s,
            on_event=self._on_event,
            accepting=self.ctx.is_active,
            known_host=hosts.__contains__,
            name="backup" if self.ctx.backup else "primary",
        )
        server.start()
        self.server = server
        return server

    def reset(self) -> None:
        """Forget keys, phases and pushed caps (a replica about to load them from its store);
        connected agents' reports are read again as jobs are added."""
        self.flows = AgentFlows()
        self.phases.clear()
        self.pushed.clear()
        self.pushed_starts.clear()
        self.planned_nodes = {}

    def stop(self) -> None:
        """Close the channel."""
        if self.server is not None:
            self.server.stop()
            self.server = None

    def _on_event(self, host: str, kind: EventKind) -> None:
        self.ctx.post(functools.partial(self.sync, host, kind))

    def sync(self, host: str, kind: EventKind) -> None:
        """Take a host's event: join / flows (re-read its table) / lost."""
        ctx = self.ctx
        with ctx.lock:
            if kind == "lost":
                self.flows.lose(host)
                self.pushed.pop(host, None)
                self.pushed_starts.pop(host, None)
                changed: list[str] = []
                ctx.events.record("agent_leave", f"agent {host} left (session lost)", host=host)
            else:
                if kind == "joined":
                    self.pushed.pop(host, None)  # a new session has no caps yet
                    self.pushed_starts.pop(host, None)
                    ctx.events.record("agent_join", f"agent {host} joined", host=host)
                reports = self.server.flows(host).get(host, []) if self.server else []
                changed = self.flows.update(host, reports, ctx.flows, self._address)
            if changed:
                # Saved first (a backup or a restart installs the real keys at once); when the
                # file cannot be written the keys wait in memory, off the switches, until the
                # next change that saves.
                try:
                    ctx.save_state()
                except StateWriteError as exc:
                    log.error("agent %s: real keys not installed: %s", host, exc)
                else:
                    self.install_keys(f"agent {host}: {len(changed)} real key(s)", len(changed))
            self.reallocate(f"agent {host} {kind}")

    # -- real keys -------------------------------------------------------------------------

    def _address(self, host: str) -> str:
        return self.ctx.spec.host(host).address

    def refresh(self) -> list[str]:
        """Re-check every connected host's reports (after a job was added): changed flow ids."""
        changed: list[str] = []
        if self.server is None:
            return changed
        for host, reports in self.server.flows().items():
            changed += self.flows.update(host, reports, self.ctx.flows, self._address)
        return changed

    def install_keys(self, why: str, flows: int) -> int:
        """Write the flow_path difference now that real keys changed; entries written."""
        t0 = time.perf_counter()
        written = self.ctx.write_flow_entries()
        ms = (time.perf_counter() - t0) * 1e3
        self.key_latency.observe(ms / 1e3)
        self.key_installs.append(
            KeyInstall(why=why, flows=flows, entries=written, ms=ms, at=time.time())
        )
        self.ctx.events.record(
            "install", f"{why}: {written} entries written in {ms:.1f} ms", entries=written
        )
        log.info("%s: %d entries written in %.1f ms", why, written, ms)
        return written

    def flow_of(self, key: FlowKey) -> str | None:
        """The flow whose real key this is (telemetry names its reports with it)."""
        return self.flows.flow_of(key)

    # -- jobs and phases -------------------------------------------------------------------

    def job_added(self, job: str, first_phase: str) -> None:
        """A job starts in its first phase; reports that named its flows now count."""
        self.phases.setdefault(job, first_phase)
        self.refresh()

    def job_removed(self, job: str, flow_ids: list[str]) -> None:
        """A job's flows are gone."""
        self.phases.pop(job, None)
        self.flows.forget(flow_ids)

    def set_phase(self, job: str, phase: str) -> dict[str, Any]:
        """Make ``phase`` the running phase of ``job``; push the new caps (before it starts)."""
        spec = self.ctx.jobs.get(job)
        if spec is None:
            raise KeyError(
                f"no job {job!r} (running: {', '.join(sorted(self.ctx.jobs)) or 'none'})"
            )
        names = [p.name for p in spec.phases]
        if phase not in names:
            raise KeyError(f"job {job}: no phase {phase!r} (phases: {', '.join(names)})")
        with self.ctx.lock:
            self.phases[job] = phase
            pushed = self.reallocate(f"job {job} phase {phase}")
            alloc = self.ctx.rates.history[-1]
        return {"job": job, "phase": phase, "hosts_pushed": pushed, **alloc.to_dict()}

    # -- rates and caps --------------------------------------------------------------------

    def active_flows(self) -> set[str]:
        """Flows that share the fabric now (see the module docstring)."""
        ctx = self.ctx
        by_phase = {fid for fid, f in ctx.flows.items() if self.phases.get(f.job) == f.phase}
        reported = self.flows.reporting()
        return {
            fid
            for fid in by_phase | reported
            if fid in ctx.flows and ctx.flows[fid].src_host not in self.flows.lost
        }

    def reallocate(self, reason: str, background: Mapping[int, float] | None = None) -> int:
        """Recompute the rates and push changed cap sets; the number of hosts pushed to."""
        ctx = self.ctx
        with ctx.lock:
            plan = ctx.plan()
            self.planned_nodes = {
                pf.flow_id: pf.nodes[1:-1] for pf in plan.flows if pf.path_index >= 0
            }
            if not ctx.is_active():
                return 0
            rates = ctx.rates.compute(
                plan, self.active_flows(), reason=reason, background=background
            )
            hosts = self.server.hosts() if self.server is not None else []
            sent = self.push(self.caps_by_host(rates), self.starts_by_host(hosts))
            if ctx.store_keeps_caps():
                try:  # the etcd store keeps the caps (the state file does not)
                    ctx.save_state()
                except Exception as exc:  # the caps are pushed; the store catches up later
                    log.warning("%s: caps not saved: %s", reason, exc)
            return sent

    def lower_first(self, reason: str) -> int:
        """Make-before-break, before a change's moved flows are written: every cap the new
        plan lowers (or gives to a flow that had none) is pushed now, no cap is raised or
        released (:func:`lowered_caps`); :meth:`reallocate` after the writes pushes the rest.
        So a flow that a replan moves onto a shared link is slowed before (or, with a
        failure's urgent moves, as) it gets there, never after the writes; the hosts pushed
        to."""
        ctx = self.ctx
        with ctx.lock:
            if not ctx.is_active() or self.server is None:
                return 0
            rates = ctx.rates.compute(
                ctx.plan(), self.active_flows(), reason=f"{reason} (lowered before the writes)"
            )
            return self.push(lowered_caps(self.pushed, self.caps_by_host(rates)))

    def planned_path(self, flow_id: str) -> tuple[str, ...] | None:
        """The switches of a flow's planned path (telemetry checks reports against it)."""
        return self.planned_nodes.get(flow_id)

    def over_target(self, measured: dict[int, float]) -> None:
        """Telemetry saw links above the target: recompute with the traffic no allocated flow
        accounts for taken off those links (queued on the worker)."""

        def run() -> None:
            with self.ctx.lock:
                alloc = self.ctx.rates.link_bps
                background = {
                    lk: max(0.0, bps - alloc.get(lk, 0.0)) for lk, bps in measured.items()
                }
            names = ", ".join(self.ctx.topo.link_name(lk) for lk in sorted(measured)[:3])
            self.reallocate(f"telemetry: {names} above target", background)

        self.ctx.post(run)

    def caps_by_host(self, rates: Mapping[str, float]) -> dict[str, dict[FlowKey, float]]:
        """The caps of every sending host, keyed as its agent sees its flows."""
        keys = self.flows.install_keys()
        out: dict[str, dict[FlowKey, float]] = {}
        for fid, bps in rates.items():
            f = self.ctx.flows.get(fid)
            if f is None:
                continue
            out.setdefault(f.src_host, {})[flow_key(self.ctx.topo, f, keys)] = bps
        return out

    def starts_by_host(self, hosts: list[str] | None = None) -> dict[str, tuple[Start, ...]]:
        """Each host's start table from the last rate computation's residuals (every host of
        the topology, or ``hosts``)."""
        ctx = self.ctx
        known = None if hosts is None else [h for h in hosts if h in ctx.topo.leaf_of]
        return unplanned_starts(ctx.topo, ctx.rates.residual_bps, known, target=ctx.rates.target)

    def push(
        self,
        caps: Mapping[str, dict[FlowKey, float]],
        starts: Mapping[str, tuple[Start, ...]] | None = None,
    ) -> int:
        """Send each connected host its cap set (and start table; None: the last one pushed)
        when either changed; the number of hosts sent to."""
        if self.server is None:
            return 0
        sent = 0
        for host in self.server.hosts():
            mine = caps.get(host, {})
            table = self.pushed_starts.get(host, ()) if starts is None else starts.get(host, ())
            if self.pushed.get(host) == mine and self.pushed_starts.get(host, ()) == table:
                continue
            if self.server.push_caps(host, mine, table):
                self.pushed[host] = dict(mine)
                self.pushed_starts[host] = table
                sent += 1
                top = max(mine.values(), default=0.0)
                self.ctx.events.record(
                    "caps_pushed",
                    f"caps to {host}: {len(mine)} flow(s)"
                    + (f", highest {top / 1e9:.3g} Gbit/s" if mine else " (none)"),
                    host=host,
                    flows=len(mine),
                )
        return sent

    # -- views -----------------------------------------------------------------------------

    def view_agents(self) -> dict[str, Any]:
        """Connected agents, their flows (accepted and refused), lost hosts, channel counters."""
        with self.ctx.lock:
            sessions = self.server.sessions() if self.server else []
            for s in sessions:
                s["accepted"] = len(self.flows.reported.get(s["host"], {}))
                s["rejected"] = self.flows.rejected.get(s["host"], [])[:20]
                s["unplanned"] = self.flows.unplanned.get(s["host"], 0)
            st = self.server.stats if self.server else None
            return {
                "listening": (
                    [
                        str(x)
                        for x in (
                            f"unix:{self.server.unix_path}" if self.server.unix_path else None,
                            f"tcp:{self.server.tcp.host}:{self.server.tcp_port}"
                            if self.server.tcp
                            else None,
                        )
                        if x
                    ]
                    if self.server
                    else []
                ),
                "agents": sessions,
                "lost": sorted(self.flows.lost),
                "real_keys": len(self.flows.keys),
                "key_installs": [k.to_dict() for k in list(self.key_installs)[-10:]],
                "counters": {
                    "accepted": st.accepted if st else 0,
                    "refused": st.refused if st else 0,
                    "malformed": st.malformed if st else 0,
                    "lost": st.lost if st else 0,
                    "caps_pushed": st.caps_pushed if st else 0,
                },
            }

    def view_caps(self, host: str | None = None) -> dict[str, Any]:
        """Per flow: rate, cap host, key; the phases; the last recomputations."""
        ctx = self.ctx
        with ctx.lock:
            keys = self.flows.install_keys()
            connected = set(self.server.hosts()) if self.server else set()
            rows = []
            for fid, bps in sorted(ctx.rates.rates.items()):
                f = ctx.flows.get(fid)
                if f is None or (host is not None and f.src_host != host):
                    continue
                rep = self.flows.report_of(fid)
                rows.append(
                    {
                        "flow": fid,
                        "job": f.job,
                        "phase": f.phase,
                        "host": f.src_host,
                        "cap_bps": bps,
                        "pushed": f.src_host in connected and f.src_host in self.pushed,
                        "key": flow_key(ctx.topo, f, keys).to_dict(),
                        "key_source": "agent" if fid in keys else "planned",
                        "agent_state": rep.state if rep else None,
                        "agent_rate_bps": rep.rate_bps if rep else None,
                    }
                )
            return {
                "target": ctx.rates.target,
                "phases": dict(sorted(self.phases.items())),
                "flows": rows,
                "recomputed": ctx.rates.count,
                "history": [a.to_dict() for a in list(ctx.rates.history)[-10:]],
            }


def lowered_caps(
    pushed: Mapping[str, Mapping[FlowKey, float]], new: Mapping[str, Mapping[FlowKey, float]]
) -> dict[str, dict[FlowKey, float]]:
    """Each host's cap set with only the decreases of ``new`` applied to what was ``pushed``:
    a cap that goes down takes its new value, a flow without a cap gets its new one (a cap
    where there was none only lowers), a cap that goes up or is released keeps its old
    value (SWAN's order: rates down, paths moved, rates up)."""
    out: dict[str, dict[FlowKey, float]] = {}
    for host in sorted(set(pushed) | set(new)):
        mine = dict(pushed.get(host, {}))
        for key, bps in new.get(host, {}).items():
            mine[key] = min(mine[key], bps) if key in mine else bps
        out[host] = mine
    return out
