"""AgentServer with real AgentClients on real sockets: sessions, flows, caps, loss, refusals,
malformed frames, heartbeats, standby, TCP tokens, a backup address."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _agents import FAST, KEY1, KEY2, until

from icefabric.control.agents.auth import host_token
from icefabric.control.agents.client import AgentClient
from icefabric.control.agents.protocol import (
    Bye,
    FlowReport,
    FrameReader,
    Hello,
    Welcome,
    decode_body,
    encode,
)
from icefabric.control.agents.server import AgentServer, AgentServerError
from icefabric.control.flowkey import FlowKey


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, host: str, kind: str) -> None:
        with self.lock:
            self.items.append((host, kind))

    def kinds(self, host: str) -> list[str]:
        with self.lock:
            return [k for h, k in self.items if h == host]


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def server(tmp_path: Path, events: Events) -> Iterator[AgentServer]:
    srv = AgentServer(
        tmp_path / "agents.sock",
        heartbeat_s=0.5,
        on_event=events,
        known_host=lambda h: h.startswith("h"),
    )
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _client(
    addr: object, host: str, got: list[dict[FlowKey, float]] | None = None, **kw: object
) -> AgentClient:
    sink = got if got is not None else []
    c = AgentClient(addr, host, on_caps=sink.append, backoff=FAST, **kw)  # type: ignore[arg-type]
    c.start()
    return c


def test_flows_and_caps_over_the_real_socket(server: AgentServer, events: Events) -> None:
    assert server.unix_path is not None
    assert server.unix_path.stat().st_mode & 0o777 == 0o600
    got: list[dict[FlowKey, float]] = []
    c = _client(server.unix_path, "h1", got)
    try:
        c.report_flows(
            [
                FlowReport(job="j", flow_id="f1", key=KEY1),
                FlowReport(job="j", flow_id="f2", key=KEY2, state="pending"),
            ]
        )
        assert until(lambda: len(server.flows().get("h1", [])) == 2)
        assert events.kinds("h1")[0] == "joined" and "flows" in events.kinds("h1")
        assert server.hosts() == ["h1"]
        (sess,) = server.sessions()
        assert sess["host"] == "h1" and sess["flows"] == 2 and sess["peer"].startswith("unix pid")

        assert server.push_caps("h1", {KEY1: 4e9, KEY2: 1e9})
        assert until(lambda: got == [{KEY1: 4e9, KEY2: 1e9}])
        assert server.caps("h1") == {"h1": {KEY1: 4e9, KEY2: 1e9}}
        assert not server.push_caps("h9", {KEY1: 1.0})

        c.report_flows([FlowReport(job="j", flow_id="f1", key=KEY1, state="done")])
        assert until(lambda: [r.flow_id for r in server.flows()["h1"]] == ["f2"])
    finally:
        c.close()
    assert until(lambda: events.kinds("h1")[-1] == "lost")
    assert server.hosts() == [] and server.stats.lost == 0  # a bye is not a loss


def test_a_killed_agent_is_lost_and_re_learned_on_reconnect(
    server: AgentServer, events: Events
) -> None:
    c = _client(server.unix_path, "h1")
    try:
        c.report_flows([FlowReport(job="j", flow_id="f1", key=KEY1)])
        assert until(lambda: len(server.flows().get("h1", [])) == 1)
        # break the connection under the client (no bye): the server loses the host, the
        # client reconnects and re-reports its flows
        with c._lock:
            assert c._sock is not None
            c._sock.shutdown(socket.SHUT_RDWR)
        assert until(lambda: "lost" in events.kinds("h1"))
        assert until(lambda: events.kinds("h1").count("joined") == 2)
        assert until(lambda: [r.flow_id for r in server.flows().get("h1", [])] == ["f1"])
        assert server.stats.lost == 1 and c.stats.connects == 2
    finally:
        c.close()


def test_silent_agent_is_dropped_after_three_heartbeats(
    server: AgentServer, events: Events
) -> None:
    assert server.unix_path is not None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(server.unix_path))
    with s:
        s.sendall(encode(Hello(host="h2")))
        assert until(lambda: server.hosts() == ["h2"])
        t0 = time.monotonic()
        assert until(lambda: server.hosts() == [], timeout=5)
        assert time.monotonic() - t0 >= 1.0  # not before 3 x 0.5 s (minus the handshake)
        assert events.kinds("h2") == ["joined", "lost"] and server.stats.lost == 1


def _raw_session(path: Path, host: str) -> tuple[socket.socket, FrameReader]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    s.settimeout(5)
    s.sendall(encode(Hello(host=host)))
    reader = FrameReader()
    while True:
        for body in reader.feed(s.recv(65536)):
            msg = decode_body(body)
            assert isinstance(msg, Welcome)
            return s, reader


def test_malformed_agent_frames_are_counted_and_ignored(server: AgentServer) -> None:
    assert server.unix_path is not None
    s, _ = _raw_session(server.unix_path, "h3")
    with s:
        bad = [
            b"\xff",
            b"[1]",
            b'{"v":1,"type":"flows","flows":[{"job":"j"}]}',
            b'{"v":1,"type":"caps","caps":[]}',  # caps only go to agents
            b"[" * 5000 + b"]" * 5000,
        ]
        for body in bad:
            s.sendall(len(body).to_bytes(4, "big") + body)
        good = FlowReport(job="j", flow_id="f", key=KEY1)
        from icefabric.control.agents.protocol import Flows

        s.sendall(encode(Flows(flows=(good,))))
        assert until(lambda: server.flows().get("h3") == [good])
        assert server.stats.malformed == len(bad)
        assert server.sessions()[0]["malformed"] == len(bad)


def test_oversize_frame_closes_only_that_connection(server: AgentServer) -> None:
    assert server.unix_path is not None
    s, _ = _raw_session(server.unix_path, "h4")
    other = _client(server.unix_path, "h5")
    try:
        assert until(lambda: "h5" in server.hosts())
        with s:
            s.sendall((1 << 31).to_bytes(4, "big"))
            assert until(lambda: server.hosts() == ["h5"])
        assert other.connected
    finally:
        other.close()


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        (b'{"v":2,"type":"hello","host":"h1"}', "expected a hello"),
        (encode(Bye(reason="x"))[4:], "expected a hello first"),
        (encode(Hello(host="x9"))[4:], "no host 'x9'"),
    ],
)
def test_bad_hellos_are_refused_with_a_reason(
    server: AgentServer, first: bytes, reason: str
) -> None:
    assert server.unix_path is not None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(server.unix_path))
    s.settimeout(5)
    with s:
        s.sendall(len(first).to_bytes(4, "big") + first)
        (body,) = FrameReader().feed(s.recv(65536))
        msg = decode_body(body)
        assert isinstance(msg, Bye) and reason in msg.reason
        assert s.recv(10) == b""
    assert server.stats.refused == 1 and server.hosts() == []


SECRET = "s" * 32


def test_tcp_needs_the_token(tmp_path: Path) -> None:
    with pytest.raises(AgentServerError, match="need a token"):
        AgentServer(None, tcp="127.0.0.1:0")
    srv = AgentServer(None, tcp="127.0.0.1:0", token=SECRET, heartbeat_s=0.1)
    srv.start()
    try:
        addr = f"tcp:127.0.0.1:{srv.tcp_port}"
        bad = _client(addr, "h1", token="wrong-token-000000000")
        good = _client(addr, "h2", token=host_token(SECRET, "h2"))
        try:
            assert good.wait_connected(5)
            assert until(lambda: bad.stats.refusals >= 1)
            assert srv.hosts() == ["h2"] and not bad.connected
        finally:
            bad.close()
            good.close()
    finally:
        srv.stop()


def _raw_hello(port: int, host: str, token: str | None) -> str:
    """One hello on a fresh TCP connection; the reason of the bye it gets back."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(encode(Hello(host=host, token=token)))
        reader = FrameReader()
        while True:
            data = s.recv(65536)
            assert data, "closed without a bye"
            bodies = reader.feed(data)
            if bodies:
                msg = decode_body(bodies[0])
                assert isinstance(msg, Bye), msg
                return msg.reason


