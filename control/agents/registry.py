"""What the agents told the controller, checked against the jobs it runs: the real key of each
flow (kept when an agent is lost and across a controller restart, through the state file), which
connected host reports which flow now, and the reports that were refused and why.

Pure data and logic: no sockets, no threads (the controller calls it under its lock).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from icefabric.control.agents.protocol import FlowReport
from icefabric.control.ccl.demand import Flow
from icefabric.control.flowkey import ROCE_UDP_PORT, FlowKey

log = logging.getLogger(__name__)

MAX_REJECTED_SHOWN = 20  # per host, in views


@dataclass(slots=True)
class AgentFlows:
    """The agents' view of the controller's flows."""

    keys: dict[str, FlowKey] = field(default_factory=dict)  # flow id -> real key
    reported: dict[str, dict[str, FlowReport]] = field(default_factory=dict)  # host -> id -> rep
    lost: set[str] = field(default_factory=set)  # hosts whose agent went away
    rejected: dict[str, list[str]] = field(default_factory=dict)  # host -> one-line reasons
    by_key: dict[FlowKey, str] = field(default_factory=dict)  # real key -> flow id
    unplanned: dict[str, int] = field(default_factory=dict)  # host -> flows of no job
    bound: dict[str, dict[str, FlowKey]] = field(default_factory=dict)  # host -> id -> key

    def update(
        self,
        host: str,
        reports: Iterable[FlowReport],
        flows: Mapping[str, Flow],
        address: Callable[[str], str],
    ) -> list[str]:
        """Take ``host``'s complete flow table; return the flow ids whose real key changed.

        A report with neither job nor flow id (a flow started by hand, ``icefabric-host
        --flow``) is bound to a planned flow with the same two hosts that no other report of
        ``host`` holds (the one it was bound to before, else the first by flow id): it gets that
        flow's path and cap. One that matches none is traffic of no job, counted in
        ``unplanned``. A report is accepted when it names a flow of a running job that sends from ``host``
        and its addresses are the two hosts' (``address(host)``) and its destination port is
        RoCEv2's; anything else is kept in ``rejected`` with the reason and otherwise ignored
        (a job added later re-checks it).
        """
        self.lost.discard(host)
        now: dict[str, FlowReport] = {}
        bad: list[str] = []
        changed: list[str] = []
        unplanned = 0
        reports = list(reports)
        anonymous = [r for r in reports if not r.job and not r.flow_id]
        named = {r.flow_id for r in reports if r.flow_id}
        bound: dict[str, FlowKey] = {}
        before = self.bound.get(host, {})
        for r in anonymous:
            fid = _bind(host, r, flows, address, taken=named | set(bound), before=before)
            if fid is None:
                unplanned += 1  # traffic of no job
                continue
            bound[fid] = r.key
            reports.append(dataclasses.replace(r, job=flows[fid].job, flow_id=fid))
        self.bound[host] = bound
        for r in reports:
            if not r.job and not r.flow_id:
                continue
            why = _mismatch(host, r, flows.get(r.flow_id), address)
            if why is not None:
                bad.append(f"{r.flow_id} ({r.key}): {why}")
                continue
            now[r.flow_id] = r
            if self.keys.get(r.flow_id) != r.key:
                self.set_key(r.flow_id, r.key)
                changed.append(r.flow_id)
        self.reported[host] = now
        self.unplanned[host] = unplanned
        if bad:
            if bad != self.rejected.get(host):
                log.warning(
                    "agent %s: %d flow report(s) refused, first: %s", host, len(bad), bad[0]
                )
            self.rejected[host] = bad
        else:
            self.rejected.pop(host, None)
        return changed

    def lose(self, host: str) -> None:
        """``host``'s agent went away: its flows no longer count (their keys stay)."""
        self.reported.pop(host, None)
        self.rejected.pop(host, None)
        self.unplanned.pop(host, None)
        self.bound.pop(host, None)
        self.lost.add(host)

    def forget(self, flow_ids: Iterable[str]) -> None:
        """Flows that no longer exist (their job was removed)."""
        gone = set(flow_ids)
        for fid in gone:
            old = self.keys.pop(fid, None)
            if old is not None:
                self.by_key.pop(old, None)
        for reps in self.reported.values():
            for fid in gone & reps.keys():
                del reps[fid]

    def set_key(self, flow_id: str, key: FlowKey) -> None:
        """Record the real key of a flow (from a report or the state file)."""
        old = self.keys.get(flow_id)
        if old is not None:
            self.by_key.pop(old, None)
        self.keys[flow_id] = key
        self.by_key[key] = flow_id

    def flow_of(self, key: FlowKey) -> str | None:
        """The flow whose real key is ``key``."""
        return self.by_key.get(key)

    def install_keys(self) -> dict[str, FlowKey]:
        """Every known real key (what the flow_path entries match), by flow id."""
        return dict(self.keys)

    def report_of(self, flow_id: str) -> FlowReport | None:
        """The current report of a flow by a connected agent, if any."""
        for reps in self.reported.values():
            r = reps.get(flow_id)
            if r is not None:
                return r
        return None

    def reporting(self, states: Iterable[str] = ("pending", "active")) -> set[str]:
        """Flow ids that connected agents report in one of ``states``."""
        want = set(states)
        return {
            fid for reps in self.reported.values() for fid, r in reps.items() if r.state in want
        }

    def to_state(self) -> dict[str, dict[str, object]]:
        """The real keys for the state file."""
        return {fid: self.keys[fid].to_dict() for fid in sorted(self.keys)}


def _bind(
    host: str,
    r: FlowReport,
    flows: Mapping[str, Flow],
    address: Callable[[str], str],
    *,
    taken: set[str],
    before: Mapping[str, FlowKey],
) -> str | None:
    """The planned flow a report of no job stands for: same hosts, not taken (see update)."""
    if r.key.udp_dport != ROCE_UDP_PORT:
        return None
    try:
        if r.key.src_ip != address(host):
            return None
    except KeyError:
        return None
    candidates = sorted(
        fid
        for fid, f in flows.items()
        if f.src_host == host and fid not in taken and address(f.dst_host) == r.key.dst_ip
    )
    for fid in candidates:
        if before.get(fid) == r.key:
            return fid
    return candidates[0] if candidates else None


def _mismatch(
    host: str, r: FlowReport, flow: Flow | None, address: Callable[[str], str]
) -> str | None:
    if flow is None:
        return "no such flow in the running jobs"
    if flow.job != r.job:
        return f"belongs to job {flow.job!r}, not {r.job!r}"
    if flow.src_host != host:
        return f"sends from {flow.src_host}, not from this host"
    src, dst = address(flow.src_host), address(flow.dst_host)
    if r.key.src_ip != src or r.key.dst_ip != dst:
        return f"expected addresses {src} -> {dst}"
    if r.key.udp_dport != ROCE_UDP_PORT:
        return f"expected UDP destination port {ROCE_UDP_PORT} (RoCEv2)"
    return None
