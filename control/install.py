"""Plans as table entries: one ``flow_path`` entry per planned flow on its first-hop leaf.

The flow key is what the first hop matches: IPv4 source and destination of the two hosts, the
RoCEv2 UDP source port and the BTH destination QP. Flows whose job description gives neither
(the usual case: the NIC picks them per QP) get deterministic stand-ins derived from the flow id
(:meth:`Flow.entropy_sport`, :meth:`Flow.entropy_qp`), and senders built from the same flows use the
same values, so what is planned is what matches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from icefabric.control.ccl.demand import Flow
from icefabric.control.fabric import TagMap, entity_key
from icefabric.control.flowkey import FlowKey
from icefabric.control.p4rt import Entity, TableEntry, Update
from icefabric.control.planner.plan import Plan, PlannedFlow
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n

log = logging.getLogger(__name__)


def flow_qp(flow: Flow) -> int:
    """The destination QP of a flow, or a deterministic 24-bit stand-in from its flow id."""
    return flow.entropy_qp()


def flow_key(topo: Topology, flow: Flow, keys: Mapping[str, FlowKey] | None = None) -> FlowKey:
    """The match key of ``flow``: the real key its agent reported (``keys``, by flow id), else
    addresses from the topology's hosts with the job's or stand-in port and QP."""
    if keys is not None:
        real = keys.get(flow.flow_id)
        if real is not None:
            return real
    return FlowKey.of_flow(topo, flow)


def flow_path_entry(key: FlowKey, tag: int) -> TableEntry:
    """The flow_path entry steering ``key`` onto the path ``tag``."""
    return TableEntry(
        table=n.TABLE_FLOW_PATH,
        match={
            "src_addr": key.src_ip,
            "dst_addr": key.dst_ip,
            "udp_src_port": key.udp_sport,
            "dst_qp": key.dst_qp,
        },
        action=n.ACTION_SET_PLANNED_PATH,
        params={"path_tag": tag},
    )


def _tag_of(pf: PlannedFlow, tags: TagMap) -> int | None:
    if pf.path_index < 0 or pf.src_leaf == pf.dst_leaf:
        return None
    return tags.tag(pf.src_leaf, pf.dst_leaf, pf.path_index)


def plan_entries(
    topo: Topology,
    plan: Plan,
    flows: Mapping[str, Flow],
    tags: TagMap,
    keys: Mapping[str, FlowKey] | None = None,
) -> dict[str, list[Entity]]:
    """Per first-hop leaf, the flow_path entries of every routed inter-leaf flow of ``plan``
    (matching the real key an agent reported for it, when ``keys`` has one).

    Flows on one leaf need no entry (they are routed by IPv4) and unrouted flows get none (they
    fall back to flowlets/ECMP). Two flows with the same key (a stand-in collision) share the
    entry of the first; the second is logged.
    """
    out: dict[str, list[Entity]] = {}
    seen: dict[tuple[str, FlowKey], str] = {}
    for pf in plan.flows:
        tag = _tag_of(pf, tags)
        if tag is None:
            continue
        flow = flows.get(pf.flow_id)
        if flow is None:
            raise KeyError(f"plan names flow {pf.flow_id!r} that the controller does not know")
        key = flow_key(topo, flow, keys)
        first = seen.get((pf.src_leaf, key))
        if first is not None:
            log.warning(
                "flows %s and %s share the key %s; %s keeps the path of %s",
                first,
                pf.flow_id,
                key,
                pf.flow_id,
                first,
            )
            continue
        seen[(pf.src_leaf, key)] = pf.flow_id
        out.setdefault(pf.src_leaf, []).append(flow_path_entry(key, tag))
    return out


def explain(
    topo: Topology,
    plan: Plan,
    flows: Mapping[str, Flow],
    tags: TagMap,
    keys: Mapping[str, FlowKey] | None = None,
) -> list[dict[str, Any]]:
    """Per planned flow: first hop, tag, switch path, match key and bytes (plain data)."""
    rows = []
    for pf in plan.flows:
        flow = flows.get(pf.flow_id)
        tag = _tag_of(pf, tags)
        rows.append(
            {
                "flow": pf.flow_id,
                "job": pf.job,
                "src": pf.src_host,
                "dst": pf.dst_host,
                "first_hop": pf.src_leaf,
                "tag": tag,
                "path_index": pf.path_index,
                "path": list(pf.nodes),
                "bytes": pf.bytes,
                "key": flow_key(topo, flow, keys).match_dict() if flow is not None else None,
                "key_source": _key_source(flow, keys),
            }
        )
    return rows


def _key_source(flow: Flow | None, keys: Mapping[str, FlowKey] | None) -> str | None:
    """Where a flow's match key comes from: its agent, the job file, or stand-ins."""
    if flow is None:
        return None
    if keys is not None and flow.flow_id in keys:
        return "agent"
    return "job" if flow.udp_sport is not None and flow.qp is not None else "stand-in"


def diff_updates(old: Iterable[Entity], new: Iterable[Entity]) -> list[Update]:
    """The writes that turn ``old`` into ``new`` on one switch: inserts and modifies first,
    then deletes (so a flow is never without an entry while it moves)."""
    before = {entity_key(e): e for e in old}
    after = {entity_key(e): e for e in new}
    puts: list[Update] = []
    for k, e in after.items():
        prev = before.get(k)
        if prev is None:
            if isinstance(e, TableEntry) and e.is_default_action:
                puts.append(Update("MODIFY", e))  # a default entry exists from the start
            else:
                puts.append(Update("INSERT", e))
        elif prev != e:
            puts.append(Update("MODIFY", e))
    dels = [_removal(e) for k, e in before.items() if k not in after]
    return puts + dels


def _removal(e: Entity) -> Update:
    """The write that takes ``e`` off a switch: a default entry cannot be deleted (P4Runtime),
    so it is reset to the program's own default action (a MODIFY with no action)."""
    if isinstance(e, TableEntry) and e.is_default_action:
        return Update("MODIFY", TableEntry(table=e.table, is_default_action=True))
    return Update("DELETE", e)


def merge(*parts: Mapping[str, Iterable[Entity]]) -> dict[str, list[Entity]]:
    """Per-switch entity lists of several sources concatenated."""
    out: dict[str, list[Entity]] = {}
    for part in parts:
        for sw, ents in part.items():
            out.setdefault(sw, []).extend(ents)
    return out


@dataclass(slots=True, frozen=True, kw_only=True)
class ChangeReport:
    """What one change (job, failure, mode) did and how long each step took."""

    what: str
    moved: int  # flows whose path changed
    entries: int  # updates written
    plan_ms: float
    install_ms: float  # writes of the planned-flow entries (the flows' new paths are live)
    base_ms: float  # writes of the base-forwarding difference after it
    max_load: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "what": self.what,
            "moved": self.moved,
            "entries": self.entries,
            "plan_ms": self.plan_ms,
            "install_ms": self.install_ms,
            "base_ms": self.base_ms,
            "max_load": self.max_load,
        }