def test_an_impostor_with_another_hosts_token_is_refused_and_changes_nothing(
    tmp_path: Path, events: Events, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 26 item 1: with one shared token any holder could say hello as h2, close h2's
    session and re-key its flows. Tokens are bound to the host name now."""
    srv = AgentServer(None, tcp="127.0.0.1:0", token=SECRET, heartbeat_s=0.2, on_event=events)
    srv.start()
    try:
        port = srv.tcp_port
        assert port is not None
        h2 = _client(f"tcp:127.0.0.1:{port}", "h2", token=host_token(SECRET, "h2"))
        try:
            assert h2.wait_connected(5)
            report = FlowReport(job="j1", flow_id="j1/p1/c0/r1->r0", key=KEY1)
            h2.report_flows([report])
            assert until(lambda: [r.key for r in srv.flows("h2").get("h2", [])] == [KEY1])
            (before,) = srv.sessions()
            refused = srv.stats.refused
            events_before = list(events.items)
            caplog.set_level("WARNING", logger="icefabric.control.agents.server")
            tokens = {
                "h1's token": host_token(SECRET, "h1"),
                "no token": None,
                "the secret itself": SECRET,
                "h2's token with a byte changed": host_token(SECRET, "h2")[:-1] + "A",
            }
            for what, token in tokens.items():
                reason = _raw_hello(port, "h2", token)
                assert "bad or missing token for host 'h2'" in reason, what
            assert srv.stats.refused == refused + len(tokens)
            assert (
                sum("bad or missing token for host 'h2'" in r.message for r in caplog.records) == 4
            )
            (after,) = srv.sessions()
            assert after["session"] == before["session"] and after["peer"] == before["peer"]
            assert [r.key for r in srv.flows("h2")["h2"]] == [KEY1]  # nothing re-keyed
            assert events.items == events_before  # no join, no loss: nothing reached the owner
            assert h2.connected and srv.hosts() == ["h2"]
            assert h2.stats.refusals == 0
        finally:
            h2.close()
    finally:
        srv.stop()


def test_standby_refuses_and_the_client_moves_to_the_next_address(tmp_path: Path) -> None:
    active = {"a": False, "b": True}
    a = AgentServer(tmp_path / "a.sock", heartbeat_s=0.1, accepting=lambda: active["a"])
    b = AgentServer(tmp_path / "b.sock", heartbeat_s=0.1, accepting=lambda: active["b"])
    a.start()
    b.start()
    try:
        c = _client([tmp_path / "a.sock", tmp_path / "b.sock"], "h1")
        try:
            c.report_flows([FlowReport(job="j", flow_id="f1", key=KEY1)])
            assert until(lambda: b.hosts() == ["h1"])
            assert a.hosts() == [] and a.stats.refused >= 1
            # b goes away (its controller died), a takes over: the agent re-reports there
            active["a"] = True
            b.stop()
            assert until(lambda: [r.flow_id for r in a.flows().get("h1", [])] == ["f1"])
        finally:
            c.close()
    finally:
        a.stop()


def test_refuses_to_replace_a_live_socket_or_a_file(tmp_path: Path) -> None:
    path = tmp_path / "agents.sock"
    first = AgentServer(path)
    first.start()
    try:
        with pytest.raises(AgentServerError, match="already listens"):
            AgentServer(path).start()
    finally:
        first.stop()
    path.write_text("not a socket")
    with pytest.raises(AgentServerError, match="not a socket"):
        AgentServer(path).start()


def test_another_users_processes_are_refused_both_ways(
    server: AgentServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from icefabric.control.daemon import paths

    monkeypatch.setattr(paths, "peer_uid", lambda sock: 4242)
    monkeypatch.setattr(paths.os, "geteuid", lambda: 1000)
    c = _client(server.unix_path, "h1")
    try:
        # the client refuses the "controller" (another uid) before sending a hello
        assert until(lambda: c.stats.connect_failures >= 2)
        assert server.hosts() == [] and not c.connected
    finally:
        c.close()
    assert server.unix_path is not None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(server.unix_path))
    s.settimeout(5)
    with s:
        try:
            s.sendall(encode(Hello(host="h1")))
            assert s.recv(10) == b""  # the server closes a peer of another uid at once
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed before the hello arrived
    assert server.stats.refused >= 1 and server.hosts() == []


def test_before_its_hello_a_connection_may_only_send_small_frames(server: AgentServer) -> None:
    assert server.unix_path is not None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(server.unix_path))
    s.settimeout(5)
    with s, contextlib.suppress(ConnectionResetError, BrokenPipeError):
        s.sendall((64 * 1024).to_bytes(4, "big") + b"{" * 100)  # announces 64 KiB, no hello
        assert s.recv(10) == b""  # closed at once, nothing buffered
    assert server.stats.malformed == 1 and server.hosts() == []
