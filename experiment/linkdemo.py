"""``make demo``'s second step: a link failure on the in-process fabric, in real time.

The fabric of the topology as in-process embedded switches with their own schedulers
(:mod:`icefabric.experiment.wire`); the controller plans a ring all-reduce and every flow sends
a short RoCEv2 burst; the busiest leaf-spine wire is cut without telling the controller: its LLDP
link probes stop arriving, the controller declares the link down, replans the flows that crossed
it and installs the new paths (times measured), the traffic runs again and must avoid the cut;
the wire is healed and the probes restore the link. ``Demo`` and ``ring_job`` also serve the
data-plane tests that drive the same fabric.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from icefabric.control import render
from icefabric.control.controller import Controller
from icefabric.control.fabric import ALL_PATH_KINDS, FabricOptions, switch_mac
from icefabric.control.fabric_targets import for_target
from icefabric.control.flowkey import ROCE_UDP_PORT
from icefabric.control.install import flow_key
from icefabric.control.linkstate import LinkEvent
from icefabric.control.p4rt import PipelineConfig
from icefabric.control.topology import Topology
from icefabric.experiment.wire import InProcessFabric, RealTime
from icefabric.p4src.ice_p4 import ETHERNET_BYTES, IPV4_BYTES, UDP_BYTES
from icefabric.waiting import poll_until

log = logging.getLogger(__name__)

FEEDBACK_PORT = 4792


def ring_job(hosts: Sequence[str], *, channels: int, name: str = "allreduce") -> dict[str, Any]:
    """A ring all-reduce over ``hosts`` (one rank per host), as a job description."""
    return {
        "name": name,
        "hosts": list(hosts),
        "phases": [
            {
                "name": "grad-allreduce",
                "collective": "all-reduce",
                "algorithm": "ring",
                "channels": channels,
                "message_bytes": "256MiB",
            }
        ],
    }


def interleaved_hosts(topo: Topology) -> list[str]:
    """Hosts ordered so that every ring neighbour sits on another leaf (all traffic crosses
    the spines): first host of every leaf, then the second of every leaf, ..."""
    return topo.spec.interleaved_hosts()


@dataclass(slots=True)
class Phase:
    """What one round of traffic showed."""

    name: str
    sent: int
    delivered: int
    link_packets: dict[str, int]
    paths: dict[str, tuple[str, ...]]  # flow -> switches the packets crossed (from INT)
    reports: int
    feedback: int
    seconds: float
    max_queue: int  # deepest egress queue any INT record of this round saw (packets)

    @property
    def max_link(self) -> int:
        """Packets on the busiest fabric link."""
        return max(self.link_packets.values(), default=0)


class Demo:
    """Runs the demo steps against one in-process fabric and one controller."""

    def __init__(
        self,
        ctl: Controller,
        fab: InProcessFabric,
        con: Console,
        packets: int,
        *,
        delivery_wait_s: float = 20.0,
        report_wait_s: float = 5.0,
    ) -> None:
        self.ctl = ctl
        # how long run_traffic waits for the burst, then for its telemetry reports and feedback
        # (each wait ends as soon as everything is in; tests on a loaded host give more)
        self.delivery_wait_s = delivery_wait_s
        self.report_wait_s = report_wait_s
        self.fab = fab
        self.con = con
        self.packets = packets
        self.topo = ctl.topo
        self.names = {s.switch_id: s.name for s in ctl.spec.switches}
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        """Record a failed check (the demo exits 1 at the end)."""
        if not ok:
            self.failures.append(what)
            self.con.print(f"[red]FAILED[/red] {what}")
        return ok

    def _tag_counts(self) -> dict[int, int]:
        """Packets per tag counted at each tag's first-hop leaf (P4Runtime direct counters)."""
        counts: dict[int, int] = {}
        stats = self.ctl.stats()
        for leaf in self.topo.leaves:
            for t in stats[leaf].get("tags", []):
                path = self.ctl.tags.paths.get(t["tag"])
                if path is not None and path.src_leaf == leaf:
                    counts[t["tag"]] = t["packets"]
        return counts

    def run_traffic(self, name: str) -> Phase:
        """Send ``packets`` RoCEv2 packets of every flow; measure delivery, links, paths."""
        from icefabric.traffic.packets import rocev2_packet

        for h in self.ctl.spec.hosts:
            self.fab.inbox.take(h.name)
        before = self._tag_counts()
        seen_reports = self.ctl.reports.received
        flows = list(self.ctl.flows.values())
        burst: list[tuple[str, bytes]] = []
        for psn in range(self.packets):
            for f in flows:
                k = flow_key(self.topo, f)
                src = self.ctl.spec.host(f.src_host)
                gw = switch_mac(self.ctl.spec.switch(src.leaf).switch_id)
                pkt = rocev2_packet(
                    src_mac=src.mac,
                    dst_mac=gw,
                    src_ip=k.src_ip,
                    dst_ip=k.dst_ip,
                    src_port=k.udp_sport,
                    dst_qp=k.dst_qp,
                    psn=psn,
                )
                burst.append((f.src_host, bytes(pkt)))
        t0 = time.perf_counter()
        for host, frame in burst:  # built first, sent back to back: a collective's burst
            self.fab.send(host, frame)
        sent = self.packets * len(flows)
        frames: dict[str, list[bytes]] = {h.name: [] for h in self.ctl.spec.hosts}

        def data_count() -> int:
            for h in frames:
                frames[h].extend(self.fab.inbox.take(h))
            return sum(1 for fs in frames.values() for fr in fs if _udp_dport(fr) == ROCE_UDP_PORT)

        self.fab.inbox.wait_for(lambda: data_count() >= sent, timeout=self.delivery_wait_s)
        delivered = data_count()
        want_reports = seen_reports + sent
        poll_until(lambda: self.ctl.reports.received >= want_reports, self.report_wait_s, 0.01)
        elapsed = time.perf_counter() - t0

        def feedback_count() -> int:
            data_count()  # collects every frame, feedback included
            return sum(1 for fs in frames.values() for fr in fs if _udp_dport(fr) == FEEDBACK_PORT)

        # feedback leaves the last hop by an uplink and queues there like data: wait for it
        self.fab.inbox.wait_for(lambda: feedback_count() >= sent, timeout=self.report_wait_s)
        feedback = feedback_count()
        after = self._tag_counts()
        link_packets = {
            self.topo.link_name(lid): 0
            for lid, ln in enumerate(self.topo.links)
            if ln.kind == "fabric" and self.topo.links[lid].src in self.topo.leaves
        }
        for lid, ln in enumerate(self.topo.links):
            if ln.kind == "fabric":
                link_packets.setdefault(self.topo.link_name(lid), 0)
        for tag, count in after.items():
            delta = count - before.get(tag, 0)
            if delta <= 0:
                continue
            for lid in self.ctl.tags.paths[tag].links:
                link_packets[self.topo.link_name(lid)] += delta
        paths: dict[str, tuple[str, ...]] = {}
        max_queue = 0
        for rep in self.ctl.reports.recent(None)[-(self.ctl.reports.received - seen_reports) :]:
            max_queue = max([max_queue, *(h["qdepth"] for h in rep["hops"])])
            hops = tuple(
                self.names.get(h["switch_id"], str(h["switch_id"])) for h in reversed(rep["hops"])
            )
            paths[rep["flow"]] = hops
        return Phase(
            name=name,
            sent=sent,
            delivered=delivered,
            link_packets=link_packets,
            paths=paths,
            reports=self.ctl.reports.received - seen_reports,
            feedback=feedback,
            seconds=elapsed,
            max_queue=max_queue,
        )

    def planned_switches(self) -> dict[str, tuple[str, ...]]:
        """Per flow, the switches of its planned path."""
        leaves_and_spines = {s.name for s in self.ctl.spec.switches}
        return {
            r["flow"]: tuple(x for x in r["path"] if x in leaves_and_spines)
            for r in self.ctl.paths()
        }


