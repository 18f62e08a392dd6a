"""LinkMonitor: LLDP probes as data, and the down/up state machine on a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from _jobs import ring_job

from icefabric.control.linkmon import LinkMonitor
from icefabric.control.linkstate import LinkEvent
from icefabric.control.lldp import ETHERTYPE_LLDP, LldpError, LldpProbe
from icefabric.control.p4rt import PacketIn, PacketOut
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
INTERVAL = 0.1


# ---------------------------------------------------------------------------------------------
# LLDP as data


def test_probe_encodes_to_the_expected_bytes() -> None:
    frame = LldpProbe(chassis="leaf1", port=3, ttl_s=1, src_mac="02:1c:e0:00:00:01").encode()
    want = bytes.fromhex(
        "0180c200000e"  # nearest-bridge group address
        "021ce0000001"  # the switch's router MAC
        "88cc"  # LLDP
        "0206"
        "07"
        "6c65616631"  # Chassis ID (type 1, len 6): locally assigned, "leaf1"
        "0402"
        "07"
        "33"  # Port ID (type 2, len 2): locally assigned, "3"
        "0602"
        "0001"  # TTL (type 3, len 2): 1 s
        "0000"  # End of LLDPDU
    )
    assert frame[: len(want)] == want
    assert len(frame) == 60 and frame[len(want) :] == bytes(60 - len(want))  # padded


def test_probe_round_trip_and_scapy_agrees() -> None:
    from scapy.contrib.lldp import LLDPDUChassisID, LLDPDUPortID, LLDPDUTimeToLive
    from scapy.layers.l2 import Ether

    p = LldpProbe(chassis="spine-02", port=511, ttl_s=300, src_mac="02:1c:e0:00:00:06")
    raw = p.encode()
    assert LldpProbe.decode(raw) == p
    pkt = Ether(raw)
    assert pkt.type == ETHERTYPE_LLDP
    assert pkt[LLDPDUChassisID].subtype == 7 and pkt[LLDPDUChassisID].id == b"spine-02"
    assert pkt[LLDPDUPortID].subtype == 7 and pkt[LLDPDUPortID].id == b"511"
    assert pkt[LLDPDUTimeToLive].ttl == 300


def _tlv(kind: int, value: bytes) -> bytes:
    return ((kind << 9) | len(value)).to_bytes(2, "big") + value


HEADER = bytes.fromhex("0180c200000e02000000000188cc")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\x01\x02", "shorter than an Ethernet header"),
        (HEADER[:12] + b"\x08\x00" + bytes(40), "is not LLDP"),
        (HEADER + _tlv(2, b"\x073") + _tlv(3, b"\x00\x01") + _tlv(0, b""), "no Chassis ID"),
        (HEADER + _tlv(1, b"\x04abc") + _tlv(2, b"\x073") + _tlv(0, b""), "subtype 7"),
        (HEADER + _tlv(1, b"\x07abc") + _tlv(2, b"\x07x3") + _tlv(3, b"\x00\x01"), "End TLV"),
        (
            HEADER + _tlv(1, b"\x07abc") + _tlv(2, b"\x07x3") + _tlv(3, b"\x00\x01") + _tlv(0, b""),
            "decimal port",
        ),
        (HEADER + _tlv(1, b"\x07abc") + _tlv(2, b"\x073") + _tlv(0, b""), "TTL"),
        (HEADER + b"\x02\x20\x07", "runs past the frame"),
    ],
)
def test_decode_rejects_what_is_not_a_probe(frame: bytes, message: str) -> None:
    with pytest.raises(LldpError, match=message):
        LldpProbe.decode(frame)


def test_encode_rejects_bad_fields() -> None:
    with pytest.raises(LldpError, match="chassis"):
        LldpProbe(chassis="", port=1).encode()
    with pytest.raises(LldpError, match="port"):
        LldpProbe(chassis="x", port=70000).encode()
    with pytest.raises(LldpError, match="MAC"):
        LldpProbe(chassis="x", port=1, src_mac="zz").encode()


# ---------------------------------------------------------------------------------------------
# the state machine, driven by hand on a fake clock


class Wires:
    """The fabric of SPEC as probes see it: what a switch sends arrives at the peer port."""

    def __init__(
        self, *, misses: int = 3, initially_down: Iterable[int] = (), counters: bool = False
    ) -> None:
        self.topo = Topology(SPEC)
        # each switch port's rx packet counter (what ice.p4's port_rx_counter reads), fed by the
        # probes that cross and by data on the directions in `busy` (probes lost or not)
        self.rx: dict[tuple[str, int], int] = {}
        self.busy: set[tuple[str, str]] = set()
        self.reads = 0
        self.now = 1000.0
        self.sent: list[tuple[str, PacketOut]] = []
        self.events: list[LinkEvent] = []
        self.cut: set[frozenset[str]] = set()
        self.one_way: set[tuple[str, str]] = set()  # (src, dst) directions that lose probes
        self.unreachable: set[str] = set()
        self.mute: set[str] = set()  # switches whose packet-ins never reach the controller
        self.mon = LinkMonitor(
            self.topo,
            send=lambda sw, pkt: self.sent.append((sw, pkt)),
            on_change=self.events.append,
            interval_s=INTERVAL,
            misses=misses,
            reachable=lambda sw: sw not in self.unreachable,
            rx_packets=self.read_rx if counters else None,
            clock=lambda: self.now,
            initially_down=initially_down,
        )
        self.peer = {
            (ln.src, ln.src_port): (ln.dst, ln.dst_port)
            for ln in self.topo.links
            if ln.kind == "fabric"
        }

    def read_rx(self, switch: str, port: int) -> int:
        self.reads += 1
        return self.rx.get((switch, port), 0)

    def round(self, count: int = 1) -> list[LinkEvent]:
        """`count` intervals: tick (sends), then every sent probe crosses its wire."""
        fired: list[LinkEvent] = []
        for _ in range(count):
            fired += self.mon.tick(self.now)
            sent, self.sent = self.sent, []
            self.now += INTERVAL / 4  # probes arrive a little after they leave
            for sw, pkt in sent:
                port = int(pkt.metadata["egress_port"])
                dst, dst_port = self.peer[(sw, port)]
                if frozenset((sw, dst)) in self.cut:
                    continue
                if (sw, dst) in self.busy:  # data crosses, whatever happens to the probes
                    self.rx[(dst, dst_port)] = self.rx.get((dst, dst_port), 0) + 50
                if (sw, dst) in self.one_way:
                    continue
                self.rx[(dst, dst_port)] = self.rx.get((dst, dst_port), 0) + 1
                if dst in self.mute:
                    continue
                self.mon.on_probe(dst, dst_port, pkt.payload, self.now)
            self.now += INTERVAL * 3 / 4
        return fired

    def state(self, name: str) -> str:
        return self.mon.link_state(name)


@pytest.fixture
def wires() -> Wires:
    w = Wires()
    w.round(3)
    assert w.events == []
    return w


def test_every_fabric_port_is_probed_once_per_round(wires: Wires) -> None:
    wires.mon.tick(wires.now)
    ports = sorted((sw, int(p.metadata["egress_port"])) for sw, p in wires.sent)
    assert ports == sorted(wires.peer)
    assert len(ports) == 16
    for sw, pkt in wires.sent:
        probe = LldpProbe.decode(pkt.payload)
        assert (probe.chassis, probe.port) == (sw, pkt.metadata["egress_port"])
        assert pkt.metadata["_pad0"] == 0
    st = wires.mon.status(wires.now)
    assert all(r["state"] == "up" for r in st["links"]) and st["down"] == []
    assert st["probes_received"] == 3 * 16


def test_cut_link_goes_down_after_misses_and_comes_back(wires: Wires) -> None:
    wires.cut.add(frozenset(("leaf1", "spine1")))
    # the first round still closes the interval whose probes crossed before the cut
    assert wires.round(3) == []
    assert wires.state("leaf1-spine1") == "up"
    fired = wires.round(1)
    assert [(e.link, e.kind) for e in fired] == [("leaf1:3-spine1:1", "down")]
    ev = fired[0]
    assert wires.events == [ev] and ev.lid % 2 == 0 and {ev.a, ev.b} == {"leaf1", "spine1"}
    # last probe seen a quarter interval into the round before the cut; three misses later
    assert ev.detection_ms == pytest.approx(3.75 * INTERVAL * 1e3)
    assert "leaf1:3->spine1:1" in ev.reason and "spine1:1->leaf1:3" in ev.reason
    assert wires.state("leaf1-spine1") == "down"
    assert all(r["state"] == "up" for r in wires.mon.status()["links"] if r["link"] != ev.link)
    assert wires.round(5) == []  # down once, not on every round

    wires.cut.clear()
    assert wires.round(3) == []
    fired = wires.round(1)
    assert [(e.link, e.kind) for e in fired] == [("leaf1:3-spine1:1", "up")]
    assert fired[0].detection_ms == pytest.approx(2.75 * INTERVAL * 1e3)
    assert wires.state("leaf1-spine1") == "up"
    st = wires.mon.status()
    row = next(r for r in st["links"] if r["link"] == "leaf1:3-spine1:1")
    assert row["events"] == 2 and [e["kind"] for e in st["events"]] == ["down", "up"]


def test_one_direction_lost_is_enough(wires: Wires) -> None:
    wires.one_way.add(("spine2", "leaf3"))
    fired = wires.round(4)
    assert [(e.link, e.kind) for e in fired] == [("leaf3:4-spine2:3", "down")]
    assert fired[0].reason.startswith("spine2:3->leaf3:4:")
    # recovery needs both directions
    wires.one_way.clear()
    wires.one_way.add(("leaf3", "spine2"))
    assert wires.round(6) == []
    wires.one_way.clear()
    assert [e.kind for e in wires.round(4)] == ["up"]


def test_flapping_shorter_than_misses_is_ignored(wires: Wires) -> None:
    for _ in range(4):
        wires.cut.add(frozenset(("leaf2", "spine2")))
        wires.round(2)
        wires.cut.clear()
        wires.round(1)
    assert wires.events == []


def test_misses_one_reacts_on_the_first_silent_round() -> None:
    w = Wires(misses=1)
    w.round(2)
    w.cut.add(frozenset(("leaf4", "spine1")))
    assert w.round(1) == []
    assert [e.kind for e in w.round(1)] == ["down"]


def test_unreachable_switch_freezes_its_links(wires: Wires) -> None:
    wires.unreachable.add("spine1")
    assert wires.round(6) == []
    st = {r["link"]: r["state"] for r in wires.mon.status()["links"]}
    assert {k for k, v in st.items() if v == "unknown"} == {
        f"leaf{i}:3-spine1:{i}" for i in range(1, 5)
    }
    # back: one round to see it reachable for a whole interval, then normal counting
    wires.unreachable.clear()
    wires.round(2)
    assert all(r["state"] == "up" for r in wires.mon.status()["links"])
    assert wires.events == []


def test_a_switch_whose_packet_ins_stall_gives_no_evidence(wires: Wires) -> None:
    # spine1 passes no probe to the controller (a busy switch): its links are not declared
    # down, since nothing says the links rather than the switch lost them
    wires.mute.add("spine1")
    assert wires.round(6) == []
    # and a round where nothing at all comes back does not count for anyone
    wires.mute.update(s.name for s in SPEC.switches)
    assert wires.round(6) == []
    assert wires.mon.status()["stalled_rounds"] >= 5
    wires.mute.clear()
    wires.round(2)
    assert wires.events == []


def test_late_round_does_not_count(wires: Wires) -> None:
    wires.cut.add(frozenset(("leaf1", "spine2")))
    wires.round(3)  # seen, miss 1, miss 2
    wires.now += 5 * INTERVAL  # the monitor thread was starved
    assert wires.round(1) == []  # the late round is not a third miss
    assert [e.kind for e in wires.round(1)] == ["down"]


def test_miswiring_foreign_and_garbage_are_reported(wires: Wires) -> None:
    mon = wires.mon
    # leaf1 port 3 (wired to spine1:1) shows up at spine2 port 1 (wired to leaf1:4)
    probe = LldpProbe(chassis="leaf1", port=3).encode()
    mon.on_probe("spine2", 1, probe, wires.now)
    mon.on_probe("spine2", 1, probe, wires.now)
    # an unknown chassis on a fabric port, and on a host port (lldpd on a server)
    mon.on_probe("spine1", 2, LldpProbe(chassis="rogue", port=7).encode(), wires.now)
    mon.on_probe("leaf1", 1, LldpProbe(chassis="host-h1", port=0).encode(), wires.now)
    mon.on_probe("leaf2", 3, b"\x00" * 20, wires.now)
    st = mon.status()
    mis = {m["seen"]: m for m in st["miswired"]}
    assert mis["leaf1:3->spine2:1"]["count"] == 2
    assert "spine2:1 is wired to leaf1:4" in mis["leaf1:3->spine2:1"]["expected"]
    assert "leaf1:3 is wired to spine1:1" in mis["leaf1:3->spine2:1"]["expected"]
    assert "'rogue' is not a switch" in mis["rogue:7->spine1:2"]["expected"]
    assert any("undecodable" in k for k in mis)
    assert st["foreign_lldp"] == {"leaf1:1": 1}
    assert st["undecodable"] == 1
    assert wires.events == []


def test_completion_is_recorded_on_the_event(wires: Wires) -> None:
    wires.cut.add(frozenset(("leaf2", "spine1")))
    (ev,) = wires.round(4)

    class Rep:
        moved, plan_ms, install_ms, base_ms = 4, 12.5, 6.0, 60.0

    wires.mon.complete(ev, Rep(), paths_installed_at=ev.at + 0.02, done_at=ev.at + 0.08)
    d = wires.mon.status()["events"][-1]
    assert d["moved"] == 4 and d["plan_ms"] == 12.5 and d["install_ms"] == 6.0
    assert d["reaction_ms"] == pytest.approx(20.0)
    assert d["detection_ms"] == pytest.approx(ev.detection_ms)


def test_options_are_validated() -> None:
    topo = Topology(SPEC)
    with pytest.raises(ValueError, match="interval"):
        LinkMonitor(topo, send=lambda *_: None, on_change=lambda _e: None, interval_s=0)
    with pytest.raises(ValueError, match="misses"):
        LinkMonitor(topo, send=lambda *_: None, on_change=lambda _e: None, misses=0)


# ---------------------------------------------------------------------------------------------
# the controller's side (no switch connected)


@pytest.fixture
def ctl(tmp_path: Path) -> Any:
    return _controller(tmp_path)


def _controller(tmp_path: Path) -> Any:
    """A Controller as after a takeover, with no switch connected (nothing is written)."""
    from icefabric.control.controller import Controller
    from icefabric.control.p4rt import PipelineConfig

    compiler = pytest.importorskip("icefabric.target.compiler")
    program = compiler.load_program(ROOT / "p4src" / "ice.p4")
    pipeline = PipelineConfig(p4info=program.p4info, device_config=b"{}", cookie=1, kind="embedded")
    c = Controller(SPEC, pipeline, state_file=tmp_path / "state.json")
    c.statefile.load()
    c.installer.holds_all(c.desired())
    c.active = True  # as after a takeover; nothing is connected, so nothing is written
    return c


def _attach(ctl: Any) -> Wires:
    w = Wires(initially_down=ctl._probe_down)
    ctl.probing.monitor = w.mon
    w.mon._on_change = ctl.probing.apply  # run the change inline instead of on the worker
    return w


def test_packet_in_dispatch_by_reason(ctl: Any) -> None:
    w = _attach(ctl)
    probe = LldpProbe(chassis="leaf1", port=3).encode()
    ctl.switch_events.on_packet(
        "spine1", PacketIn(payload=probe, metadata={"ingress_port": 1, "reason": 4})
    )
    assert n.PUNT_REASON_LINK_PROBE == 4
    assert w.mon.counters.received == 1
    assert ctl.reports.received == 0  # probes never land in the telemetry ring
    ctl.switch_events.on_packet("leaf1", PacketIn(payload=b"\x00" * 8, metadata={"reason": 2}))
    assert w.mon.counters.received == 1
    assert ctl.reports.received + ctl.reports.undecodable == 1  # went to the telemetry ring


def test_probe_verdicts_run_the_failure_path(ctl: Any) -> None:
    ctl.add_job(ring_job())
    w = _attach(ctl)
    w.round(2)
    crossing: Callable[[], list[str]] = lambda: [  # noqa: E731
        r["flow"] for r in ctl.paths() if "spine1" in r["path"] and "leaf1" in r["path"]
    ]
    assert crossing()
    w.cut.add(frozenset(("leaf1", "spine1")))
    (ev,) = w.round(4)
    assert ev.kind == "down" and ev.moved is not None and ev.moved > 0 and ev.note is None
    assert ev.plan_ms is not None and ev.install_ms is not None and ev.total_ms is not None
    lid = ctl.link_between("leaf1", "spine1")
    assert ctl.topo.failed[lid] and crossing() == []
    assert ctl.links()["links"][0]["failed"] is True
    assert ctl.history[-1].what.startswith("link leaf1:3-spine1:1 down (probes lost)")
    w.cut.clear()
    (back,) = w.round(4)
    assert back.kind == "up" and back.note is None and not ctl.topo.failed[lid]


def test_probes_never_restore_what_the_operator_took_down(ctl: Any) -> None:
    w = _attach(ctl)
    w.round(2)
    ctl.fail_link("leaf2", "spine2")  # icectl link down: the wire is fine
    w.cut.add(frozenset(("leaf2", "spine2")))
    (ev,) = w.round(4)
    assert ev.note is not None and "already" in ev.note and ev.moved is None
    w.cut.clear()
    (back,) = w.round(4)
    assert back.kind == "up" and back.note is not None and "left as it is" in back.note
    assert ctl.topo.failed[ctl.link_between("leaf2", "spine2")]
    assert "link_probes" in ctl.status()


def test_probe_interval_zero_disables_probing(ctl: Any) -> None:
    from icefabric.control.controller import Controller

    off = Controller(SPEC, ctl.pipeline, probe_interval_s=0)
    off.probing.start()  # what take_over calls once primary
    assert off.linkmon is None and off.links()["enabled"] is False
    with pytest.raises(ValueError, match="link probes"):
        Controller(SPEC, ctl.pipeline, probe_interval_s=-0.1)
    with pytest.raises(ValueError, match="link probes"):
        Controller(SPEC, ctl.pipeline, probe_misses=0)


def test_a_standby_restores_links_the_old_primarys_probes_took_down(
    ctl: Any, tmp_path: Path
) -> None:
    w = _attach(ctl)
    w.round(2)
    w.cut.add(frozenset(("leaf1", "spine1")))
    (ev,) = w.round(4)
    assert ev.kind == "down"
    lid = ctl.link_between("leaf1", "spine1")
    # The primary dies; the standby takes over from the shared state file.
    standby = _controller(tmp_path)
    assert standby.topo.failed[lid] and (lid & ~1) in standby._probe_down
    w2 = _attach(standby)
    assert w2.state("leaf1-spine1") == "down"
    w2.cut.add(frozenset(("leaf1", "spine1")))
    assert w2.round(5) == []  # still cut: nothing to declare
    w2.cut.clear()
    (back,) = w2.round(4)
    assert back.kind == "up" and back.note is None
    assert not standby.topo.failed[lid] and not standby._probe_down


def test_a_link_cut_before_its_first_probe_came_back_times_from_the_first_probes() -> None:
    # the controller has just started: the link dies before any probe of it arrived (BMv2 under
    # load took longer than the test took to cut); detection counts from the round its probes
    # were first sent, not None
    w = Wires()
    w.cut.add(frozenset(("leaf1", "spine1")))
    t0 = w.now
    fired: list[LinkEvent] = []
    while not fired:
        fired = w.round(1)
        assert w.now - t0 < 10 * INTERVAL
    ev = fired[0]
    assert (ev.link, ev.kind) == ("leaf1:3-spine1:1", "down")
    assert ev.detection_ms == pytest.approx(3 * INTERVAL * 1e3)  # first probes at t0
    assert ev.reason.count("(no probe since probing began)") == 2
    assert ev.to_dict()["detection_ms"] == ev.detection_ms
    row = next(r for r in w.mon.status()["links"] if r["link"] == ev.link)
    assert [d["last_seen_ms"] for d in row["directions"]] == [None, None]


def test_a_link_frozen_then_cut_times_from_the_probes_after_the_thaw(wires: Wires) -> None:
    # seen, then an end switch unreachable for a while (frozen: no evidence), back already cut:
    # the old last probe is not when it died, the first probes after the thaw are
    wires.unreachable.add("spine1")
    wires.round(20)
    wires.unreachable.clear()
    wires.cut.add(frozenset(("leaf1", "spine1")))
    fired: list[LinkEvent] = []
    n = 0
    while not fired:
        fired = wires.round(1)
        n += 1
        assert n < 10
    ev = fired[0]
    assert (ev.link, ev.kind) == ("leaf1:3-spine1:1", "down")
    assert ev.detection_ms == pytest.approx(3 * INTERVAL * 1e3)
    assert "(no probe since probing began)" in ev.reason


# ---------------------------------------------------------------------------------------------
# traffic as evidence: a loaded link that loses its probes but delivers data stays up


def counted() -> Wires:
    w = Wires(counters=True)
    w.round(3)
    assert w.events == [] and w.reads == 0  # healthy links cost no counter read
    return w


def test_a_busy_link_losing_its_probes_stays_up_while_data_arrives() -> None:
    w = counted()
    # a switch overloaded by data drops this direction's probes with the data it cannot take
    w.one_way.add(("leaf1", "spine1"))
    w.busy.add(("leaf1", "spine1"))
    assert w.round(12) == []  # four times the misses that would take it down
    assert w.state("leaf1-spine1") == "up"
    st = w.mon.status()
    assert st["alive_by_traffic"] >= 3
    # the data stops too: the direction is dead, and it goes down within the usual misses
    w.busy.clear()
    fired = w.round(3)
    assert [(e.link, e.kind) for e in fired] == [("leaf1:3-spine1:1", "down")]
    assert "leaf1:3->spine1:1" in fired[0].reason


def test_a_cut_link_goes_down_as_fast_with_the_counters_as_without() -> None:
    plain, w = Wires(), counted()
    plain.round(3)
    for x in (plain, w):
        x.cut.add(frozenset(("leaf1", "spine1")))
    rounds = []
    for x in (plain, w):
        n = 0
        while not x.events:
            x.round(1)
            n += 1
            assert n < 10
        rounds.append(n)
        assert [(e.link, e.kind) for e in x.events] == [("leaf1:3-spine1:1", "down")]
    assert rounds[0] == rounds[1] == 4
    assert w.events[0].detection_ms == plain.events[0].detection_ms
    assert 0 < w.reads <= 8  # only the suspect directions' receiving ports, twice


def test_no_counter_reading_leaves_the_probes_to_decide() -> None:
    w = counted()
    w.mon._rx_packets = lambda sw, port: None  # type: ignore[assignment]  # unreadable
    w.one_way.add(("leaf1", "spine1"))
    w.busy.add(("leaf1", "spine1"))
    fired = w.round(4)
    assert [(e.link, e.kind) for e in fired] == [("leaf1:3-spine1:1", "down")]
