"""Base forwarding as data: the entries fabric.base_entries computes, checked by walking them."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from icefabric.control import fabric, fabric_targets
from icefabric.control.p4rt import LPM, CloneSessionEntry, Entity, TableEntry
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n
from icefabric.topo.generators import fat_tree, leaf_spine
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"


def _topo() -> Topology:
    return Topology(load_topology(EXAMPLE))


def _table(ents: Sequence[Entity], table: str) -> list[TableEntry]:
    return [e for e in ents if isinstance(e, TableEntry) and e.table == table]


def _lpm_lookup(entries: Sequence[TableEntry], addr: str) -> TableEntry | None:
    ip = ipaddress.IPv4Address(addr)
    best: tuple[int, TableEntry] | None = None
    for e in entries:
        m = e.match["dst_addr"]
        assert isinstance(m, LPM)
        net = ipaddress.IPv4Network(f"{m.value}/{m.prefix_len}")
        if ip in net and (best is None or m.prefix_len > best[0]):
            best = (m.prefix_len, e)
    return best[1] if best else None


def _peer(topo: Topology, switch: str, port: int) -> tuple[str, int]:
    ln = topo.links[topo.link_at(switch, port)]
    return ln.dst, ln.dst_port


def _default(ents: Sequence[Entity], table: str) -> TableEntry:
    (d,) = [e for e in _table(ents, table) if e.is_default_action]
    return d


def test_every_switch_gets_role_and_every_port_a_kind() -> None:
    topo = _topo()
    out = fabric.base_entries(topo)
    assert set(out) == {s.name for s in topo.spec.switches}
    for s in topo.spec.switches:
        cfg = _default(out[s.name], n.TABLE_SWITCH_CONFIG)
        role = n.SWITCH_ROLE_LEAF if s.role == "leaf" else n.SWITCH_ROLE_SPINE
        assert cfg.params["role"] == role and cfg.params["switch_id"] == s.switch_id
        kinds = {
            e.match["ingress_port"]: e.params["kind"]
            for e in _table(out[s.name], n.TABLE_PORT_KIND)
        }
        want = {h.port: n.PORT_KIND_HOST for h in topo.spec.hosts if h.leaf == s.name}
        for ln in topo.spec.links:
            for ep in (ln.a, ln.b):
                if ep.node == s.name:
                    want[ep.port] = n.PORT_KIND_FABRIC
        assert kinds == want


@pytest.mark.parametrize(
    "spec",
    [
        load_topology(EXAMPLE),
        leaf_spine(leaves=3, spines=3, hosts_per_leaf=2),
        fat_tree(4),
    ],
    ids=["example-2x4", "leaf-spine-3x3", "fat-tree-4"],
)
def test_ipv4_routes_reach_every_host_from_every_switch(spec: object) -> None:
    topo = Topology(spec)  # type: ignore[arg-type]
    out = fabric.base_entries(topo)
    macs = {s.name: fabric.switch_mac(s.switch_id) for s in topo.spec.switches}
    for h in topo.spec.hosts:
        for start in topo.spec.switches:
            sw, hops = start.name, 0
            while True:
                e = _lpm_lookup(_table(out[sw], n.TABLE_IPV4_ROUTE), h.address)
                assert e is not None, f"{sw}: no route to {h.address}"
                assert e.params["src_mac"] == macs[sw]
                port = int(e.params["port"])
                if sw == h.leaf and port == h.port:
                    assert e.params["dst_mac"] == h.mac
                    break
                nxt, _ = _peer(topo, sw, port)
                assert e.params["dst_mac"] == macs[nxt]
                sw, hops = nxt, hops + 1
                assert hops <= 4, f"routing loop towards {h.name} from {start.name}"


def test_every_leaf_answers_arp_for_every_host_with_its_router_mac() -> None:
    topo = _topo()
    out = fabric.base_entries(topo)
    for leaf in topo.leaves:
        answers = {
            e.match["target_ip"]: e.params["mac"] for e in _table(out[leaf], n.TABLE_ARP_REPLY)
        }
        mac = fabric.switch_mac(topo.spec.switch(leaf).switch_id)
        assert answers == {h.address: mac for h in topo.spec.hosts}
    assert not _table(out["spine1"], n.TABLE_ARP_REPLY)


def test_tags_are_unique_and_every_tag_path_walks_to_its_destination_leaf() -> None:
    topo = _topo()
    tags = fabric.allocate_tags(topo)
    assert len(set(tags.tags.values())) == len(tags.tags) == 4 * 3 * 2
    out = fabric.base_entries(topo, tags=tags)
    fwd = {
        sw: {e.match["path_tag"]: e for e in _table(ents, n.TABLE_TAG_FORWARD)}
        for sw, ents in out.items()
    }
    for (src, dst, _idx), tag in tags.tags.items():
        sw, visited = src, [src]
        while True:
            e = fwd[sw][tag]
            if e.action == n.ACTION_END_PATH:
                break
            assert e.action == n.ACTION_FORWARD_BY_TAG
            sw, _ = _peer(topo, sw, int(e.params["port"]))
            visited.append(sw)
        assert sw == dst
        assert tuple(visited) == tuple(h.switch for h in tags.path(tag).hops)


def test_tags_stay_stable_when_a_link_fails_and_groups_avoid_it() -> None:
    topo = _topo()
    before = fabric.allocate_tags(topo)
    dead = topo.links_between("leaf1", "spine1")[0]
    topo.fail_link(dead)
    after = fabric.allocate_tags(topo)
    assert before.tags == after.tags
    out = fabric.base_entries(topo, tags=after)
    ids = fabric.leaf_ids(topo)
    for src in topo.leaves:
        groups: dict[int, set[int]] = {}
        for e in _table(out[src], n.TABLE_PATH_CANDIDATE):
            groups.setdefault(int(e.match["leaf_id"]), set()).add(int(e.params["path_tag"]))
        buckets = _table(out[src], n.TABLE_PATH_CANDIDATE)
        assert len(buckets) == (len(topo.leaves) - 1) * n.PATH_BUCKETS
        for dst in topo.leaves:
            if dst == src:
                continue
            for tag in groups[ids[dst]]:
                path = after.path(tag)
                assert (path.src_leaf, path.dst_leaf) == (src, dst)
                assert dead not in path.links and (dead ^ 1) not in path.links
    # leaf1 lost one of its two uplinks: one candidate left per destination
    assert all(len(g) == 1 for g in _groups(out["leaf1"]).values())
    g3 = _groups(out["leaf3"])
    assert len(g3[ids["leaf1"]]) == 1  # spine1 -> leaf1 is the dead link's other direction
    assert len(g3[ids["leaf2"]]) == len(g3[ids["leaf4"]]) == 2


def _groups(ents: Sequence[Entity]) -> Mapping[int, set[int]]:
    groups: dict[int, set[int]] = {}
    for e in _table(ents, n.TABLE_PATH_CANDIDATE):
        groups.setdefault(int(e.match["leaf_id"]), set()).add(int(e.params["path_tag"]))
    return groups


def test_dst_leaf_covers_remote_hosts_only() -> None:
    topo = _topo()
    out = fabric.base_entries(topo)
    ids = fabric.leaf_ids(topo)
    for leaf in topo.leaves:
        entries = _table(out[leaf], n.TABLE_DST_LEAF)
        for h in topo.spec.hosts:
            e = _lpm_lookup(entries, h.address)
            if h.leaf == leaf:
                assert e is None
            else:
                assert e is not None and e.params["leaf_id"] == ids[h.leaf]


def test_modes_and_int_policy() -> None:
    topo = _topo()
    ice = fabric.base_entries(topo, fabric.FabricOptions(mode="ice"))
    ecmp = fabric.base_entries(topo, fabric.FabricOptions(mode="ecmp"))
    for out, mode, int_action in (
        (ice, n.LB_MODE_PLANNED_FLOWLET, n.ACTION_ENABLE_INT),
        (ecmp, n.LB_MODE_ECMP, n.ACTION_DISABLE_INT),
    ):
        lb = _default(out["leaf1"], n.TABLE_LB_CONFIG)
        assert lb.params["mode"] == mode
        policy = _table(out["leaf1"], n.TABLE_INT_POLICY)
        assert {int(e.match["path_kind"]) for e in policy} == set(fabric.ALL_PATH_KINDS)
        assert {e.action for e in policy} == {int_action}
    assert not _table(ice["spine1"], n.TABLE_LB_CONFIG)
    only = fabric.mode_entries(topo, fabric.FabricOptions(mode="planned-ecmp"))
    assert set(only) == set(topo.leaves)
    assert _default(only["leaf2"], n.TABLE_LB_CONFIG).params["mode"] == n.LB_MODE_PLANNED_ECMP


def test_flowlet_timeout_and_sampling_gap_are_written_in_the_switch_clock() -> None:
    # v1model counts microseconds; the TNA program's ingress clock ticks every 1,024 ns, so the
    # same 100 us timeout is 98 of its ticks (not 100, which would be 102.4 us).
    topo = _topo()
    for clock_ns, timeout, gap in (
        (1000, 100, 250),
        (fabric_targets.TOFINO_INGRESS_CLOCK_NS, 98, 244),
    ):
        opts = fabric.FabricOptions(
            mode="ice", flowlet_timeout_us=100, int_sample_max_gap_us=250, switch_clock_ns=clock_ns
        )
        out = fabric.mode_entries(topo, opts)
        assert _default(out["leaf1"], n.TABLE_LB_CONFIG).params["flowlet_timeout_us"] == timeout
        assert _default(out["leaf1"], n.TABLE_INT_SAMPLING).params["max_gap_us"] == gap
    assert fabric.to_switch_clock(0, 1024) == 0  # 0 keeps its meaning (never / no floor)
    assert fabric.to_switch_clock(1, 1_000_000) == 1  # a non-zero time stays non-zero
    assert fabric.to_switch_clock(1024, 1024) == 1000
    with pytest.raises(fabric.FabricError, match="switch clock"):
        fabric.FabricOptions(switch_clock_ns=0)


def test_clone_sessions_and_feedback_use_a_live_uplink_and_the_cpu_port() -> None:
    topo = _topo()
    out = fabric.base_entries(topo)
    sessions = {e.session_id: e for e in out["leaf1"] if isinstance(e, CloneSessionEntry)}
    assert set(sessions) == {
        n.ICE_SESSION_FEEDBACK,
        n.ICE_SESSION_FEEDBACK_REPORT,
        n.ICE_SESSION_REPORT,
    }
    up = sessions[n.ICE_SESSION_FEEDBACK].replicas[0].port
    assert _peer(topo, "leaf1", up)[0].startswith("spine")
    assert [r.port for r in sessions[n.ICE_SESSION_FEEDBACK_REPORT].replicas] == [up, n.CPU_PORT]
    assert [r.port for r in sessions[n.ICE_SESSION_REPORT].replicas] == [n.CPU_PORT]
    fb = _default(out["leaf1"], n.TABLE_FEEDBACK_CONFIG)
    peer = _peer(topo, "leaf1", up)[0]
    assert fb.params["dst_mac"] == fabric.switch_mac(topo.spec.switch(peer).switch_id)
    topo.fail_link(topo.link_at("leaf1", up))
    out2 = fabric.base_entries(topo)
    fb2 = {e.session_id: e for e in out2["leaf1"] if isinstance(e, CloneSessionEntry)}
    assert fb2[n.ICE_SESSION_FEEDBACK].replicas[0].port != up


@pytest.mark.parametrize("queues", [1, 4, 8])
def test_feedback_sessions_carry_the_feedback_priority_only_where_asked(queues: int) -> None:
    """FabricOptions.feedback_class_of_service: the feedback sessions' copies leave at the
    feedback priority (the report-only session stays at 0); off by default (PI-based targets
    refuse a class of service) and with one queue (nothing may be raised)."""
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, priority_queues=queues)
    prios = fabric.queue_priorities(queues)
    for on in (False, True):
        out = fabric.base_entries(
            Topology(spec), fabric.FabricOptions(feedback_class_of_service=on)
        )
        cos = {e.session_id: e.class_of_service for e in out["leaf1"]
               if isinstance(e, CloneSessionEntry)}  # fmt: skip
        want = prios[1] if on and prios is not None else 0
        assert cos == {
            n.ICE_SESSION_FEEDBACK: want,
            n.ICE_SESSION_FEEDBACK_REPORT: want,
            n.ICE_SESSION_REPORT: 0,
        }
    assert (queues, fabric.queue_priorities(queues)) in {(1, None), (4, (3, 2)), (8, (7, 6))}


def test_for_target_sets_what_each_target_needs() -> None:
    base = fabric.FabricOptions(mode="ecmp")
    emb = fabric_targets.for_target(base, "embedded")
    assert emb.feedback_class_of_service and emb.mode == "ecmp"
    assert emb.switch_clock_ns == base.switch_clock_ns
    bm = fabric_targets.for_target(emb, "bmv2")
    assert not bm.feedback_class_of_service and bm.ecn_kmin == base.ecn_kmin
    tof = fabric_targets.for_target(base, "tofino")
    assert not tof.feedback_class_of_service
    assert tof.switch_clock_ns == fabric_targets.TOFINO_INGRESS_CLOCK_NS
    with pytest.raises(ValueError, match="target: expected one of embedded, bmv2, tofino"):
        fabric_targets.for_target(base, "p4sim")


def test_egress_settings_link_rates_and_ecn() -> None:
    topo = _topo()
    opts = fabric.FabricOptions(ecn_kmin=3, ecn_kmax=9, ecn_pmax_mask=1)
    out = fabric.base_entries(topo, opts)
    rates = {
        e.match["port"]: e.params["rate_mbps"]
        for e in _table(out["leaf1"], n.TABLE_EGRESS_PORT_INFO)
    }
    assert rates == {1: 100_000, 2: 100_000, 3: 100_000, 4: 100_000}
    ecn = _default(out["spine2"], n.TABLE_ECN_CONFIG)
    assert dict(ecn.params) == {"kmin": 3, "kmax": 9, "pmax_mask": 1}


def test_option_and_size_errors_name_the_problem() -> None:
    with pytest.raises(fabric.FabricError, match="mode"):
        fabric.FabricOptions(mode="fast")
    with pytest.raises(fabric.FabricError, match="kmin <= kmax"):
        fabric.FabricOptions(ecn_kmin=10, ecn_kmax=2)
    with pytest.raises(fabric.FabricError, match="24 bits"):
        fabric.switch_mac(1 << 24)


def test_leaf_prefixes_aggregate_only_when_the_subnet_is_the_leafs_alone() -> None:
    topo = _topo()
    pref = fabric.leaf_prefixes(topo)
    assert pref["leaf1"] == [ipaddress.IPv4Network("10.0.1.0/24")]
    # the 2x2 example gives each leaf its own /24 too; a shared subnet falls back to /32s
    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1)
    data = spec.to_dict()
    data["hosts"][1]["ip"] = "10.0.1.9/24"
    from icefabric.topo.spec import parse_topology

    shared = Topology(parse_topology(data))
    pref2 = fabric.leaf_prefixes(shared)
    assert pref2["leaf1"] == [ipaddress.IPv4Network("10.0.1.1/32")]
    assert pref2["leaf2"] == [ipaddress.IPv4Network("10.0.1.9/32")]


def test_entity_key_and_count_by_table() -> None:
    a = TableEntry(table="t", match={"k": 1}, action="x", params={"p": 1})
    b = TableEntry(table="t", match={"k": 1}, action="x", params={"p": 2})
    assert fabric.entity_key(a) == fabric.entity_key(b)
    assert fabric.count_by_table([a, b, CloneSessionEntry(session_id=3)]) == {
        "t": 2,
        "clone_session": 1,
    }


def test_bucket_weights_follow_bottleneck_rates() -> None:
    assert fabric.bucket_tags([7, 9], [1.0, 1.0], 6) == [7, 9, 7, 9, 7, 9]
    three = fabric.bucket_tags([1, 2], [300.0, 100.0], 64)
    assert three.count(1) == 48 and three.count(2) == 16
    with pytest.raises(fabric.FabricError):
        fabric.bucket_tags([1], [0.0], 4)
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, uplink_rate_gbps=100)
    data = spec.to_dict()
    for ln in data["links"]:
        if ln["b"]["node"] == "spine1":
            ln["rate_gbps"] = 300.0
    from icefabric.topo.spec import parse_topology

    topo = Topology(parse_topology(data))
    out = fabric.base_entries(topo)
    tags = [int(e.params["path_tag"]) for e in _table(out["leaf1"], n.TABLE_PATH_CANDIDATE)]
    via = {t: fabric.allocate_tags(topo).path(t).hops[1].switch for t in set(tags)}
    assert sum(1 for t in tags if via[t] == "spine1") == 48


def test_int_sampling_is_a_validated_power_of_two_written_on_every_leaf() -> None:
    entry = fabric.IntSampling(8).entry()
    assert entry.table == n.TABLE_INT_SAMPLING and entry.is_default_action
    assert entry.action == n.ACTION_SET_INT_SAMPLING
    assert entry.params == {"psn_mask": 7, "max_gap_us": 0}
    # every packet, no time floor
    assert fabric.IntSampling().entry().params == {"psn_mask": 0, "max_gap_us": 0}
    assert fabric.IntSampling(32, 9413).entry().params == {"psn_mask": 31, "max_gap_us": 9413}
    for bad in (0, 3, 12, -4, 1 << 24, True):
        with pytest.raises(fabric.FabricError, match="int sampling"):
            fabric.IntSampling(bad)
    for gap in (-1, 2**31, 1.5, True):
        with pytest.raises(fabric.FabricError, match="max gap"):
            fabric.IntSampling(8, gap)  # type: ignore[arg-type]
    with pytest.raises(fabric.FabricError, match="power of two"):
        fabric.FabricOptions(int_sample_every_n=6)
    topo = Topology(load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"))
    opts = fabric.FabricOptions(int_sample_every_n=16, int_sample_max_gap_us=500)
    out = fabric.base_entries(topo, opts)
    for leaf in topo.leaves:
        (sampling,) = _table(out[leaf], n.TABLE_INT_SAMPLING)
        assert sampling.params == {"psn_mask": 15, "max_gap_us": 500}


def test_spray_mode_sets_lb_mode_3_and_int_on_sprayed_packets() -> None:
    topo = Topology(load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"))
    out = fabric.mode_entries(topo, fabric.FabricOptions(mode="spray"))
    for leaf in topo.leaves:
        (lb,) = _table(out[leaf], n.TABLE_LB_CONFIG)
        assert lb.params["mode"] == n.LB_MODE_SPRAY == 3
        policy = {
            int(e.match["path_kind"]): e.action for e in _table(out[leaf], n.TABLE_INT_POLICY)
        }
        assert policy[n.PATH_KIND_SPRAY] == n.ACTION_ENABLE_INT