def wait_link_event(
    ctl: Controller, seen: int, kind: str, a: str, b: str, timeout: float = 10.0
) -> LinkEvent | None:
    """The first ``kind`` event of link a-b after the first ``seen`` probe events, once the
    controller has installed its consequence (None at the deadline)."""
    mon = ctl.linkmon
    return None if mon is None else mon.wait_handled(seen, kind, a, b, timeout)


def _udp_dport(frame: bytes) -> int | None:
    """UDP destination port of an untagged Ethernet/IPv4/UDP frame (None otherwise)."""
    if (
        len(frame) < ETHERNET_BYTES + IPV4_BYTES + UDP_BYTES
        or frame[12:14] != b"\x08\x00"
        or frame[23] != 17
    ):
        return None
    ihl = (frame[14] & 0x0F) * 4
    off = 14 + ihl
    return int.from_bytes(frame[off + 2 : off + 4], "big") if len(frame) >= off + 4 else None


def _link_table(con: Console, before: Phase, after: Phase) -> None:
    rows = [  # the leaf uplinks: where the cut moves the load
        [link, before.link_packets[link], after.link_packets.get(link, 0)]
        for link in before.link_packets
        if link.startswith("leaf")
    ]
    con.print(
        render.table(
            "leaf uplinks in the failure step (data packets, from per-tag counters)",
            ["uplink", "before the cut", "after the cut"],
            rows,
        )
    )


