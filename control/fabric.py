"""Base forwarding: every switch's table entries for a working ICE fabric, computed as data.

``base_entries(topo, options)`` is a pure function from the topology (with its failed links) and
the options to ``{switch name: [p4rt entities]}``:

* ``switch_config`` (switch id, role), ``port_kind`` (host or fabric for every port);
* ``ipv4_route``: host /32s on their leaf, destination-leaf prefixes elsewhere along a shortest
  live path (spread over equal next hops by destination), so ping works between all hosts;
* ``arp_reply``: every leaf answers ARP for every fabric host with its own router MAC (hosts use
  an on-link default route and ARP for everything);
* path tags: every candidate path between two leaves gets a fabric-wide unique 16-bit tag
  (:func:`allocate_tags`, stable: a failed link renumbers nothing); every switch on the path gets
  a ``tag_forward`` entry (next port, or ``end_path`` on the last leaf);
* ``dst_leaf`` (host prefix -> leaf id) and ``path_candidate`` (for each destination leaf all
  ``PATH_BUCKETS`` buckets spread over the live candidates in proportion to their bottleneck
  rate): the groups flowlets and ECMP pick from;
* ``lb_config`` (mode ICE / planned-ECMP / ECMP baseline), ``int_policy``, ``telemetry_config``,
  ``report_config``, ``feedback_config``, ``ecn_config`` (default action: every port),
  ``egress_port_info`` (link rates for INT) and the three clone sessions of the last hop.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from icefabric.control.p4rt import LPM, CloneSessionEntry, Entity, Replica, TableEntry
from icefabric.control.topology import FabricPath, Topology
from icefabric.p4src import ice_p4 as n

log = logging.getLogger(__name__)

MODES: Mapping[str, int] = {
    "ice": n.LB_MODE_PLANNED_FLOWLET,
    "planned-ecmp": n.LB_MODE_PLANNED_ECMP,
    "ecmp": n.LB_MODE_ECMP,
    # per packet at the first leaf (bucket = BTH PSN mod PATH_BUCKETS), plans ignored: the
    # receivers must tolerate reordering (p4src/README.md, "Spray")
    "spray": n.LB_MODE_SPRAY,
}
ALL_PATH_KINDS = (n.PATH_KIND_PLANNED, n.PATH_KIND_FLOWLET, n.PATH_KIND_ECMP, n.PATH_KIND_SPRAY)
MAX_INT_SAMPLE_N = 1 << 23  # psn_mask is 24 bits
MAX_TAG = 0xFFFF


class FabricError(ValueError):
    """The topology cannot be programmed (too many tags, table overflow, bad option)."""


def to_switch_clock(us: int, clock_ns: int) -> int:
    """``us`` in ticks of ``clock_ns`` ns, rounded; non-zero stays non-zero (0: never)."""
    return 0 if us <= 0 else max(1, (us * 1000 + clock_ns // 2) // clock_ns)


@dataclass(slots=True, frozen=True)
class IntSampling:
    """INT hop records on 1 in ``every_n`` packets of a flow, and on any packet of a flow that
    has gone ``max_gap_us`` without one, decided at its first leaf.

    ``every_n`` is a power of two (1: every packet, the program's default); the switch samples a
    packet when ``((psn ^ (psn >> 6)) & (every_n - 1)) == 0`` or when the flow's last sample
    is at least ``max_gap_us`` old (0: no such floor; p4src/README.md, "INT sampling"), so
    with ``feedback_every_n = 1`` the last hop returns feedback (and offers a report) for
    exactly the sampled packets.  ``entry()`` is the write: the default action of
    ``IceIngress.path_select.int_sampling`` on a leaf.
    """

    every_n: int = 1
    max_gap_us: int = 0

    def __post_init__(self) -> None:
        n_ = self.every_n
        if isinstance(n_, bool) or not isinstance(n_, int) or not 1 <= n_ <= MAX_INT_SAMPLE_N:
            raise FabricError(f"int sampling: expected 1..{MAX_INT_SAMPLE_N}, got {n_!r}")
        if n_ & (n_ - 1):
            raise FabricError(f"int sampling: expected a power of two, got {n_}")
        g = self.max_gap_us
        if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < 2**31:
            raise FabricError(f"int sampling: max gap: expected 0..2^31-1 us, got {g!r}")

    def entry(self, clock_ns: int = 1000) -> TableEntry:
        """The table write that sets this sampling on one switch (a keyless table's default);
        the gap in ticks of the switch's ingress clock (``FabricOptions.switch_clock_ns``)."""
        return _default(
            n.TABLE_INT_SAMPLING,
            n.ACTION_SET_INT_SAMPLING,
            psn_mask=self.every_n - 1,
            max_gap_us=to_switch_clock(self.max_gap_us, clock_ns),
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class FabricOptions:
    """Knobs of base forwarding; the defaults are what ``icectl run`` installs."""

    mode: str = "ice"  # "ice" (planned, else flowlet), "planned-ecmp", "ecmp" (baseline), "spray"
    use_qp_in_hash: bool = True  # E-ECMP: hash the BTH destination QP too
    flowlet_timeout_us: int = 100
    hop_limit: int = 0  # 0: the program's default (ICE_DEFAULT_HOP_LIMIT)
    int_kinds: tuple[int, ...] | None = None  # PATH_KIND_* with INT; None: all unless "ecmp"
    feedback_every_n: int = 1  # last hop returns feedback every Nth packet of a flow (0: never)
    # first leaf: INT records on 1 in N packets of a flow (a power of two; IntSampling) and on
    # any packet of a flow that has gone int_sample_max_gap_us without one (0: no floor)
    int_sample_every_n: int = 1
    int_sample_max_gap_us: int = 0
    report_enabled: bool = True
    report_every_n: int = 1  # sample 1 in N packets to the controller (0: no sampling)
    report_qdepth_threshold: int = 0  # always report above this queue depth (0: no alarm)
    ecn_kmin: int = 5  # packets
    ecn_kmax: int = 20
    ecn_pmax_mask: int = 0
    cpu_port: int = n.CPU_PORT
    # Nanoseconds per tick of the switches' ingress clock, in which the flowlet timeout and the
    # INT sampling gap are written (their P4 parameters say _us): 1000 for the v1model program,
    # TOFINO_INGRESS_CLOCK_NS for the TNA one.
    switch_clock_ns: int = 1000
    # Bytes the last-hop clone sessions keep (0: the whole packet).  The v1model program cuts
    # the copy itself (truncate); TNA has no truncate, so on Tofino the mirror session must
    # (see p4src/tna/control/feedback.p4 and TOFINO_CLONE_PACKET_LENGTH).
    clone_packet_length: int = 0
    # The last hop's feedback copies leave at the feedback priority as their clone sessions'
    # class of service, not behind the data on their first port: only where the target honours
    # it (fabric_targets.for_target), so off by default
    feedback_class_of_service: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FabricError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        # raises FabricError when it is not valid
        IntSampling(self.int_sample_every_n, self.int_sample_max_gap_us)
        if not 1 <= self.switch_clock_ns <= 1_000_000:
            raise FabricError(
                f"switch clock: expected 1..1000000 ns per tick, got {self.switch_clock_ns}"
            )
        if not 0 <= self.ecn_kmin <= self.ecn_kmax:
            raise FabricError(
                f"ecn: expected 0 <= kmin <= kmax, got kmin={self.ecn_kmin} kmax={self.ecn_kmax}"
            )
        for name in (
            "flowlet_timeout_us",
            "feedback_every_n",
            "report_every_n",
            "hop_limit",
            "clone_packet_length",
        ):
            if getattr(self, name) < 0:
                raise FabricError(f"{name}: expected >= 0, got {getattr(self, name)}")

    def int_path_kinds(self) -> tuple[int, ...]:
        """The path kinds that carry INT records under these options."""
        if self.int_kinds is not None:
            return tuple(self.int_kinds)
        return () if self.mode == "ecmp" else ALL_PATH_KINDS


@dataclass(slots=True, frozen=True, kw_only=True)
class TagMap:
    """Fabric-wide path tags: (source leaf, destination leaf, candidate index) <-> tag."""

    tags: Mapping[tuple[str, str, int], int]
    paths: Mapping[int, FabricPath]

    def tag(self, src_leaf: str, dst_leaf: str, index: int) -> int:
        """The tag of candidate ``index`` from ``src_leaf`` to ``dst_leaf``."""
        try:
            return self.tags[(src_leaf, dst_leaf, index)]
        except KeyError:
            raise FabricError(f"no candidate path {index} from {src_leaf} to {dst_leaf}") from None

    def path(self, tag: int) -> FabricPath:
        """The candidate path a tag names."""
        try:
            return self.paths[tag]
        except KeyError:
            raise FabricError(f"no path has tag {tag}") from None


def allocate_tags(topo: Topology) -> TagMap:
    """Number every candidate path of every ordered leaf pair from 1, in a stable order."""
    tags: dict[tuple[str, str, int], int] = {}
    paths: dict[int, FabricPath] = {}
    nxt = 1
    for src, dst in topo.leaf_pairs():
        for path in topo.candidate_paths(src, dst, include_failed=True):
            if nxt > MAX_TAG:
                raise FabricError(
                    f"topology {topo.spec.name!r}: more than {MAX_TAG} candidate paths between "
                    "leaves; the 16-bit path tag cannot name them all"
                )
            tags[(src, dst, path.index)] = nxt
            paths[nxt] = path
            nxt += 1
    return TagMap(tags=tags, paths=paths)


def switch_mac(switch_id: int) -> str:
    """The router MAC of a switch: locally administered, 02:1c:e0 + the 24-bit switch id."""
    if not 0 <= switch_id < 1 << 24:
        raise FabricError(f"switch id {switch_id} does not fit the 24 bits of the router MAC")
    return "02:1c:e0:" + ":".join(f"{(switch_id >> s) & 0xFF:02x}" for s in (16, 8, 0))


def leaf_ids(topo: Topology) -> dict[str, int]:
    """Leaf id (the dst_leaf action parameter) of every leaf: 1-based in topology order."""
    return {leaf: i + 1 for i, leaf in enumerate(topo.leaves)}


def leaf_prefixes(topo: Topology) -> dict[str, list[ipaddress.IPv4Network]]:
    """The prefixes that reach each leaf's hosts: the hosts' common subnet when it holds no
    other leaf's host, otherwise one /32 per host."""
    by_leaf: dict[str, list[ipaddress.IPv4Interface]] = {leaf: [] for leaf in topo.leaves}
    for h in topo.spec.hosts:
        by_leaf[h.leaf].append(ipaddress.IPv4Interface(h.ip))
    owner = {iface.ip: leaf for leaf, ifs in by_leaf.items() for iface in ifs}
    out: dict[str, list[ipaddress.IPv4Network]] = {}
    for leaf, ifaces in by_leaf.items():
        nets = {i.network for i in ifaces}
        if len(nets) == 1:
            net = next(iter(nets))
            if all(owner[ip] == leaf for ip in owner if ip in net):
                out[leaf] = [net]
                continue
        out[leaf] = [ipaddress.IPv4Network(f"{i.ip}/32") for i in ifaces]
    return out


def _fabric_neighbours(topo: Topology) -> dict[str, list[tuple[int, str, int]]]:
    """Per switch: (out port, neighbour, neighbour's port) over live fabric links, by port."""
    adj: dict[str, list[tuple[int, str, int]]] = {s.name: [] for s in topo.spec.switches}
    for ln in topo.links:
        if ln.kind == "fabric" and not topo.failed[ln.id]:
            adj[ln.src].append((ln.src_port, ln.dst, ln.dst_port))
    for lst in adj.values():
        lst.sort()
    return adj


def next_hops(topo: Topology) -> dict[str, dict[str, tuple[int, str]]]:
    """{destination leaf: {switch: (out port, neighbour)}} along shortest live paths.

    Among equal next hops a switch takes number (leaf id mod count), so the routes towards
    different leaves spread over the uplinks.
    """
    adj = _fabric_neighbours(topo)
    ids = leaf_ids(topo)
    out: dict[str, dict[str, tuple[int, str]]] = {}
    for leaf in topo.leaves:
        dist = {leaf: 0}
        queue = deque([leaf])
        while queue:
            u = queue.popleft()
            for _, v, _ in adj[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        hops: dict[str, tuple[int, str]] = {}
        for sw, d in dist.items():
            if sw == leaf:
                continue
            options = [(p, v) for p, v, _ in adj[sw] if dist.get(v) == d - 1]
            hops[sw] = options[ids[leaf] % len(options)]
        out[leaf] = hops
    return out


def _default(table: str, action: str, **params: int | str) -> TableEntry:
    return TableEntry(table=table, action=action, params=params, is_default_action=True)


def mode_entries(topo: Topology, options: FabricOptions) -> dict[str, list[Entity]]:
    """Only the entries a mode change rewrites: lb_config, int_policy and int_sampling of
    every leaf."""
    out: dict[str, list[Entity]] = {}
    kinds = set(options.int_path_kinds())
    for leaf in topo.leaves:
        out[leaf] = [
            _default(
                n.TABLE_LB_CONFIG,
                n.ACTION_SET_LB_CONFIG,
                mode=MODES[options.mode],
                use_qp_in_hash=int(options.use_qp_in_hash),
                flowlet_timeout_us=to_switch_clock(
                    options.flowlet_timeout_us, options.switch_clock_ns
                ),
            ),
            *(
                TableEntry(
                    table=n.TABLE_INT_POLICY,
                    match={"path_kind": kind},
                    action=n.ACTION_ENABLE_INT if kind in kinds else n.ACTION_DISABLE_INT,
                )
                for kind in ALL_PATH_KINDS
            ),
            IntSampling(options.int_sample_every_n, options.int_sample_max_gap_us).entry(
                options.switch_clock_ns
            ),
        ]
    return out


def queue_priorities(queues: int) -> tuple[int, int] | None:
    """(control, feedback) egress priorities for switches with ``queues`` queues per port:
    probes and packet-outs on top, transit feedback just below; None with a single queue
    (nothing may be raised: simple_switch drops a priority >= its number of queues)."""
    if queues <= 1:
        return None
    return queues - 1, max(queues - 2, 0)


def base_entries(
    topo: Topology, options: FabricOptions | None = None, tags: TagMap | None = None
) -> dict[str, list[Entity]]:
    """Every switch's base-forwarding entities (no planned flows), as data."""
    opts = options if options is not None else FabricOptions()
    tagmap = tags if tags is not None else allocate_tags(topo)
    spec = topo.spec
    macs = {s.name: switch_mac(s.switch_id) for s in spec.switches}
    hops = next_hops(topo)
    prefixes = leaf_prefixes(topo)
    ids = leaf_ids(topo)
    modes = mode_entries(topo, opts)
    out: dict[str, list[Entity]] = {s.name: [] for s in spec.switches}

    for s in spec.switches:
        ents = out[s.name]
        is_leaf = s.tier == 0
        ents.append(
            _default(
                n.TABLE_SWITCH_CONFIG,
                n.ACTION_SET_SWITCH_CONFIG,
                switch_id=s.switch_id,
                role=n.SWITCH_ROLE_LEAF if is_leaf else n.SWITCH_ROLE_SPINE,
                hop_limit=opts.hop_limit,
            )
        )
        ents.append(
            _default(
                n.TABLE_ECN_CONFIG,
                n.ACTION_SET_ECN_THRESHOLDS,
                kmin=opts.ecn_kmin,
                kmax=opts.ecn_kmax,
                pmax_mask=opts.ecn_pmax_mask,
            )
        )
        ents.extend(modes.get(s.name, ()))
        prios = queue_priorities(spec.defaults.priority_queues)
        if prios is not None:
            control, feedback = prios
            ents.append(
                _default(
                    n.TABLE_QUEUE_CONFIG,
                    n.ACTION_SET_QUEUE_PRIORITIES,
                    control_prio=control,
                    feedback_prio=feedback,
                )
            )

    # ports: kinds and link rates
    for ln in topo.links:
        if ln.kind == "host-up":
            continue  # the leaf's side of a host link is the host-down link's source
        kind = n.PORT_KIND_FABRIC if ln.kind == "fabric" else n.PORT_KIND_HOST
        out[ln.src].append(
            TableEntry(
                table=n.TABLE_PORT_KIND,
                match={"ingress_port": ln.src_port},
                action=n.ACTION_SET_PORT_KIND,
                params={"kind": kind},
            )
        )
        out[ln.src].append(
            TableEntry(
                table=n.TABLE_EGRESS_PORT_INFO,
                match={"port": ln.src_port},
                action=n.ACTION_SET_LINK_RATE,
                params={"rate_mbps": round(ln.rate_gbps * 1000)},
            )
        )

    # IPv4 routes and ARP answers
    for h in spec.hosts:
        out[h.leaf].append(
            TableEntry(
                table=n.TABLE_IPV4_ROUTE,
                match={"dst_addr": LPM(h.address, 32)},
                action=n.ACTION_ROUTE_TO_PORT,
                params={"port": h.port, "src_mac": macs[h.leaf], "dst_mac": h.mac},
            )
        )
    for dst_leaf, per_switch in hops.items():
        for sw, (port, neigh) in sorted(per_switch.items()):
            for net in prefixes[dst_leaf]:
                out[sw].append(
                    TableEntry(
                        table=n.TABLE_IPV4_ROUTE,
                        match={"dst_addr": LPM(str(net.network_address), net.prefixlen)},
                        action=n.ACTION_ROUTE_TO_PORT,
                        params={"port": port, "src_mac": macs[sw], "dst_mac": macs[neigh]},
                    )
                )
    for leaf in topo.leaves:
        for h in spec.hosts:
            out[leaf].append(
                TableEntry(
                    table=n.TABLE_ARP_REPLY,
                    match={"target_ip": h.address},
                    action=n.ACTION_REPLY_ARP,
                    params={"mac": macs[leaf]},
                )
            )

    _tag_entries(topo, tagmap, out)
    _candidate_entries(topo, tagmap, prefixes, ids, out)
    _telemetry_entries(topo, opts, macs, out)
    _check_sizes(out)
    return out


def _tag_entries(topo: Topology, tagmap: TagMap, out: dict[str, list[Entity]]) -> None:
    for tag, path in sorted(tagmap.paths.items()):
        for hop in path.hops:
            if hop.switch == path.dst_leaf:
                entry = TableEntry(
                    table=n.TABLE_TAG_FORWARD, match={"path_tag": tag}, action=n.ACTION_END_PATH
                )
            else:
                entry = TableEntry(
                    table=n.TABLE_TAG_FORWARD,
                    match={"path_tag": tag},
                    action=n.ACTION_FORWARD_BY_TAG,
                    params={"port": hop.out_port},
                )
            out[hop.switch].append(entry)


def live_tags(topo: Topology, tagmap: TagMap, src_leaf: str, dst_leaf: str) -> list[int]:
    """Tags of the live candidate paths from src_leaf to dst_leaf, by candidate index."""
    _, idx = topo.live_candidates(src_leaf, dst_leaf)
    return [tagmap.tag(src_leaf, dst_leaf, int(i)) for i in idx.tolist()]


def path_weight(topo: Topology, path: FabricPath) -> float:
    """A candidate's weight in its group: its bottleneck link rate (Gbit/s)."""
    return min((topo.links[lid].rate_gbps for lid in path.links), default=1.0)


def bucket_tags(tags: Sequence[int], weights: Sequence[float], buckets: int) -> list[int]:
    """The tag of every bucket: smooth weighted round robin, so each tag gets buckets in
    proportion to its weight, spread out (equal weights: t1, t2, t1, t2, ...)."""
    if not tags or len(tags) != len(weights) or any(w <= 0 for w in weights):
        raise FabricError(f"bucket_tags: need tags with positive weights, got {tags} {weights}")
    total = float(sum(weights))
    current = [0.0] * len(tags)
    out = []
    for _ in range(buckets):
        for i, w in enumerate(weights):
            current[i] += w
        pick = max(range(len(tags)), key=lambda i: (current[i], -i))
        current[pick] -= total
        out.append(tags[pick])
    return out


def _candidate_entries(
    topo: Topology,
    tagmap: TagMap,
    prefixes: Mapping[str, list[ipaddress.IPv4Network]],
    ids: Mapping[str, int],
    out: dict[str, list[Entity]],
) -> None:
    for src in topo.leaves:
        for dst in topo.leaves:
            if src == dst:
                continue
            for net in prefixes[dst]:
                out[src].append(
                    TableEntry(
                        table=n.TABLE_DST_LEAF,
                        match={"dst_addr": LPM(str(net.network_address), net.prefixlen)},
                        action=n.ACTION_SET_DST_LEAF,
                        params={"leaf_id": ids[dst]},
                    )
                )
            group = live_tags(topo, tagmap, src, dst)
            if not group:
                log.warning("no live candidate path from %s to %s", src, dst)
                continue
            weights = [path_weight(topo, tagmap.path(t)) for t in group]
            for bucket, tag in enumerate(bucket_tags(group, weights, n.PATH_BUCKETS)):
                out[src].append(
                    TableEntry(
                        table=n.TABLE_PATH_CANDIDATE,
                        match={"leaf_id": ids[dst], "bucket": bucket},
                        action=n.ACTION_SET_CANDIDATE_PATH,
                        params={"path_tag": tag},
                    )
                )


def _telemetry_entries(
    topo: Topology, opts: FabricOptions, macs: Mapping[str, str], out: dict[str, list[Entity]]
) -> None:
    adj = _fabric_neighbours(topo)
    prios = queue_priorities(topo.spec.defaults.priority_queues)
    # the feedback copies' queue on their first port (FabricOptions.feedback_class_of_service)
    cos = prios[1] if prios is not None and opts.feedback_class_of_service else 0
    for s in topo.spec.switches:
        ents = out[s.name]
        ents.append(
            _default(
                n.TABLE_TELEMETRY_CONFIG,
                n.ACTION_SET_TELEMETRY_CONFIG,
                feedback_every_n=opts.feedback_every_n,
                report_enabled=int(opts.report_enabled),
            )
        )
        ents.append(
            _default(
                n.TABLE_REPORT_CONFIG,
                n.ACTION_SET_REPORT_CONFIG,
                report_every_n=opts.report_every_n,
                qdepth_threshold=opts.report_qdepth_threshold,
            )
        )
        if s.tier != 0:
            continue
        # The feedback copy leaves by the first live uplink and is routed back as plain IPv4.
        up = [(p, v) for p, v, _ in adj[s.name] if topo.graph.nodes[v]["tier"] > s.tier]
        report = [Replica(opts.cpu_port)]
        if up:
            port, neigh = up[0]
            ents.append(
                _default(
                    n.TABLE_FEEDBACK_CONFIG,
                    n.ACTION_SET_FEEDBACK_CONFIG,
                    src_mac=macs[s.name],
                    dst_mac=macs[neigh],
                )
            )
            ents.append(
                CloneSessionEntry(
                    session_id=n.ICE_SESSION_FEEDBACK,
                    replicas=[port],
                    packet_length_bytes=opts.clone_packet_length,
                    class_of_service=cos,
                )
            )
            ents.append(
                CloneSessionEntry(
                    session_id=n.ICE_SESSION_FEEDBACK_REPORT,
                    replicas=[Replica(port), *report],
                    packet_length_bytes=opts.clone_packet_length,
                    class_of_service=cos,
                )
            )
        ents.append(
            CloneSessionEntry(
                session_id=n.ICE_SESSION_REPORT,
                replicas=report,
                packet_length_bytes=opts.clone_packet_length,
            )
        )


def _check_sizes(out: Mapping[str, Iterable[Entity]]) -> None:
    for sw, ents in out.items():
        tags = sum(1 for e in ents if isinstance(e, TableEntry) and e.table == n.TABLE_TAG_FORWARD)
        if tags > n.TAG_FORWARD_TABLE_SIZE:
            raise FabricError(
                f"{sw}: {tags} tag_forward entries exceed the table size "
                f"{n.TAG_FORWARD_TABLE_SIZE} (p4src/common/sizes.p4)"
            )


def entity_key(e: Entity) -> tuple[object, ...]:
    """The identity of an entity on a switch (what INSERT/MODIFY/DELETE address)."""
    if isinstance(e, TableEntry):
        return ("table", e.table, tuple(sorted(e.match.items())), e.priority, e.is_default_action)
    if isinstance(e, CloneSessionEntry):
        return ("clone", e.session_id)
    return (type(e).__name__, repr(e))


def count_by_table(entities: Iterable[Entity]) -> dict[str, int]:
    """How many entities of each table (clone sessions under "clone_session")."""
    counts: dict[str, int] = {}
    for e in entities:
        key = e.table if isinstance(e, TableEntry) else "clone_session"
        counts[key] = counts.get(key, 0) + 1
    return counts
