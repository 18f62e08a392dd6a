"""AgentClient against a scripted controller on a real Unix-domain socket: handshake, flow
snapshots after every reconnect, caps, malformed frames ignored, backoff."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _agents import FAST, KEY1, KEY2, until

from icefabric.control.agents.client import AgentClient, Backoff
from icefabric.control.agents.protocol import (
    Bye,
    Caps,
    FlowReport,
    Flows,
    FrameReader,
    Hello,
    Message,
    Welcome,
    decode_body,
    encode,
)
from icefabric.control.flowkey import FlowKey


class FakeController:
    """Accepts agents one at a time and records what they send; the test scripts replies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.conn: socket.socket | None = None
        self.received: list[Message] = []
        self.sessions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        self.listener.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            reader = FrameReader()
            conn.settimeout(0.05)
            self.conn = conn
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    break
                if not data:
                    break
                for body in reader.feed(data):
                    msg = decode_body(body)
                    self.received.append(msg)
                    if isinstance(msg, Hello):
                        self.sessions += 1
                        conn.sendall(encode(Welcome(heartbeat_s=1.0, session=self.sessions)))
            conn.close()

    def send(self, data: bytes) -> None:
        assert self.conn is not None
        self.conn.sendall(data)

    def drop(self) -> None:
        """Close the current connection (the agent must reconnect)."""
        assert self.conn is not None
        self.conn.shutdown(socket.SHUT_RDWR)

    def flows_messages(self) -> list[Flows]:
        return [m for m in self.received if isinstance(m, Flows)]

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        self._thread.join(2)


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[FakeController]:
    c = FakeController(tmp_path / "agents.sock")
    try:
        yield c
    finally:
        c.close()


def test_client_reports_flows_receives_caps_and_resends_after_reconnect(
    ctl: FakeController,
) -> None:
    got: list[dict[FlowKey, float]] = []
    client = AgentClient(ctl.path, "h1", on_caps=got.append, backoff=FAST)
    client.report_flows([FlowReport(job="j", flow_id="f1", key=KEY1)])  # before connecting
    client.start()
    try:
        assert client.wait_connected(5)
        assert until(lambda: len(ctl.flows_messages()) >= 1)
        hello = ctl.received[0]
        assert isinstance(hello, Hello) and hello.host == "h1" and hello.token is None
        snap = ctl.flows_messages()[0]
        assert snap.replace and [f.flow_id for f in snap.flows] == ["f1"]
        assert client.heartbeat_s == 1.0 and client.session == 1

        client.report_flows([FlowReport(job="j", flow_id="f2", key=KEY2)])
        assert until(lambda: len(ctl.flows_messages()) >= 2)
        upd = ctl.flows_messages()[1]
        assert not upd.replace and [f.flow_id for f in upd.flows] == ["f2"]

        # a cap set in two frames is delivered once, complete
        ctl.send(encode(Caps(caps={KEY1: 1e9}, more=True)) + encode(Caps(caps={KEY2: 2e9})))
        assert until(lambda: len(got) == 1)
        assert got[0] == {KEY1: 1e9, KEY2: 2e9} and client.caps() == got[0]

        # heartbeats flow while idle
        assert until(lambda: any(m.type == "heartbeat" for m in ctl.received))

        client.report_flows([FlowReport(job="j", flow_id="f1", key=KEY1, state="done")])
        ctl.drop()
        assert until(lambda: ctl.sessions == 2)
        assert until(lambda: any(m.replace for m in ctl.flows_messages()[2:]))
        resent = next(m for m in ctl.flows_messages()[2:] if m.replace)
        assert [f.flow_id for f in resent.flows] == ["f2"]  # the done flow is not re-reported
        assert client.stats.connects == 2
    finally:
        client.close()
    assert isinstance(ctl.received[-1], Bye) or until(lambda: isinstance(ctl.received[-1], Bye))


def test_malformed_frames_from_the_controller_are_counted_and_ignored(
    ctl: FakeController,
) -> None:
    got: list[dict[FlowKey, float]] = []
    client = AgentClient(ctl.path, "h1", on_caps=got.append, backoff=FAST)
    client.start()
    try:
        assert client.wait_connected(5)
        bad = [b"\xff", b"[]", b'{"v":1,"type":"caps","caps":[{"key":{},"bps":1}]}', b"{"]
        for body in bad:
            ctl.send(len(body).to_bytes(4, "big") + body)
        ctl.send(encode(Caps(caps={KEY1: 5e8})))
        assert until(lambda: got == [{KEY1: 5e8}])
        assert client.stats.malformed == len(bad)
        assert client.connected and client.stats.connects == 1
    finally:
        client.close()


def test_a_failing_caps_callback_does_not_kill_the_channel(ctl: FakeController) -> None:
    calls: list[int] = []

    def boom(caps: dict[FlowKey, float]) -> None:
        calls.append(len(caps))
        raise RuntimeError("agent bug")

    client = AgentClient(ctl.path, "h1", on_caps=boom, backoff=FAST)
    client.start()
    try:
        assert client.wait_connected(5)
        ctl.send(encode(Caps(caps={KEY1: 1.0})) + encode(Caps(caps={})))
        assert until(lambda: calls == [1, 0])
        assert client.stats.callback_errors == 2 and client.connected
    finally:
        client.close()


def test_client_retries_until_the_controller_appears(tmp_path: Path) -> None:
    path = tmp_path / "late.sock"
    client = AgentClient(path, "h1", on_caps=lambda c: None, backoff=FAST)
    client.start()
    try:
        assert until(lambda: client.stats.connect_failures >= 3)
        assert not client.connected
        late = FakeController(path)
        try:
            assert client.wait_connected(5)
        finally:
            late.close()
    finally:
        client.close()


def test_refusal_is_counted_and_retried(tmp_path: Path) -> None:
    path = tmp_path / "refuse.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    stop = threading.Event()

    def refuse() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(encode(Bye(reason="bad token")))

    t = threading.Thread(target=refuse, daemon=True)
    t.start()
    client = AgentClient(path, "h1", on_caps=lambda c: None, backoff=FAST)
    client.start()
    try:
        assert until(lambda: client.stats.refusals >= 2)
        assert not client.connected
    finally:
        client.close()
        stop.set()
        listener.close()
        t.join(2)


def test_backoff_grows_to_its_bound_with_bounded_jitter() -> None:
    b = Backoff(initial_s=0.1, factor=2.0, max_s=1.0, jitter=0.25)
    rng = random.Random(1)
    delays = [b.delay(i, rng) for i in range(8)]
    for i, d in enumerate(delays):
        base = min(1.0, 0.1 * 2**i)
        assert 0.75 * base <= d <= 1.25 * base
    assert Backoff(jitter=0).delay(1000, rng) == Backoff().max_s


def test_caps_in_the_same_read_as_the_welcome_are_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "eager.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    done = threading.Event()

    def eager() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)  # the hello
            conn.sendall(encode(Welcome(heartbeat_s=1.0)) + encode(Caps(caps={KEY1: 7e9})))
            done.wait(10)

    t = threading.Thread(target=eager, daemon=True)
    t.start()
    got: list[dict[FlowKey, float]] = []
    client = AgentClient(path, "h1", on_caps=got.append, backoff=FAST)
    client.start()
    try:
        assert until(lambda: got == [{KEY1: 7e9}])
    finally:
        done.set()
        client.close()
        listener.close()
        t.join(2)
