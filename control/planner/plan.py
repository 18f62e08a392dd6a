"""A plan as data: every flow's path and every link's load, serialisable to JSON.

Loads are given three ways per directed link: ``bytes`` (what the plan puts on it), ``seconds``
(bytes at line rate, the quantity the planner minimises the maximum of) and ``utilisation`` =
seconds / (the largest host-link seconds). The busiest NIC bounds how fast the traffic can
finish at all, so utilisation <= 1 on every fabric link means the fabric does not slow the
collective down, and > 1 shows by how much it does.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from icefabric.control.planner.state import PlanState
from icefabric.files import parse_json, write_output


@dataclass(slots=True, frozen=True, kw_only=True)
class PlannedFlow:
    """One flow's place in the plan."""

    flow_id: str
    job: str
    phase: str
    channel: int
    src_host: str
    dst_host: str
    src_leaf: str
    dst_leaf: str
    bytes: float
    path_index: int  # stable candidate index between the leaves (the path tag); -1 unrouted
    links: tuple[int, ...]  # directed link ids host -> ... -> host
    nodes: tuple[str, ...]  # host, switches..., host


@dataclass(slots=True, frozen=True, kw_only=True)
class LinkLoad:
    """Load on one directed link."""

    link: int
    name: str
    kind: str
    rate_gbps: float
    bytes: float
    seconds: float
    utilisation: float
    flows: int


@dataclass(slots=True, kw_only=True)
class Plan:
    """The planner's answer: paths, loads, bounds and how long it took."""

    topology: str
    method: str
    flows: tuple[PlannedFlow, ...]
    max_load_s: float  # the largest link load in seconds of line rate
    lower_bound_s: float
    elapsed_s: float
    unrouted: dict[str, str] = field(default_factory=dict)  # flow id -> reason
    link_seconds: dict[int, float] = field(default_factory=dict)  # non-zero links only

    @property
    def gap(self) -> float:
        """max load / lower bound - 1 (0 when the plan meets the bound)."""
        return self.max_load_s / self.lower_bound_s - 1.0 if self.lower_bound_s > 0 else 0.0

    def flow(self, flow_id: str) -> PlannedFlow:
        """The planned flow called ``flow_id`` (KeyError if none)."""
        for f in self.flows:
            if f.flow_id == flow_id:
                return f
        raise KeyError(flow_id)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "topology": self.topology,
            "method": self.method,
            "max_load_s": self.max_load_s,
            "lower_bound_s": self.lower_bound_s,
            "gap": self.gap,
            "elapsed_s": self.elapsed_s,
            "unrouted": dict(self.unrouted),
            "link_seconds": {str(k): v for k, v in sorted(self.link_seconds.items())},
            "flows": [
                {**asdict(f), "links": list(f.links), "nodes": list(f.nodes)} for f in self.flows
            ],
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """The plan as JSON text, also written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            write_output(path, text + "\n")  # never through a link, nor over another's file
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The inverse of :meth:`to_dict`."""
        flows = tuple(
            PlannedFlow(**{**f, "links": tuple(f["links"]), "nodes": tuple(f["nodes"])})
            for f in data["flows"]
        )
        return cls(
            topology=data["topology"],
            method=data["method"],
            flows=flows,
            max_load_s=float(data["max_load_s"]),
            lower_bound_s=float(data["lower_bound_s"]),
            elapsed_s=float(data["elapsed_s"]),
            unrouted=dict(data.get("unrouted", {})),
            link_seconds={int(k): float(v) for k, v in data.get("link_seconds", {}).items()},
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Parse :meth:`to_json` output."""
        return cls.from_dict(parse_json(text))


def build_plan(
    state: PlanState,
    *,
    method: str,
    lower_bound_s: float,
    elapsed_s: float,
    cache: dict[str, PlannedFlow] | None = None,
) -> Plan:
    """Snapshot a PlanState as a Plan; ``cache`` (flow id -> PlannedFlow) reuses unchanged flows."""
    topo = state.topo
    leaf_of = topo.leaf_of
    dst_of = [ln.dst for ln in topo.links]
    pad = state.pad
    rows = state.live_rows()
    paths = state.paths[rows].tolist()
    choice = state.choice[rows].tolist()
    ups = state.host_up[rows].tolist()
    downs = state.host_down[rows].tolist()
    sizes = state.size[rows].tolist()
    flows = []
    for k, i in enumerate(rows.tolist()):
        f = state.flows[i]
        c = choice[k]
        old = cache.get(f.flow_id) if cache is not None else None
        if old is not None and old.path_index == c and old.bytes == sizes[k]:
            flows.append(old)
            continue
        if c >= 0:
            links = (ups[k], *(x for x in paths[k] if x != pad), downs[k])
            nodes = (f.src_host, *(dst_of[lid] for lid in links))
        else:
            links, nodes = (), ()
        pf = PlannedFlow(
            flow_id=f.flow_id, job=f.job, phase=f.phase, channel=f.channel,
            src_host=f.src_host, dst_host=f.dst_host,
            src_leaf=leaf_of[f.src_host], dst_leaf=leaf_of[f.dst_host],
            bytes=sizes[k], path_index=c, links=links, nodes=nodes,
        )  # fmt: skip
        if cache is not None:
            cache[f.flow_id] = pf
        flows.append(pf)
    if cache is not None and len(cache) > len(flows):
        live = {pf.flow_id for pf in flows}
        for fid in [fid for fid in cache if fid not in live]:
            del cache[fid]
    load = state.load[:pad]
    nz = np.nonzero(load > 0)[0]
    return Plan(
        topology=topo.spec.name,
        method=method,
        flows=tuple(flows),
        max_load_s=state.max_load(),
        lower_bound_s=lower_bound_s,
        elapsed_s=elapsed_s,
        unrouted=dict(state.unrouted),
        link_seconds={int(k): float(load[k]) for k in nz.tolist()},
    )


def link_table(
    plan: Plan, state: PlanState, *, ecmp_seconds: np.ndarray | None = None
) -> list[dict[str, Any]]:
    """Per directed link with any load: name, rate, bytes, seconds, utilisation, flows, ECMP."""
    topo = state.topo
    host_links = [lid for lid, ln in enumerate(topo.links) if ln.kind != "fabric"]
    seconds = np.zeros(topo.n_links)
    for k, v in plan.link_seconds.items():
        seconds[k] = v
    ref = float(seconds[host_links].max()) if host_links else 0.0
    counts = np.zeros(topo.n_links, dtype=np.int64)
    for f in plan.flows:
        for lid in f.links:
            counts[lid] += 1
    rows = []
    for lid in range(topo.n_links):
        e = float(ecmp_seconds[lid]) if ecmp_seconds is not None else 0.0
        if seconds[lid] <= 0 and e <= 0:
            continue
        ln = topo.links[lid]
        row: dict[str, Any] = asdict(
            LinkLoad(
                link=lid,
                name=topo.link_name(lid),
                kind=ln.kind,
                rate_gbps=ln.rate_gbps,
                bytes=float(seconds[lid] * topo.capacity[lid]),
                seconds=float(seconds[lid]),
                utilisation=float(seconds[lid] / ref) if ref > 0 else 0.0,
                flows=int(counts[lid]),
            )
        )
        if ecmp_seconds is not None:
            row["ecmp_seconds"] = e
            row["ecmp_utilisation"] = e / ref if ref > 0 else 0.0
        rows.append(row)
    return rows
