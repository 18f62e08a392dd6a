"""A two-leaf, two-spine test fabric programmed the way the ICE controller programs one.

```
      S1 (11)            S2 (12)          spine port 1 -> L1, port 2 -> L2
     /       \\          /      \\
  L1 (1) port 3,4      L2 (2) port 3,4     leaf port 3 -> S1, port 4 -> S2
  h1 port 1, h2 port 2  h3 port 1, h4 port 2
```
Path tags: 0x121 / 0x122 = L1 -> L2 via S1 / S2; 0x211 / 0x212 = L2 -> L1 via S1 / S2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness import PRIORITY_QUEUES, Fabric, make_fabric

from icefabric.control.fabric import IntSampling, bucket_tags, queue_priorities
from icefabric.control.p4rt import LPM, Exact
from icefabric.traffic import packets as P

# ---- P4Runtime names of ice.p4 (p4src/README.md) ---------------------------------------------
T_PORT_KIND = "IceIngress.config.port_kind"
T_SWITCH_CONFIG = "IceIngress.config.switch_config"
T_LB_CONFIG = "IceIngress.config.lb_config"
T_TELEMETRY_CONFIG = "IceIngress.config.telemetry_config"
T_ARP_REPLY = "IceIngress.arp.arp_reply"
T_FLOW_PATH = "IceIngress.path_select.flow_path"
T_DST_LEAF = "IceIngress.path_select.dst_leaf"
T_PATH_CANDIDATE = "IceIngress.path_select.path_candidate"
T_INT_POLICY = "IceIngress.path_select.int_policy"
T_TAG_FORWARD = "IceIngress.tag_switch.tag_forward"
T_IPV4_ROUTE = "IceIngress.routing.ipv4_route"
T_EGRESS_PORT_INFO = "IceEgress.int_telemetry.egress_port_info"
T_ECN_CONFIG = "IceEgress.ecn.ecn_config"
T_FEEDBACK_CONFIG = "IceEgress.feedback.feedback_config"
T_REPORT_CONFIG = "IceEgress.report.report_config"
C_DROP_REASON = "IceIngress.drop_reason_counter"
C_PORT_RX = "IceIngress.port_rx_counter"
C_PORT_TX = "IceEgress.port_tx_counter"

TAG_L1_L2_S1 = 0x121
TAG_L1_L2_S2 = 0x122
TAG_L2_L1_S1 = 0x211
TAG_L2_L1_S2 = 0x212

LEAF_HOST_PORTS = (1, 2)
UPLINK = {"S1": 3, "S2": 4}
SPINE_DOWN = {"L1": 1, "L2": 2}
# An unlinked fabric-kind port on every spine: tests inject fabric traffic (shimmed frames) here.
SPINE_TEST_PORT = 9

SWITCH_IDS = {"L1": 1, "L2": 2, "S1": 11, "S2": 12}
SWITCH_MACS = {
    "L1": "02:aa:00:00:00:01",
    "L2": "02:aa:00:00:00:02",
    "S1": "02:aa:00:00:00:0b",
    "S2": "02:aa:00:00:00:0c",
}
LEAF_IDS = {"L1": 1, "L2": 2}
GATEWAYS = {"L1": "10.0.1.254", "L2": "10.0.2.254"}
SUBNETS = {"L1": "10.0.1.0", "L2": "10.0.2.0"}
LINK_RATE_MBPS = 100_000


@dataclass(frozen=True)
class Host:
    """A server attached to a leaf port."""

    name: str
    leaf: str
    port: int
    ip: str
    mac: str


HOSTS = {
    "h1": Host("h1", "L1", 1, "10.0.1.1", "02:00:00:00:01:01"),
    "h2": Host("h2", "L1", 2, "10.0.1.2", "02:00:00:00:01:02"),
    "h3": Host("h3", "L2", 1, "10.0.2.1", "02:00:00:00:02:01"),
    "h4": Host("h4", "L2", 2, "10.0.2.2", "02:00:00:00:02:02"),
}


@dataclass(frozen=True)
class Options:
    """How the fabric is programmed; defaults are ICE with planned+flowlet and INT on."""

    lb_mode: int = P.LB_MODE_PLANNED_FLOWLET
    use_qp_in_hash: int = 0
    flowlet_timeout_us: int = 100_000
    int_kinds: tuple[int, ...] = (P.PATH_KIND_PLANNED, P.PATH_KIND_FLOWLET, P.PATH_KIND_ECMP)
    feedback_every_n: int = 1
    report_enabled: int = 0
    report_every_n: int = 0
    report_qdepth_threshold: int = 0
    ecn: tuple[int, int, int] | None = None  # (kmin, kmax, pmax_mask) for every port
    s1_buckets: int = 32  # buckets of PATH_BUCKETS that go via S1 (the rest via S2)
    # The two paths' buckets interleaved as the controller lays them out (control.fabric
    # bucket_tags: S1, S2, S1, ...) instead of the first s1_buckets via S1.
    interleaved_buckets: bool = False
    # INT sampling at the first leaf (control.fabric.IntSampling): None leaves the table at its
    # default (every packet of a path kind with INT carries records).
    int_sample_n: int | None = None
    int_sample_max_gap_us: int = 0  # with int_sample_n: and on a flow's first packet after this gap
    hop_limit: int = 0
    # Egress queues per port the switches run with; IceIngress.queue_config is always written
    # for PRIORITY_QUEUES, as the controller does for the spec (fewer: a mismatched switch).
    switch_queues: int = PRIORITY_QUEUES


@dataclass
class LeafSpine:
    """The programmed fabric and helpers to send and receive as hosts."""

    fabric: Fabric
    options: Options
    hosts: dict[str, Host] = field(default_factory=lambda: dict(HOSTS))

    def send(self, host: str, frame: bytes) -> None:
        """`host` sends a frame on its link."""
        h = self.hosts[host]
        self.fabric.send(h.leaf, h.port, frame)

    def received(self, host: str) -> list[bytes]:
        """Frames delivered to `host` since the last call."""
        h = self.hosts[host]
        return self.fabric.received(h.leaf, h.port)

    def roce(self, src: str, dst: str, *, sport: int, qp: int, psn: int = 0, **kw: Any) -> bytes:
        """A RoCEv2 frame from host `src` to host `dst` (sent to src's gateway MAC)."""
        s, d = self.hosts[src], self.hosts[dst]
        pkt = P.rocev2_packet(
            src_mac=s.mac,
            dst_mac=SWITCH_MACS[s.leaf],
            src_ip=s.ip,
            dst_ip=d.ip,
            src_port=sport,
            dst_qp=qp,
            psn=psn,
            **kw,
        )
        return bytes(pkt)

    def close(self) -> None:
        """Tear the fabric down."""
        self.fabric.close()


def _leaf_entries(leaf: str, opts: Options) -> list[Any]:
    from icefabric.control.p4rt import TableEntry

    other = "L2" if leaf == "L1" else "L1"
    mac = SWITCH_MACS[leaf]
    out: list[Any] = []
    out += [
        TableEntry(
            table=T_PORT_KIND,
            match={"ingress_port": p},
            action="IceIngress.config.set_port_kind",
            params={"kind": P.PORT_KIND_HOST},
        )
        for p in LEAF_HOST_PORTS
    ]
    out += [
        TableEntry(
            table=T_PORT_KIND,
            match={"ingress_port": p},
            action="IceIngress.config.set_port_kind",
            params={"kind": P.PORT_KIND_FABRIC},
        )
        for p in UPLINK.values()
    ]
    for h in HOSTS.values():
        if h.leaf == leaf:
            out.append(
                TableEntry(
                    table=T_IPV4_ROUTE,
                    match={"dst_addr": LPM(h.ip, 32)},
                    action="IceIngress.routing.route_to_port",
                    params={"port": h.port, "src_mac": mac, "dst_mac": h.mac},
                )
            )
    out.append(
        TableEntry(
            table=T_IPV4_ROUTE,
            match={"dst_addr": LPM(SUBNETS[other], 24)},
            action="IceIngress.routing.route_to_port",
            params={"port": UPLINK["S1"], "src_mac": mac, "dst_mac": SWITCH_MACS["S1"]},
        )
    )
    out.append(
        TableEntry(
            table=T_ARP_REPLY,
            match={"target_ip": GATEWAYS[leaf]},
            action="IceIngress.arp.reply_arp",
            params={"mac": mac},
        )
    )
    out.append(
        TableEntry(
            table=T_DST_LEAF,
            match={"dst_addr": LPM(SUBNETS[other], 24)},
            action="IceIngress.path_select.set_dst_leaf",
            params={"leaf_id": LEAF_IDS[other]},
        )
    )
    up_s1, up_s2 = (TAG_L1_L2_S1, TAG_L1_L2_S2) if leaf == "L1" else (TAG_L2_L1_S1, TAG_L2_L1_S2)
    in_s1, in_s2 = (TAG_L2_L1_S1, TAG_L2_L1_S2) if leaf == "L1" else (TAG_L1_L2_S1, TAG_L1_L2_S2)
    if opts.interleaved_buckets:
        layout = bucket_tags([up_s1, up_s2], [1.0, 1.0], P.PATH_BUCKETS)
    else:
        layout = [up_s1 if b < opts.s1_buckets else up_s2 for b in range(P.PATH_BUCKETS)]
    for bucket, tag in enumerate(layout):
        out.append(
            TableEntry(
                table=T_PATH_CANDIDATE,
                match={"leaf_id": LEAF_IDS[other], "bucket": bucket},
                action="IceIngress.path_select.set_candidate_path",
                params={"path_tag": tag},
            )
        )
    out += [
        TableEntry(
            table=T_TAG_FORWARD,
            match={"path_tag": up_s1},
            action="IceIngress.tag_switch.forward_by_tag",
            params={"port": UPLINK["S1"]},
        ),
        TableEntry(
            table=T_TAG_FORWARD,
            match={"path_tag": up_s2},
            action="IceIngress.tag_switch.forward_by_tag",
            params={"port": UPLINK["S2"]},
        ),
        TableEntry(
            table=T_TAG_FORWARD, match={"path_tag": in_s1}, action="IceIngress.tag_switch.end_path"
        ),
        TableEntry(
            table=T_TAG_FORWARD, match={"path_tag": in_s2}, action="IceIngress.tag_switch.end_path"
        ),
    ]
    out += [
        TableEntry(
            table=T_INT_POLICY,
            match={"path_kind": kind},
            action="IceIngress.path_select.enable_int",
        )
        for kind in opts.int_kinds
    ]
    return out


def _spine_entries(spine: str) -> list[Any]:
    from icefabric.control.p4rt import TableEntry

    mac = SWITCH_MACS[spine]
    down_tags = {
        "S1": {TAG_L1_L2_S1: SPINE_DOWN["L2"], TAG_L2_L1_S1: SPINE_DOWN["L1"]},
        "S2": {TAG_L1_L2_S2: SPINE_DOWN["L2"], TAG_L2_L1_S2: SPINE_DOWN["L1"]},
    }[spine]
    out: list[Any] = [
        TableEntry(
            table=T_PORT_KIND,
            match={"ingress_port": p},
            action="IceIngress.config.set_port_kind",
            params={"kind": P.PORT_KIND_FABRIC},
        )
        for p in (*SPINE_DOWN.values(), SPINE_TEST_PORT)
    ]
    for leaf, port in SPINE_DOWN.items():
        out.append(
            TableEntry(
                table=T_IPV4_ROUTE,
                match={"dst_addr": LPM(SUBNETS[leaf], 24)},
                action="IceIngress.routing.route_to_port",
                params={"port": port, "src_mac": mac, "dst_mac": SWITCH_MACS[leaf]},
            )
        )
    for tag, port in down_tags.items():
        out.append(
            TableEntry(
                table=T_TAG_FORWARD,
                match={"path_tag": tag},
                action="IceIngress.tag_switch.forward_by_tag",
                params={"port": port},
            )
        )
    return out


def program_switch_common(
    fab: Fabric, name: str, role: int, opts: Options, ports: tuple[int, ...]
) -> None:
    """Keyless configuration tables and per-port rates of one switch."""
    sw = fab[name]
    prios = queue_priorities(PRIORITY_QUEUES)
    if prios is not None:
        sw.set_default(
            "IceIngress.queue_config",
            "IceIngress.set_queue_priorities",
            control_prio=prios[0],
            feedback_prio=prios[1],
        )
    sw.set_default(
        T_SWITCH_CONFIG,
        "IceIngress.config.set_switch_config",
        switch_id=SWITCH_IDS[name],
        role=role,
        hop_limit=opts.hop_limit,
    )
    sw.set_default(
        T_LB_CONFIG,
        "IceIngress.config.set_lb_config",
        mode=opts.lb_mode,
        use_qp_in_hash=opts.use_qp_in_hash,
        flowlet_timeout_us=opts.flowlet_timeout_us,
    )
    sw.set_default(
        T_TELEMETRY_CONFIG,
        "IceIngress.config.set_telemetry_config",
        feedback_every_n=opts.feedback_every_n,
        report_enabled=opts.report_enabled,
    )
    sw.set_default(
        T_REPORT_CONFIG,
        "IceEgress.report.set_report_config",
        report_every_n=opts.report_every_n,
        qdepth_threshold=opts.report_qdepth_threshold,
    )
    if opts.ecn is not None:
        kmin, kmax, mask = opts.ecn
        sw.set_default(
            T_ECN_CONFIG, "IceEgress.ecn.set_ecn_thresholds", kmin=kmin, kmax=kmax, pmax_mask=mask
        )
    from icefabric.control.p4rt import TableEntry

    sw.insert(
        [
            TableEntry(
                table=T_EGRESS_PORT_INFO,
                match={"port": p},
                action="IceEgress.int_telemetry.set_link_rate",
                params={"rate_mbps": LINK_RATE_MBPS},
            )
            for p in ports
        ]
    )


def program_leaf(fab: Fabric, leaf: str, opts: Options) -> None:
    """Everything a leaf gets: keyless config, its entries, feedback MACs, clone sessions."""
    program_switch_common(fab, leaf, P.SWITCH_ROLE_LEAF, opts, (*LEAF_HOST_PORTS, *UPLINK.values()))
    sw = fab[leaf]
    sw.insert(_leaf_entries(leaf, opts))
    if opts.int_sample_n is not None:  # the controller's write: a keyless table's default
        sw.conn.modify(IntSampling(opts.int_sample_n, opts.int_sample_max_gap_us).entry())
    sw.set_default(
        T_FEEDBACK_CONFIG,
        "IceEgress.feedback.set_feedback_config",
        src_mac=SWITCH_MACS[leaf],
        dst_mac=SWITCH_MACS["S1"],
    )
    sw.clone_session(P.ICE_SESSION_FEEDBACK, [UPLINK["S1"]])
    sw.clone_session(P.ICE_SESSION_FEEDBACK_REPORT, [UPLINK["S1"], P.CPU_PORT])
    sw.clone_session(P.ICE_SESSION_REPORT, [P.CPU_PORT])


def build_first_leaf(opts: Options | None = None) -> LeafSpine:
    """L1 alone, programmed as in the leaf-spine fabric, its uplinks unlinked: what it sends
    towards the spines is read with ``fabric.received("L1", UPLINK[...])``."""
    opts = opts or Options()
    fab = make_fabric(opts.switch_queues)
    try:
        fab.add_switch("L1", (*LEAF_HOST_PORTS, *UPLINK.values()))
        fab.start()
        program_leaf(fab, "L1", opts)
    except BaseException:
        fab.close()
        raise
    return LeafSpine(fab, opts)


def build_leaf_spine(opts: Options | None = None) -> LeafSpine:
    """Create and program the fabric on the target ICE_TARGET selects."""
    opts = opts or Options()
    fab = make_fabric(opts.switch_queues)
    try:
        for leaf in ("L1", "L2"):
            fab.add_switch(leaf, (*LEAF_HOST_PORTS, *UPLINK.values()))
        for spine in ("S1", "S2"):
            fab.add_switch(spine, (*SPINE_DOWN.values(), SPINE_TEST_PORT))
        for leaf in ("L1", "L2"):
            for spine, up in UPLINK.items():
                fab.link(leaf, up, spine, SPINE_DOWN[leaf])
        fab.start()
        for leaf in ("L1", "L2"):
            program_leaf(fab, leaf, opts)
        for spine in ("S1", "S2"):
            program_switch_common(
                fab, spine, P.SWITCH_ROLE_SPINE, opts, (*SPINE_DOWN.values(), SPINE_TEST_PORT)
            )
            fab[spine].insert(_spine_entries(spine))
    except BaseException:
        fab.close()
        raise
    return LeafSpine(fab, opts)


def plan_flow(ls: LeafSpine, src: str, dst: str, *, sport: int, qp: int, tag: int) -> None:
    """Install a planned path for one flow on its first leaf."""
    s, d = ls.hosts[src], ls.hosts[dst]
    ls.fabric[s.leaf].add(
        T_FLOW_PATH,
        {"src_addr": Exact(s.ip), "dst_addr": Exact(d.ip), "udp_src_port": sport, "dst_qp": qp},
        "IceIngress.path_select.set_planned_path",
        path_tag=tag,
    )