def _int_table(con: Console, demo: Demo) -> None:
    sample = next(iter(demo.ctl.reports.recent(1)), None)
    if sample is None:
        return
    con.print(
        render.table(
            f"INT telemetry: last report from {sample['switch']} ({sample['flow']})",
            ["switch", "in port", "out port", "queue", "tx bytes", "link Mbit/s"],
            [
                (
                    demo.names.get(h["switch_id"], h["switch_id"]),
                    h["ingress_port"],
                    h["egress_port"],
                    h["qdepth"],
                    h["tx_bytes"],
                    h["link_rate_mbps"],
                )
                for h in reversed(sample["hops"])
            ],
        )
    )


@dataclass(slots=True)
class Cut:
    """The wire cut in the failure step and what the probes made of it."""

    a: str
    b: str
    link_id: int
    seen: int  # probe events before the cut
    at: float  # time.monotonic() of the cut
    down: LinkEvent | None


def link_failure(
    topo_path: Path,
    *,
    packets: int,
    channels: int,
    con: Console,
    link_pps: int | None,
    failures: list[str],
    probe_interval_ms: float = 100.0,
    probe_misses: int = 3,
    before_cut: Any = None,
) -> list[str]:
    """Step 2 (module docstring): failed checks go to ``failures``; returns the summary lines.

    ``before_cut`` (optional) runs once the burst on the planned paths was measured, before the
    cut (the demo prints the timed run's paths there).
    """
    from icefabric.p4src import ICE_P4
    from icefabric.topo.spec import load_topology

    spec = load_topology(topo_path)
    con.print(
        f"\n[bold]3. link failure[/bold] (real time): {spec.name} from {_shown(topo_path)}"
        f" - {len(spec.switches)} embedded P4 switches with their own schedulers, "
        f"{len(spec.hosts)} hosts"
    )
    pipeline = PipelineConfig.for_embedded(ICE_P4)
    options = for_target(
        FabricOptions(mode="ice", int_kinds=ALL_PATH_KINDS, report_every_n=1, feedback_every_n=1),
        "embedded",
    )
    with InProcessFabric(spec, RealTime(fabric_pps=link_pps)) as fab:
        ctl = Controller(
            spec,
            pipeline,
            addresses=fab.addresses,
            options=options,
            probe_interval_s=probe_interval_ms / 1e3,
            probe_misses=probe_misses,
        )
        try:
            demo = _start(ctl, fab, con, packets, channels, failures)
            planned = demo.planned_switches()
            ice = demo.run_traffic("ice")
            if before_cut is not None:
                before_cut()
            cut = _cut_busiest(demo, ice)
            ctl.wait_idle(10.0)
            failed = demo.run_traffic("failure")
            _link_table(con, ice, failed)
            _check_failure_step(demo, planned, ice, failed, cut)
            up, t_heal = _heal(demo, cut)
            _int_table(con, demo)
            return _summary(ctl, ice, failed, cut, up, t_heal)
        finally:
            ctl.stop()


