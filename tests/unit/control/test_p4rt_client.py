"""SwitchConnection against a running P4Runtime server: the fake one, and the embedded target.

Every test that takes `backend` runs twice: against test_p4rt_fakeserver.FakeSwitch (always
there) and against the embedded switch (skipped, naming what is missing, until it serves).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from icefabric.control.p4rt import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSessionEntry,
    ConnectionEvent,
    Entity,
    FabricError,
    MulticastGroupEntry,
    P4InfoIndex,
    P4RuntimeError,
    PacketIn,
    PipelineConfig,
    ResyncSummary,
    SwitchConnection,
    SwitchPool,
    SwitchUnavailableError,
    TableEntry,
    Update,
)
from icefabric.control.p4rt.resync import key_and_value
from icefabric.waiting import Deadline, poll_until

# the sibling test modules hold the fake server and the embedded-switch starter; make them
# importable whatever pytest's import mode or package layout of tests/ is
sys.path.insert(0, str(Path(__file__).parent))
from test_p4rt_fakeserver import FakeSwitch
from test_p4rt_live_target import start_embedded_switch

HERE = Path(__file__).parent
FIXTURE = HERE / "p4" / "l3_fixture.p4info.txtpb"
PROGRAM = HERE / "p4" / "l3.p4"


@dataclass
class Backend:
    """A switch to test against: address, pipeline to push, restart (state lost), stop."""

    kind: str
    address: str
    device_id: int
    pipeline: PipelineConfig
    restart: Callable[[], None]
    stop: Callable[[], None]
    fake: FakeSwitch | None = None


def _fake_backend_pipeline() -> PipelineConfig:
    return PipelineConfig(
        p4info=P4InfoIndex.load(FIXTURE).p4info, device_config=b"fake device config", cookie=7
    )


def _fake_backend() -> Backend:
    sw = FakeSwitch(device_id=1).start()
    pipeline = _fake_backend_pipeline()

    def restart() -> None:
        sw.stop()
        sw.start(fresh=True)

    return Backend("fake", sw.address, 1, pipeline, restart, sw.stop, fake=sw)


@pytest.fixture(params=["fake", "embedded"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "fake":
        b = _fake_backend()
    else:
        live = start_embedded_switch(PROGRAM, device_id=1)  # skips with the reason
        b = Backend("embedded", live.address, 1, live.pipeline, live.restart, live.stop, fake=None)
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def conns() -> Iterator[list[SwitchConnection]]:
    """Connections a test opens; all closed at the end."""
    opened: list[SwitchConnection] = []
    try:
        yield opened
    finally:
        for c in opened:
            c.close()


def connect(
    backend: Backend, conns: list[SwitchConnection], election_id: int = 10, **kw: object
) -> SwitchConnection:
    conn = SwitchConnection(
        f"sw-{election_id}",
        backend.address,
        device_id=backend.device_id,
        election_id=election_id,
        backoff_initial=0.05,
        backoff_max=0.5,
        **kw,  # type: ignore[arg-type]
    )
    conns.append(conn)
    return conn.connect(timeout=10)


def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll predicate until true or the deadline passes."""
    return poll_until(predicate, timeout, 0.02)


def route(prefix: str, port: int, dmac: int = 0x0A) -> TableEntry:
    return TableEntry(
        table="MyIngress.ipv4_lpm",
        match={"hdr.ipv4.dstAddr": prefix},
        action="MyIngress.set_nhop",
        params={"dmac": dmac, "port": port},
    )


def canon(entities: Iterable[Entity], p4info: P4InfoIndex) -> set[tuple[object, bytes]]:
    return {key_and_value(e, p4info) for e in entities}


