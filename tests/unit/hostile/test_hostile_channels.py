"""The hostile tier for the network surfaces (issue 26 items 6, 7, 13): agent frames a
fuzzer writes (huge integers, deep nesting, wrong types, truncation) after and before the hello,
and idle or trickling clients on the metrics endpoint. The channel must count and survive each
frame, keep serving hellos and keep the legitimate session; the endpoint must keep its threads
bounded and answer scrapes."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from icefabric.control.agents.auth import host_token
from icefabric.control.agents.client import AgentClient
from icefabric.control.agents.protocol import (
    Bye,
    FrameReader,
    Hello,
    Welcome,
    decode_body,
    encode,
)
from icefabric.control.agents.server import AgentServer
from icefabric.httpserve import serve_wsgi
from icefabric.waiting import Deadline, poll_until

SECRET = "hostile-tier-secret-0123456789"
SEED = 26


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def hostile_bodies(rng: random.Random) -> list[bytes]:
    """Frames a hostile agent sends after its hello: each must be counted and ignored."""
    huge = "9" * rng.randint(4301, 20_000)
    bodies = [
        ('{"v": 1, "type": "heartbeat", "seq": %s}' % huge).encode(),  # noqa: UP031
        ('{"v": 1, "type": "flows", "flows": [{"key": {"sport": -%s}}]}' % huge).encode(),  # noqa: UP031
        ('{"v": 1, "type": "caps", "caps": [], "more": %se5}' % huge).encode(),  # noqa: UP031
        b'{"v": true, "type": "heartbeat", "seq": 1}',
        b'{"v": 1.0, "type": "heartbeat", "seq": 1}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"v": 1, "type": "flows", "flows": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"v": 1, "type": "hello", "host": "h2", "token": null}',  # a second hello
        b'{"v": 1, "type": "flows", "flows": "x"}',
        b"\xff\xfe\x00",
        b"",
        b'{"v": 1, "type": "heartbeat", "seq": NaN}',
    ]
    for _ in range(40):  # seeded garbage and truncations of good frames
        good = json.dumps({"v": 1, "type": "heartbeat", "seq": rng.randint(0, 1 << 40)}).encode()
        cut = good[: rng.randint(0, len(good))] + bytes(rng.randrange(256) for _ in range(8))
        bodies.append(cut)
    return bodies


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[AgentServer]:
    srv = AgentServer(tmp_path / "agents.sock", tcp="127.0.0.1:0", token=SECRET, heartbeat_s=2.0)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def hello(sock: socket.socket, host: str, token: str | None) -> object:
    sock.sendall(encode(Hello(host=host, token=token)))
    reader = FrameReader()
    deadline = Deadline(5.0)
    while not deadline.expired:
        data = sock.recv(65536)
        if not data:
            return None
        bodies = reader.feed(data)
        if bodies:
            return decode_body(bodies[0])
    return None


def test_hostile_frames_after_a_hello_are_counted_and_the_channel_lives(
    channel: AgentServer,
) -> None:
    """Item 6: a 5000-digit integer after the hello killed the agent server thread; new hellos
    timed out and a stale session stayed listed for ever."""
    port = channel.tcp_port
    assert port is not None
    legit = AgentClient(
        f"tcp:127.0.0.1:{port}", "h1", token=host_token(SECRET, "h1"), on_caps=lambda c: None
    )
    legit.start()
    try:
        assert legit.wait_connected(5)
        (session,) = channel.sessions()
        rng = random.Random(SEED)
        bodies = hostile_bodies(rng)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            assert isinstance(hello(s, "h2", host_token(SECRET, "h2")), Welcome)
            before = channel.stats.malformed
            s.sendall(b"".join(frame(b) for b in bodies))
            assert poll_until(lambda: channel.stats.malformed >= before + len(bodies) - 1, 10)
            assert sorted(channel.hosts()) == ["h1", "h2"]  # the hostile session stays itself
        # the server thread is alive: a new hello on TCP and on the Unix socket still works
        assert channel.unix_path is not None
        for addr in (f"tcp:127.0.0.1:{port}", channel.unix_path):
            c = AgentClient(addr, "h3", token=host_token(SECRET, "h3"), on_caps=lambda c: None)
            c.start()
            try:
                assert c.wait_connected(5), addr
            finally:
                c.close()
        assert poll_until(lambda: "h2" not in channel.hosts(), 5)  # its loss is seen
        assert channel.sessions()[0]["session"] == session["session"] and legit.connected
    finally:
        legit.close()


@pytest.mark.parametrize("unix", [False, True])
def test_hostile_hellos_are_refused_and_change_nothing(channel: AgentServer, unix: bool) -> None:
    rng = random.Random(SEED + unix)
    legit = AgentClient(channel.unix_path, "h1", on_caps=lambda c: None)
    legit.start()
    try:
        assert legit.wait_connected(5)
        (session,) = channel.sessions()
        hellos = [b for b in hostile_bodies(rng) if b'"type": "hello"' not in b]  # Unix: valid
        for body in hellos[:20]:
            if unix:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                s.connect(str(channel.unix_path))
            else:
                s = socket.create_connection(("127.0.0.1", channel.tcp_port or 0), timeout=5)
            with s:
                s.sendall(frame(body))
                got = b""
                try:  # the channel answers a bye (or nothing) and hangs up
                    while chunk := s.recv(65536):
                        got += chunk
                except ConnectionResetError:
                    pass
                msgs = [decode_body(b) for b in FrameReader().feed(got)]
                assert all(isinstance(m, Bye) for m in msgs)
        (now,) = channel.sessions()
        now.pop("last_seen_ms")
        session.pop("last_seen_ms")
        assert now == session  # the same session, peer, flows and caps
        assert legit.connected
    finally:
        legit.close()


def test_metrics_endpoint_bounds_idle_clients() -> None:
    """Item 7: 400 idle partial requests held 400 threads after 90 s (no timeout, no cap)."""

    def app(environ: dict[str, object], start: object) -> list[bytes]:
        start("200 OK", [("Content-Type", "text/plain")])  # type: ignore[operator]
        return [b"ok\n"]

    def workers() -> int:
        return sum(t.name.startswith("http-worker") for t in threading.enumerate())

    server, thread = serve_wsgi(
        "127.0.0.1", 0, app, name="hostile-metrics", workers=4, idle_s=0.5, request_s=2.0
    )
    port = server.server_port
    idle: list[socket.socket] = []
    try:
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
            idle.append(s)
        # at most the pool's workers run, whatever the clients do
        assert workers() <= 4
        assert poll_until(lambda: server.stats.busy >= 40, 10)
        # idle clients are dropped: every connection ends (503 or closed), none hangs
        for s in idle:
            s.settimeout(5)
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            assert data == b"" or data.startswith(b"HTTP/1.0 503") or b" 408 " in data
        assert workers() <= 4
        # a trickling client is cut at the request deadline
        t = socket.create_connection(("127.0.0.1", port), timeout=10)
        t0 = time.monotonic()
        with t:
            for c in b"GET /metrics HTTP/1.1\r\n":
                try:
                    t.sendall(bytes([c]))
                except OSError:
                    break
                time.sleep(0.3)
                if time.monotonic() - t0 > 5:
                    break
            assert time.monotonic() - t0 < 5
        assert poll_until(lambda: server.stats.cut >= 1, 5)
        # and a scrape is answered
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