def _shown(path: Path) -> str:
    root = Path(__file__).resolve().parents[1]
    return str(path.relative_to(root) if path.is_relative_to(root) else path)


def _start(
    ctl: Controller,
    fab: InProcessFabric,
    con: Console,
    packets: int,
    channels: int,
    failures: list[str],
) -> Demo:
    """The controller takes the fabric and plans the ring job."""
    t0 = time.perf_counter()
    ctl.start()
    entries = sum(len(v) for v in ctl.installed.values())
    con.print(
        f"controller primary on {len(ctl.pool.primaries())}/{len(ctl.spec.switches)} switches "
        f"over P4Runtime; pipeline pushed, {entries} base entries installed in "
        f"{(time.perf_counter() - t0) * 1e3:.0f} ms"
    )
    demo = Demo(ctl, fab, con, packets)
    demo.failures = failures
    demo.check(ctl.active, "controller became primary on every switch")
    demo.check(ctl.linkmon is not None, "LLDP link probes running (--probe-interval > 0)")
    job = ring_job(interleaved_hosts(ctl.topo), channels=channels)
    res = ctl.add_job(job)
    con.print(
        f"job [bold]{res['job']}[/bold]: ring all-reduce over {len(job['hosts'])} hosts, "
        f"{channels} channels -> {res['flows']} flows planned in {res['plan_ms']:.1f} ms, "
        f"{res['entries']} flow entries installed in {res['install_ms']:.1f} ms"
    )
    return demo


def _cut_busiest(demo: Demo, ice: Phase) -> Cut:
    """Cut the busiest leaf-spine wire without telling the controller; its probes find out."""
    ctl = demo.ctl
    busiest = max(
        (lnk for lnk in ctl.topo.links if lnk.kind == "fabric" and lnk.src in ctl.topo.leaves),
        key=lambda lnk: ice.link_packets.get(ctl.topo.link_name(lnk.id), 0),
    )
    a, b = busiest.src, busiest.dst
    seen = len(ctl.linkmon.events()) if ctl.linkmon else 0
    t_cut = time.monotonic()
    demo.fab.cut_link(a, b)
    down = wait_link_event(ctl, seen, "down", a, b)
    demo.check(
        down is not None and down.note is None and down.paths_installed_at is not None,
        f"the probes declared {a}-{b} down and the controller replanned around it",
    )
    if down is not None and down.paths_installed_at is not None:
        demo.con.print(
            f"wire {a}-{b} cut (controller not told): LLDP probes declared it down "
            f"{(down.at - t_cut) * 1e3:.0f} ms after the cut ({down.detection_ms or 0:.0f} "
            f"ms after its last probe), {down.moved} flow(s) replanned in "
            f"{down.plan_ms or 0:.1f} ms, new paths installed in "
            f"{down.install_ms or 0:.1f} ms (cut -> new paths "
            f"{(down.paths_installed_at - t_cut) * 1e3:.0f} ms)"
        )
    return Cut(a=a, b=b, link_id=busiest.id, seen=seen, at=t_cut, down=down)