# -- connection, pipeline ----------------------------------------------------------------------
def test_connect_push_pipeline_and_read_it_back(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    assert sw.is_connected and sw.is_primary and sw.primary_election_id == 10
    assert sw.capabilities().startswith("1.")
    sw.set_pipeline(backend.pipeline)
    assert sw.p4info.table("MyIngress.ipv4_lpm").field("hdr.ipv4.dstAddr").bitwidth == 32
    got = sw.get_pipeline()
    assert got.p4info == backend.pipeline.p4info
    assert got.cookie == backend.pipeline.cookie
    # a second connection learns the P4Info from the switch on connect
    other = connect(backend, conns, election_id=5)
    assert other.has_p4info and other.p4info.table("MyIngress.acl").needs_priority


def test_connect_without_server_fails_by_the_deadline() -> None:
    conn = SwitchConnection("nowhere", "127.0.0.1:1", connect_timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(
        SwitchUnavailableError, match=r"nowhere: no P4Runtime server at 127\.0\.0\.1:1"
    ):
        conn.connect()
    assert time.monotonic() - t0 < 3
    assert not conn.is_connected


def test_wrong_device_id_fails_arbitration(backend: Backend) -> None:
    conn = SwitchConnection("bad", backend.address, device_id=99, reconnect=False)
    with pytest.raises(SwitchUnavailableError, match="failed arbitration"):
        conn.connect(timeout=5)
    conn.close()


# -- writes and reads --------------------------------------------------------------------------
def test_insert_read_modify_delete(backend: Backend, conns: list[SwitchConnection]) -> None:
    sw = connect(backend, conns)
    sw.set_pipeline(backend.pipeline)
    entries = [route(f"10.0.{i}.0/24", port=i + 1) for i in range(5)]
    assert sw.insert(entries) == 5
    got = sw.read_table("MyIngress.ipv4_lpm")
    assert canon(got, sw.p4info) == canon(entries, sw.p4info)
    # one exact read
    one = sw.read(TableEntry(table="MyIngress.ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.3.0/24"}))
    assert len(one) == 1 and isinstance(one[0], TableEntry) and one[0].params["port"] == 4
    sw.modify(route("10.0.3.0/24", port=9))
    one = sw.read(TableEntry(table="MyIngress.ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.3.0/24"}))
    assert isinstance(one[0], TableEntry) and one[0].params == {"dmac": 0x0A, "port": 9}
    sw.delete(route("10.0.3.0/24", port=9))
    assert len(sw.read_table("MyIngress.ipv4_lpm")) == 4
    acl = TableEntry(
        table="MyIngress.acl",
        match={
            "hdr.ipv4.srcAddr": ("10.1.0.0", "255.255.0.0"),
            "hdr.ipv4.protocol": 6,
            "hdr.tcp.dstPort": (4791, 4791),
        },
        action="MyIngress.to_cpu",
        priority=5,
    )
    sw.insert(acl)
    everything = sw.read(TableEntry())  # wildcard over every table
    tables = sorted({e.table for e in everything if isinstance(e, TableEntry)})
    assert tables == ["MyIngress.acl", "MyIngress.ipv4_lpm"]
    assert len(everything) == 5


def test_write_errors_carry_per_update_details(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns, max_batch=2)
    sw.set_pipeline(backend.pipeline)
    sw.insert(route("10.0.0.0/8", port=1))
    batch = [
        Update("INSERT", route("10.1.0.0/16", port=2)),
        Update("INSERT", route("10.2.0.0/16", port=2)),
        Update("INSERT", route("10.0.0.0/8", port=3)),  # exists -> ALREADY_EXISTS
        Update("INSERT", route("10.3.0.0/16", port=2)),
        Update("DELETE", route("192.168.0.0/16", port=1)),  # missing -> NOT_FOUND
    ]
    with pytest.raises(P4RuntimeError) as info:
        sw.write(batch)
    err = info.value
    assert err.__cause__ is not None and isinstance(err.__cause__, grpc.RpcError)
    assert [(d.index, d.code) for d in err.details] == [
        (2, grpc.StatusCode.ALREADY_EXISTS),
        (4, grpc.StatusCode.NOT_FOUND),
    ]
    assert all(d.table == "MyIngress.ipv4_lpm" for d in err.details)
    assert "INSERT table_entry MyIngress.ipv4_lpm" in err.details[0].entity
    assert err.tables == ["MyIngress.ipv4_lpm"]
    assert "sw-10" in str(err) and "update #2" in str(err)
    # the good updates of the batch went in
    assert len(sw.read_table("MyIngress.ipv4_lpm")) == 4


