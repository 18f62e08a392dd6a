"""The TCP-to-Unix relay that puts a namespaced BMv2 switch's P4Runtime on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from icefabric.topo.relay import TcpToUnixRelay


@pytest.fixture
def echo_server(tmp_path: Path) -> Iterator[Path]:
    """A Unix-socket server answering every chunk with its bytes reversed."""
    path = tmp_path / "s.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen()
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data[::-1])

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield path
    finally:
        stop.set()
        srv.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = c.recv(65536)
            assert chunk, "relay closed the connection early"
            got += chunk
        return got


def test_bytes_pass_both_ways_on_several_connections(echo_server: Path) -> None:
    port = _free_port()
    relay = TcpToUnixRelay("127.0.0.1", port, str(echo_server))
    try:
        assert _exchange(port, b"abc") == b"cba"
        assert _exchange(port, b"0123456789") == b"9876543210"
    finally:
        relay.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_missing_unix_socket_closes_the_client(tmp_path: Path) -> None:
    port = _free_port()
    relay = TcpToUnixRelay("127.0.0.1", port, str(tmp_path / "absent.sock"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.settimeout(5)
            assert c.recv(1) == b""
    finally:
        relay.close()


def test_a_dead_switch_is_reported_once_per_outage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The controller retries a killed switch again and again: one WARNING, not one per try
    (they flooded the Mininet CLI); it answers again, then a new outage warns again."""
    port = _free_port()
    path = tmp_path / "late.sock"
    relay = TcpToUnixRelay("127.0.0.1", port, str(path))

    def refused() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.settimeout(5)
            assert c.recv(1) == b""

    try:
        with caplog.at_level("DEBUG", logger="icefabric.topo.relay"):
            for _ in range(5):
                refused()
            warned = [r for r in caplog.records if r.levelname == "WARNING"]
            assert len(warned) == 1 and "cannot reach" in warned[0].getMessage()
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(str(path))
            srv.listen()
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                accepted, _ = srv.accept()
                accepted.close()
            srv.close()
            path.unlink()
            refused()
            warned = [r for r in caplog.records if r.levelname == "WARNING"]
            assert len(warned) == 2
            assert any("answers again" in r.getMessage() for r in caplog.records)
    finally:
        relay.close()
