"""The controller's view of the fabric: a topology spec as a graph with directed link ids.

Every full-duplex link becomes two directed links with integer ids (load is per direction):
switch link ``i`` of the spec gives ``2*i`` (a -> b) and ``2*i + 1`` (b -> a); host ``j`` gives
``2*L + 2*j`` (host -> leaf) and ``2*L + 2*j + 1`` (leaf -> host), L = number of switch links.
So ``id ^ 1`` is always the reverse direction.

Candidate paths between two leaves are the valley-free shortest paths of the Clos: up from the
source leaf to a common ancestor at the lowest tier where one exists, then down. Each candidate
has a stable index in the full enumeration (failed links do not renumber the others), which the
base-forwarding installer uses as the path tag.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from icefabric.topo.spec import Switch, TopologySpec

log = logging.getLogger(__name__)

GBPS = 1e9 / 8.0  # bytes per second in one Gbit/s


class TopologyError(ValueError):
    """A name, port or link that the topology does not have, or no live path."""


@dataclass(slots=True, frozen=True, kw_only=True)
class DirLink:
    """One direction of a link: from ``src`` out of ``src_port`` into ``dst`` at ``dst_port``."""

    id: int
    src: str
    src_port: int
    dst: str
    dst_port: int
    rate_gbps: float
    kind: str  # "fabric", "host-up" (host -> leaf) or "host-down" (leaf -> host)


@dataclass(slots=True, frozen=True, kw_only=True)
class Hop:
    """One switch on a path: where the packet enters and leaves it."""

    switch: str
    in_port: int
    out_port: int


@dataclass(slots=True, frozen=True, kw_only=True)
class FabricPath:
    """A candidate path between two leaves; ``index`` is stable and becomes the path tag."""

    src_leaf: str
    dst_leaf: str
    index: int
    links: tuple[int, ...]  # directed link ids, leaf to leaf
    hops: tuple[Hop, ...]  # every switch from src_leaf to dst_leaf with in/out ports
    live: bool


@dataclass(slots=True, frozen=True, kw_only=True)
class _Anc:
    """The ancestors of one switch at one tier, with the up paths (and reversed: down) to them."""

    nodes: np.ndarray  # switch indices, sorted (repeated when parallel links give several paths)
    paths: np.ndarray  # [n, hops] directed link ids going up
    down: np.ndarray  # [n, hops] the same paths reversed, going down
    key: bytes
    nodeset: frozenset[int]
    unique: bool
    up_sets: tuple[bytes, ...]  # per hop going up: the sorted distinct link ids, as bytes
    down_sets: tuple[bytes, ...]  # per hop going down (from the ancestor), likewise


class Topology:
    """A validated spec turned into a graph, directed links and candidate paths."""

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.graph: nx.MultiGraph = nx.MultiGraph(name=spec.name)
        self.links: list[DirLink] = []
        self._out: dict[tuple[str, int], int] = {}
        tiers: dict[str, int] = {}
        for s in spec.switches:
            self.graph.add_node(s.name, kind="switch", role=s.role, tier=s.tier, switch=s)
            tiers[s.name] = s.tier
        for i, ln in enumerate(spec.links):
            rate = spec.link_rate(ln)
            self._add(2 * i, ln.a.node, ln.a.port, ln.b.node, ln.b.port, rate, "fabric")
            self._add(2 * i + 1, ln.b.node, ln.b.port, ln.a.node, ln.a.port, rate, "fabric")
            self.graph.add_edge(
                ln.a.node,
                ln.b.node,
                key=2 * i,
                a_port=ln.a.port,
                b_port=ln.b.port,
                rate_gbps=rate,
                delay_us=spec.link_delay(ln),
            )
        base = 2 * len(spec.links)
        self.host_index: dict[str, int] = {}
        for j, h in enumerate(spec.hosts):
            rate = spec.host_rate(h)
            self.host_index[h.name] = j
            self.graph.add_node(h.name, kind="host", ip=h.address, mac=h.mac, host=h)
            self._add(base + 2 * j, h.name, 0, h.leaf, h.port, rate, "host-up")
            self._add(base + 2 * j + 1, h.leaf, h.port, h.name, 0, rate, "host-down")
            self.graph.add_edge(
                h.name,
                h.leaf,
                key=base + 2 * j,
                a_port=0,
                b_port=h.port,
                rate_gbps=rate,
                delay_us=spec.defaults.link_delay_us,
            )
        self.capacity = np.array([ln.rate_gbps * GBPS for ln in self.links], dtype=np.float64)
        self.failed = np.zeros(len(self.links), dtype=bool)
        self._tier = tiers
        self._node_ids = {s.name: k for k, s in enumerate(spec.switches)}
        self.switches: dict[str, Switch] = {s.name: s for s in spec.switches}
        self._up: dict[str, dict[int, _Anc]] = {}
        self._disjoint_cache: dict[tuple[bytes, bytes], bool] = {}
        self._upl: dict[str, list[int]] = {}
        for dl in self.links:
            if dl.kind == "fabric" and tiers[dl.dst] == tiers[dl.src] + 1:
                self._upl.setdefault(dl.src, []).append(dl.id)
        self.leaf_of: dict[str, str] = {h.name: h.leaf for h in spec.hosts}
        self.leaves: tuple[str, ...] = tuple(s.name for s in spec.switches if s.tier == 0)

    def _add(self, lid: int, src: str, sp: int, dst: str, dp: int, rate: float, kind: str) -> None:
        self.links.append(
            DirLink(id=lid, src=src, src_port=sp, dst=dst, dst_port=dp, rate_gbps=rate, kind=kind)
        )
        self._out[(src, sp)] = lid

    # ------------------------------------------------------------------ lookups

    @property
    def n_links(self) -> int:
        """Number of directed links (the length of every per-link load array)."""
        return len(self.links)

    def link_at(self, node: str, port: int) -> int:
        """The directed link leaving ``node`` by ``port``."""
        try:
            return self._out[(node, port)]
        except KeyError:
            raise TopologyError(f"no link leaves {node!r} by port {port}") from None

    def link_name(self, lid: int) -> str:
        """A readable name for a directed link: ``leaf1:3->spine1:1``."""
        ln = self.links[lid]
        return f"{ln.src}:{ln.src_port}->{ln.dst}:{ln.dst_port}"

    def host_uplink(self, host: str) -> int:
        """The directed link host -> leaf."""
        try:
            return 2 * len(self.spec.links) + 2 * self.host_index[host]
        except KeyError:
            raise TopologyError(f"no host {host!r} in topology {self.spec.name!r}") from None

    def host_downlink(self, host: str) -> int:
        """The directed link leaf -> host."""
        return self.host_uplink(host) + 1

    def links_between(self, u: str, v: str) -> list[int]:
        """The directed link ids from ``u`` to ``v`` (several when links are parallel)."""
        return [ln.id for ln in self.links if ln.src == u and ln.dst == v]

    # ------------------------------------------------------------------ failures

    @staticmethod
    def both_directions(lid: int) -> list[int]:
        """The two directed link ids of the link that holds directed link ``lid`` (a link's
        directions are ids 2k and 2k + 1)."""
        return [lid & ~1, lid | 1]

    def fail_link(self, lid: int) -> list[int]:
        """Mark both directions of the link holding directed link ``lid`` down; returns them."""
        if not 0 <= lid < len(self.links):
            raise TopologyError(f"no link id {lid} (0..{len(self.links) - 1})")
        pair = self.both_directions(lid)
        self.failed[pair] = True
        log.info("link down: %s", self.link_name(lid & ~1))
        return pair

    def fail_port(self, node: str, port: int) -> list[int]:
        """Mark the link on ``node`` port ``port`` down (a port-down event); returns its ids."""
        return self.fail_link(self.link_at(node, port))

    def fail_switch(self, name: str) -> list[int]:
        """Mark every link of switch ``name`` down; returns the directed ids."""
        if name not in self._tier:
            raise TopologyError(f"no switch {name!r} in topology {self.spec.name!r}")
        ids = [ln.id for ln in self.links if name in (ln.src, ln.dst)]
        self.failed[ids] = True
        log.info("switch down: %s (%d directed links)", name, len(ids))
        return ids

    def restore(self, ids: Iterable[int] | None = None) -> None:
        """Mark the given directed links (all when None) up again."""
        if ids is None:
            self.failed[:] = False
        else:
            self.failed[list(ids)] = False

    # ------------------------------------------------------------------ candidate paths

    def _ancestors(self, sw: str) -> dict[int, _Anc]:
        """Per tier above ``sw``: ancestor node ids and up-path link ids [n, hops], by node."""
        got = self._up.get(sw)
        if got is not None:
            return got
        tier = self._tier[sw]
        parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for lid in self._up_links(sw):
            parent = self.links[lid].dst
            for t, anc in self._ancestors(parent).items():
                col = np.full((len(anc.nodes), 1), lid, dtype=np.int64)
                parts.setdefault(t, []).append((anc.nodes, np.hstack([col, anc.paths])))
            parts.setdefault(self._tier[parent], []).append(
                (
                    np.array([self._node_ids[parent]], dtype=np.int64),
                    np.array([[lid]], dtype=np.int64),
                )
            )
        out: dict[int, _Anc] = {}
        for t, chunks in parts.items():
            nodes = np.concatenate([c[0] for c in chunks])
            paths = np.concatenate([c[1] for c in chunks]).reshape(len(nodes), t - tier)
            # by ancestor, then by the links of the path: a stable order (candidate indices)
            order = np.lexsort([paths[:, j] for j in reversed(range(paths.shape[1]))] + [nodes])
            nodes, paths = nodes[order], np.ascontiguousarray(paths[order])
            down = np.ascontiguousarray(paths[:, ::-1] ^ 1)
            out[t] = _Anc(
                nodes=nodes,
                paths=paths,
                down=down,
                key=nodes.tobytes(),
                nodeset=frozenset(nodes.tolist()),
                unique=len(set(nodes.tolist())) == len(nodes),
                up_sets=tuple(np.unique(paths[:, j]).tobytes() for j in range(paths.shape[1])),
                down_sets=tuple(np.unique(down[:, j]).tobytes() for j in range(down.shape[1])),
            )
        self._up[sw] = out
        return out

    def _up_links(self, sw: str) -> list[int]:
        return self._upl.get(sw, [])

    def candidate_array(self, src_leaf: str, dst_leaf: str) -> np.ndarray:
        """All candidate paths src_leaf -> dst_leaf (failed ones included) as link ids [P, hops]."""
        if src_leaf not in self._tier or dst_leaf not in self._tier:
            bad = src_leaf if src_leaf not in self._tier else dst_leaf
            raise TopologyError(f"no switch {bad!r} in topology {self.spec.name!r}")
        if src_leaf == dst_leaf:
            return np.zeros((1, 0), dtype=np.int64)
        a_s = self._ancestors(src_leaf)
        a_d = self._ancestors(dst_leaf)
        for t in sorted(set(a_s) & set(a_d)):
            s_anc, d_anc = a_s[t], a_d[t]
            if s_anc.key == d_anc.key and s_anc.unique:
                return np.concatenate([s_anc.paths, d_anc.down], axis=1)
            if self._disjoint(s_anc, d_anc):
                continue
            rows = []
            for i, node in enumerate(s_anc.nodes.tolist()):
                for j in np.nonzero(d_anc.nodes == node)[0].tolist():
                    rows.append(np.concatenate([s_anc.paths[i], d_anc.down[j]]))
            return np.stack(rows)
        return np.zeros((0, 0), dtype=np.int64)

    def candidate_halves(
        self, src_leaf: str, dst_leaf: str
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(up [P, t], down [P, t]) when candidate i is up path i + down path i (the usual Clos
        case: both leaves reach the same ancestors, one way each); None otherwise or same leaf.

        The arrays are cached and shared: do not modify them.
        """
        if src_leaf == dst_leaf:
            return None
        a_s = self._ancestors(src_leaf)
        a_d = self._ancestors(dst_leaf)
        for t in sorted(a_s.keys() & a_d.keys()):
            s_anc, d_anc = a_s[t], a_d[t]
            if s_anc.key == d_anc.key and s_anc.unique:
                return s_anc.paths, d_anc.down
            if not self._disjoint(s_anc, d_anc):
                return None
        return None

    def _disjoint(self, a: _Anc, b: _Anc) -> bool:
        """Whether two ancestor sets share no switch (cached: few distinct sets per tier)."""
        k = (a.key, b.key)
        got = self._disjoint_cache.get(k)
        if got is None:
            got = a.nodeset.isdisjoint(b.nodeset)
            self._disjoint_cache[k] = got
        return got

    def hop_sets(self, src_leaf: str, dst_leaf: str) -> list[bytes]:
        """Per hop position of the candidates (failed included): the distinct link ids there.

        Each is a sorted int64 array as bytes (``np.frombuffer(b, np.int64)``); every candidate
        crosses exactly one link of each set, so each set is a cut between the two leaves.
        """
        if src_leaf == dst_leaf:
            return []
        a_s = self._ancestors(src_leaf)
        a_d = self._ancestors(dst_leaf)
        for t in sorted(set(a_s) & set(a_d)):
            s_anc, d_anc = a_s[t], a_d[t]
            if s_anc.key == d_anc.key and s_anc.unique:
                return [*s_anc.up_sets, *d_anc.down_sets]
            if not self._disjoint(s_anc, d_anc):
                break
        arr = self.candidate_array(src_leaf, dst_leaf)
        return [np.unique(arr[:, j]).tobytes() for j in range(arr.shape[1])]

    def live_candidates(self, src_leaf: str, dst_leaf: str) -> tuple[np.ndarray, np.ndarray]:
        """(paths [P, hops], stable indices [P]) of the candidates with no failed link."""
        arr = self.candidate_array(src_leaf, dst_leaf)
        if arr.shape[1] == 0:
            return arr, np.arange(arr.shape[0])
        ok = ~self.failed[arr].any(axis=1)
        return arr[ok], np.nonzero(ok)[0]

    def candidate_paths(
        self, src_leaf: str, dst_leaf: str, *, include_failed: bool = False
    ) -> list[FabricPath]:
        """Candidate paths between two leaves as objects with per-switch hops (for path tags)."""
        arr = self.candidate_array(src_leaf, dst_leaf)
        out = []
        for idx, row in enumerate(arr.tolist()):
            live = not bool(self.failed[row].any()) if row else True
            if not live and not include_failed:
                continue
            out.append(
                FabricPath(
                    src_leaf=src_leaf,
                    dst_leaf=dst_leaf,
                    index=idx,
                    links=tuple(row),
                    hops=self.hops(row),
                    live=live,
                )
            )
        return out

    def hops(self, links: Iterable[int]) -> tuple[Hop, ...]:
        """The switches a chain of directed links passes, with in and out ports.

        The first hop is the switch the first link leaves (in_port 0 when the chain starts at a
        switch); the last hop is the switch the last link enters (out_port 0 when it ends there).
        """
        ids = list(links)
        if not ids:
            return ()
        hops = []
        first = self.links[ids[0]]
        in_port = 0
        prev = first
        if self.graph.nodes[first.src]["kind"] == "switch":
            hops.append(Hop(switch=first.src, in_port=0, out_port=first.src_port))
        for lid in ids[1:]:
            ln = self.links[lid]
            if ln.src != prev.dst:
                raise TopologyError(
                    f"links {prev.id} and {lid} do not chain ({prev.dst} != {ln.src})"
                )
            in_port = prev.dst_port
            hops.append(Hop(switch=ln.src, in_port=in_port, out_port=ln.src_port))
            prev = ln
        if self.graph.nodes[prev.dst]["kind"] == "switch":
            hops.append(Hop(switch=prev.dst, in_port=prev.dst_port, out_port=0))
        return tuple(hops)

    def host_path(self, src_host: str, dst_host: str, fabric_links: Iterable[int]) -> list[int]:
        """The full directed link list host -> leaf -> ... -> leaf -> host for a fabric path."""
        return [self.host_uplink(src_host), *fabric_links, self.host_downlink(dst_host)]

    def host_candidates(self, src_host: str, dst_host: str) -> list[list[int]]:
        """Every live full path host -> host as directed link ids (one per fabric candidate)."""
        if src_host not in self.leaf_of or dst_host not in self.leaf_of:
            bad = src_host if src_host not in self.leaf_of else dst_host
            raise TopologyError(f"no host {bad!r} in topology {self.spec.name!r}")
        paths, _ = self.live_candidates(self.leaf_of[src_host], self.leaf_of[dst_host])
        return [self.host_path(src_host, dst_host, row) for row in paths.tolist()]

    def leaf_pairs(self) -> list[tuple[str, str]]:
        """Every ordered pair of distinct leaves (each needs the tag entries of its candidates)."""
        return [(a, b) for a in self.leaves for b in self.leaves if a != b]

    def check_connected(self) -> list[str]:
        """Problems that make some host pair unreachable (empty list when all are reachable)."""
        problems = []
        for a in self.leaves:
            for b in self.leaves:
                if a != b and self.live_candidates(a, b)[0].shape[0] == 0:
                    problems.append(f"no live path from {a} to {b}")
        return problems