def test_backup_cannot_write_and_takes_over_when_primary_dies(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    primary = connect(backend, conns, election_id=20)
    primary.set_pipeline(backend.pipeline)
    backup = connect(backend, conns, election_id=10)
    events: list[object] = []
    backup.on("arbitration", events.append)
    assert primary.is_primary and not backup.is_primary
    assert backup.primary_election_id == 20
    with pytest.raises(P4RuntimeError) as info:
        backup.insert(route("10.9.0.0/16", port=1))
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
    primary.insert(route("10.8.0.0/16", port=1))
    # the primary dies: its stream closes; the switch promotes the backup
    primary.close()
    assert backup.wait_primary(timeout=5)
    assert backup.primary_election_id == 10
    assert any(getattr(e, "is_primary", False) for e in events)
    backup.insert(route("10.9.0.0/16", port=1))
    assert len(backup.read_table("MyIngress.ipv4_lpm")) == 2


def test_higher_election_id_preempts_primary(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    first = connect(backend, conns, election_id=10)
    assert first.is_primary
    second = connect(backend, conns, election_id=30)
    assert second.is_primary
    assert eventually(lambda: not first.is_primary)
    assert first.primary_election_id == 30


def test_action_profiles_members_groups_and_indirect_entries(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    sw.set_pipeline(backend.pipeline)
    members = [
        ActionProfileMember(
            action_profile="MyIngress.ecmp_selector",
            member_id=i,
            action="MyIngress.set_nhop",
            params={"dmac": i, "port": i},
        )
        for i in (1, 2, 3)
    ]
    group = ActionProfileGroup(
        action_profile="MyIngress.ecmp_selector", group_id=1, members=[1, 2, 3]
    )
    entry = TableEntry(
        table="MyIngress.ecmp_group", match={"hdr.ipv4.dstAddr": "10.0.0.9"}, group_id=1
    )
    sw.insert(members)
    sw.insert(group)
    sw.insert(entry)
    got = sw.read(
        [
            ActionProfileMember(action_profile="MyIngress.ecmp_selector"),
            ActionProfileGroup(action_profile="MyIngress.ecmp_selector"),
        ]
    )
    assert canon(got, sw.p4info) == canon([*members, group], sw.p4info)
    (read_entry,) = sw.read_table("MyIngress.ecmp_group")
    assert read_entry.group_id == 1


def test_multicast_groups_and_clone_sessions(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    sw.set_pipeline(backend.pipeline)
    mc = MulticastGroupEntry(multicast_group_id=1, replicas=[1, 2, (3, 1)])
    cs = CloneSessionEntry(session_id=5, replicas=[255])
    sw.insert([mc, cs])
    got = sw.read([MulticastGroupEntry(), CloneSessionEntry()])
    assert canon(got, sw.p4info) == canon([mc, cs], sw.p4info)
    sw.modify(MulticastGroupEntry(multicast_group_id=1, replicas=[4]))
    (g,) = sw.read(MulticastGroupEntry(multicast_group_id=1))
    assert isinstance(g, MulticastGroupEntry) and [r.port for r in g.replicas] == [4]  # type: ignore[union-attr]
    sw.delete(cs)
    assert sw.read(CloneSessionEntry()) == []


def test_packet_out_comes_back_as_packet_in(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    sw.set_pipeline(backend.pipeline)
    frame = bytes.fromhex("ffffffffffff02000000000188b5") + b"ice-test" * 4
    sw.packet_out(frame, egress_port=255)
    pin = sw.receive("packet", timeout=5)
    assert isinstance(pin, PacketIn)
    assert pin.payload == frame
    assert pin.metadata["ingress_port"] == 255


# -- failure handling: reconnect and resync ----------------------------------------------------
def test_reconnect_after_switch_restart_then_resync_writes_only_the_difference(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    events: list[ConnectionEvent] = []
    sw.on("connection", events.append)
    sw.set_pipeline(backend.pipeline)
    desired: list[Entity] = [route(f"10.{i}.0.0/16", port=1 + i % 4) for i in range(8)]
    desired += [
        ActionProfileMember(
            action_profile="MyIngress.ecmp_selector",
            member_id=1,
            action="MyIngress.set_nhop",
            params={"dmac": 1, "port": 1},
        ),
        ActionProfileGroup(action_profile="MyIngress.ecmp_selector", group_id=1, members=[1]),
        TableEntry(
            table="MyIngress.ecmp_group", match={"hdr.ipv4.dstAddr": "10.0.0.1"}, group_id=1
        ),
        MulticastGroupEntry(multicast_group_id=1, replicas=[1, 2]),
        CloneSessionEntry(session_id=5, replicas=[255]),
    ]
    first = sw.resync(desired)
    assert (first.inserted, first.modified, first.deleted) == (len(desired), 0, 0)

    assert not sw.ensure_pipeline(backend.pipeline)  # already running: not pushed again
    backend.restart()  # the switch comes back empty, on the same address
    assert sw.wait_connected(timeout=15, min_sessions=2), "no reconnection after the restart"
    assert sw.is_primary
    assert [e.connected for e in events][-2:] == [False, True]
    assert sw.ensure_pipeline(backend.pipeline)
    again = sw.resync(desired)
    assert again.inserted == len(desired) and again.writes == len(desired)

    # the installed state drifts: one route changed, one extra, one missing
    sw.modify(route("10.0.0.0/16", port=3, dmac=0xBAD))
    sw.insert(route("172.16.0.0/12", port=2))
    sw.delete(route("10.7.0.0/16", port=4))
    applied_before = len(backend.fake.servicer.applied) if backend.fake else 0
    summary = sw.resync(desired)
    assert (summary.inserted, summary.modified, summary.deleted) == (1, 1, 1)
    assert summary.unchanged == len(desired) - 2
    assert summary.by_kind["table_entry"]["deleted"] == 1
    if backend.fake is not None:  # the switch saw exactly three updates
        assert len(backend.fake.servicer.applied) - applied_before == 3
    installed = sw.read([TableEntry(table="MyIngress.ipv4_lpm"), MulticastGroupEntry()])
    assert canon(installed, sw.p4info) == canon(
        [
            e
            for e in desired
            if isinstance(e, MulticastGroupEntry)
            or (isinstance(e, TableEntry) and e.table == "MyIngress.ipv4_lpm")
        ],
        sw.p4info,
    )
    assert sw.resync(desired).writes == 0
    dry = sw.resync(desired[:-1], dry_run=True)
    assert dry.deleted == 1 and dry.dry_run
    assert sw.resync(desired).writes == 0  # the dry run wrote nothing


def test_resync_touched_scope_leaves_other_tables_alone(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    sw.set_pipeline(backend.pipeline)
    acl = TableEntry(
        table="MyIngress.acl", match={"hdr.ipv4.protocol": 17}, action="MyIngress.drop", priority=1
    )
    sw.insert(acl)
    summary = sw.resync([route("10.0.0.0/8", port=1)], scope="touched")
    assert (summary.inserted, summary.deleted) == (1, 0)
    assert len(sw.read_table("MyIngress.acl")) == 1
    full = sw.resync([route("10.0.0.0/8", port=1)])
    assert full.deleted == 1 and sw.read_table("MyIngress.acl") == []


# -- many switches -----------------------------------------------------------------------------
def test_switch_pool_connects_all_in_parallel_and_names_failures() -> None:
    switches = [FakeSwitch(device_id=1).start() for _ in range(3)]
    try:
        pool = SwitchPool(
            SwitchConnection(f"leaf{i}", s.address, device_id=1, election_id=5)
            for i, s in enumerate(switches)
        )
        with pool:
            assert sorted(pool) == ["leaf0", "leaf1", "leaf2"]
            assert pool.primaries() == ["leaf0", "leaf1", "leaf2"]
            p4info = P4InfoIndex.load(FIXTURE).p4info
            cfg = PipelineConfig(p4info=p4info, device_config=b"x")
            pool.run_all(lambda c: c.set_pipeline(cfg), operation="push")
            counts = pool.run_all(lambda c: c.resync([route("10.0.0.0/8", port=1)]).inserted)
            assert counts == {"leaf0": 1, "leaf1": 1, "leaf2": 1}
            with pytest.raises(KeyError, match=r"no switch 'spine9'.*leaf0"):
                pool["spine9"]
        assert not any(c.is_connected for c in pool.values())
        bad = SwitchPool(
            [
                SwitchConnection("ok", switches[0].address, device_id=1, connect_timeout=5),
                SwitchConnection("dead", "127.0.0.1:1", connect_timeout=0.3),
            ]
        )
        with pytest.raises(FabricError, match="dead: dead: no P4Runtime server") as info:
            bad.connect_all()
        assert list(info.value.errors) == ["dead"]
        bad.close_all()
    finally:
        for s in switches:
            s.stop()


def test_concurrent_writers_and_packet_outs_share_one_connection(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    sw = connect(backend, conns)
    sw.set_pipeline(backend.pipeline)
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(25):
                sw.insert(route(f"10.{t}.{i}.0/24", port=1 + t))
                sw.packet_out(bytes([t, i]) * 20, egress_port=255)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert errors == []
    assert len(sw.read_table("MyIngress.ipv4_lpm")) == 100
    wanted = {bytes([t, i]) * 20 for t in range(4) for i in range(25)}
    payloads: set[bytes] = set()
    deadline = Deadline(10.0)
    while payloads != wanted and not deadline.expired:
        pin = sw.receive("packet", timeout=0.5)
        if pin is not None:
            payloads.add(pin.payload)
    assert payloads == wanted
    assert sw.receive("packet", timeout=0.05) is None  # each packet came back once


def test_backup_reclaims_primary_when_the_switch_reports_no_primary(
    conns: list[SwitchConnection],
) -> None:
    """Servers that answer NOT_FOUND when the primary leaves: the backup claims the role."""
    sw = FakeSwitch(device_id=1, auto_promote=False).start()
    try:
        b = Backend("fake", sw.address, 1, _fake_backend_pipeline(), sw.stop, sw.stop, fake=sw)
        primary = connect(b, conns, election_id=20)
        backup = connect(b, conns, election_id=10)
        assert primary.is_primary and not backup.is_primary
        primary.close()
        assert backup.wait_primary(timeout=5)
        backup.set_pipeline(b.pipeline)
        backup.insert(route("10.0.0.0/8", port=1))
    finally:
        sw.stop()


def test_reconnect_back_off_is_bounded(conns: list[SwitchConnection]) -> None:
    sw = FakeSwitch(device_id=1).start()
    try:
        b = Backend("fake", sw.address, 1, _fake_backend_pipeline(), sw.stop, sw.stop, fake=sw)
        conn = connect(b, conns)  # back-off 0.05 s doubling, capped at 0.5 s
        sw.stop()
        # refused attempts at 0.05, 0.1, 0.2, 0.4, 0.5, 0.5 ... seconds
        assert eventually(lambda: conn.stream_failures >= 6, timeout=10)
        assert not conn.is_connected and not conn.is_primary
        sw.start()
        t0 = time.monotonic()
        assert conn.wait_connected(timeout=5, min_sessions=2)
        assert time.monotonic() - t0 < 0.5 + 1.0  # the cap plus connection set-up
        assert conn.is_primary
    finally:
        sw.stop()


def test_constructor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="election_id must be in"):
        SwitchConnection("x", "127.0.0.1:1", election_id=1 << 128)
    with pytest.raises(ValueError, match="max_batch must be >= 1"):
        SwitchConnection("x", "127.0.0.1:1", max_batch=0)
    with pytest.raises(SwitchUnavailableError, match="x: not connected"):
        SwitchConnection("x", "127.0.0.1:1").packet_out(b"")


PRIMARY_SCRIPT = """
import sys, threading
from icefabric.control.p4rt import SwitchConnection
conn = SwitchConnection("proc", sys.argv[1], device_id=int(sys.argv[2]), election_id=50)
conn.connect(timeout=10)
print("primary" if conn.is_primary else "backup", flush=True)
threading.Event().wait(60)
"""


def test_backup_takes_over_when_the_primary_process_is_killed(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    backup = connect(backend, conns, election_id=10)
    proc = subprocess.Popen(
        [sys.executable, "-c", PRIMARY_SCRIPT, backend.address, str(backend.device_id)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "primary"
        assert eventually(lambda: backup.primary_election_id == 50)
        assert not backup.is_primary
        proc.send_signal(signal.SIGKILL)  # no goodbye: the TCP connection just dies
        proc.wait(10)
        assert backup.wait_primary(timeout=10)
        backup.set_pipeline(backend.pipeline)
        backup.insert(route("10.0.0.0/8", port=1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_auto_restore_after_restart_and_on_takeover(
    backend: Backend, conns: list[SwitchConnection]
) -> None:
    desired: list[Entity] = [route(f"10.{i}.0.0/16", port=1) for i in range(5)]
    primary = connect(backend, conns, election_id=20)
    backup = connect(backend, conns, election_id=10)
    primary.set_pipeline(backend.pipeline)
    primary.insert(desired)
    outcomes: list[object] = []
    restorer = primary.restore_on_reconnect(lambda: desired, pipeline=backend.pipeline)
    standby = backup.restore_on_reconnect(lambda: desired, on_done=outcomes.append)
    backend.restart()  # both streams drop; the switch comes back empty
    assert restorer.wait_runs(1, timeout=15), "no restore after the restart"
    assert isinstance(restorer.last, ResyncSummary), restorer.last
    assert restorer.last.inserted == 5
    assert canon(primary.read_table("MyIngress.ipv4_lpm"), primary.p4info) == canon(
        desired, primary.p4info
    )
    # The primary dies; the backup takes over and finds everything in place. A run the backup
    # started while it was briefly alone after the restart may still end (refused: not primary),
    # so wait for the takeover's run: the first one that succeeds after the close.
    primary.close()
    after = len(outcomes)
    deadline = Deadline(10.0)
    while not any(isinstance(o, ResyncSummary) for o in outcomes[after:]):
        assert not deadline.expired, f"no successful restore after takeover: {outcomes}"
        standby.wait_runs(standby.runs + 1, timeout=0.5)
    done = [o for o in outcomes[after:] if isinstance(o, ResyncSummary)]
    assert done[0].writes == 0
    assert backup.is_primary