def _crosses(path: Sequence[str], a: str, b: str) -> bool:
    return any(x in (a, b) and y in (a, b) for x, y in itertools.pairwise(path))


def _check_failure_step(
    demo: Demo, planned: dict[str, tuple[str, ...]], ice: Phase, failed: Phase, cut: Cut
) -> None:
    """Everything delivered, on the plan before the cut and on the new plan after it."""
    for ph in (ice, failed):
        demo.check(
            ph.delivered == ph.sent, f"{ph.name}: {ph.delivered}/{ph.sent} data packets delivered"
        )
    wrong = [f for f, p in planned.items() if ice.paths.get(f) != p]
    demo.check(not wrong, f"ICE: flows off their planned path: {wrong[:3]}")
    demo.check(ice.reports > 0, "ICE: telemetry reports reached the controller")
    demo.check(ice.feedback > 0, "ICE: feedback packets reached the senders")
    crossing = [f for f, p in failed.paths.items() if _crosses(p, cut.a, cut.b)]
    demo.check(not crossing, f"after the failure flows still cross {cut.a}-{cut.b}: {crossing[:3]}")
    moved_paths = demo.planned_switches()
    wrong_after = [f for f, p in moved_paths.items() if failed.paths.get(f) != p]
    demo.check(
        not wrong_after, f"after the failure: flows off their new planned path: {wrong_after[:3]}"
    )


def _heal(demo: Demo, cut: Cut) -> tuple[LinkEvent | None, float]:
    """The wire is repaired: probes come back both ways, the link is restored and used again."""
    ctl, a, b = demo.ctl, cut.a, cut.b
    t_heal = time.monotonic()
    demo.fab.heal_link(a, b)
    up = wait_link_event(ctl, cut.seen, "up", a, b)
    demo.check(
        up is not None and up.note is None and not ctl.topo.failed[cut.link_id],
        f"the probes restored {a}-{b} after the wire was healed",
    )
    uses_link = any(_crosses(p, a, b) for p in demo.planned_switches().values())
    demo.check(uses_link, f"after the repair the plan uses {a}-{b} again")
    if up is not None and up.paths_installed_at is not None:
        demo.con.print(
            f"wire {a}-{b} healed: probes back both ways, link restored "
            f"{(up.at - t_heal) * 1e3:.0f} ms later, {up.moved} flow(s) rebalanced, "
            f"installed in {up.install_ms or 0:.1f} ms"
        )
    spurious = [
        e.link for e in (ctl.linkmon.events() if ctl.linkmon else []) if {e.a, e.b} != {a, b}
    ]
    demo.check(not spurious, f"no other link declared down by the probes: {spurious[:3]}")
    return up, t_heal


def _summary(
    ctl: Controller, ice: Phase, failed: Phase, cut: Cut, up: LinkEvent | None, t_heal: float
) -> list[str]:
    """The failure step's lines of the demo's summary."""
    lines = [
        f"  failure step: {ice.delivered}/{ice.sent} delivered before the cut, every flow "
        f"on its planned path, {ice.reports} INT reports, {ice.feedback} feedback packets"
    ]
    down = cut.down
    if down is not None and down.paths_installed_at is not None:
        lines.append(
            f"  link {cut.a}-{cut.b} cut: found by LLDP probes in {(down.at - cut.at) * 1e3:.0f} ms "
            f"({ctl.probe_interval_s * 1e3:.0f} ms x {ctl.probe_misses}), "
            f"{down.moved} flow(s) replanned in {down.plan_ms or 0:.1f} ms, new paths "
            f"installed in {down.install_ms or 0:.1f} ms (cut -> installed "
            f"{(down.paths_installed_at - cut.at) * 1e3:.0f} ms); {failed.delivered}/"
            f"{failed.sent} delivered afterwards"
            + (f"; restored {(up.at - t_heal) * 1e3:.0f} ms after the repair" if up else "")
        )
    return lines
