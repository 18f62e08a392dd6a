"""The controller's framed JSON API over a Unix-domain socket."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icefabric.control.daemon.api import (
    MAX_FRAME,
    ApiClient,
    ApiError,
    ApiServer,
    ApiUnavailable,
    FrameError,
    RequestError,
    encode_frame,
    read_frame,
)


def _add(args: dict[str, Any]) -> Any:
    if "a" not in args or "b" not in args:
        raise RequestError("need 'a' and 'b'")
    return args["a"] + args["b"]


def _boom(args: dict[str, Any]) -> Any:
    raise ValueError("exploded")


def _not_json(args: dict[str, Any]) -> Any:
    return {1, 2}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    srv = ApiServer(tmp_path / "ctl.sock", {"add": _add, "boom": _boom, "bad": _not_json})
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_frame_roundtrip_over_socketpair() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode_frame({"op": "x", "args": {"k": [1, 2]}}))
        assert read_frame(b) == {"op": "x", "args": {"k": [1, 2]}}
        a.close()
        assert read_frame(b) is None


def test_frame_rejects_oversize_and_non_object() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("!I", MAX_FRAME + 1))
        with pytest.raises(FrameError, match="exceeds"):
            read_frame(b)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("!I", 3) + b"[1]")
        with pytest.raises(FrameError, match="JSON object"):
            read_frame(b)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("!I", 10) + b"abc")
        a.close()
        with pytest.raises(FrameError, match="closed after"):
            read_frame(b)


def test_call_ok_and_several_requests_on_one_connection(server: ApiServer) -> None:
    with ApiClient(server.path) as client:
        assert client.call("add", a=2, b=3) == 5
        assert client.call("add", a="x", b="y") == "xy"


def test_usage_and_runtime_errors_are_told_apart(server: ApiServer) -> None:
    with ApiClient(server.path) as client:
        with pytest.raises(ApiError) as exc:
            client.call("add", a=1)
        assert exc.value.kind == "usage" and "need 'a' and 'b'" in exc.value.message
        with pytest.raises(ApiError) as exc:
            client.call("nope")
        assert exc.value.kind == "usage" and "add" in exc.value.message
        with pytest.raises(ApiError) as exc:
            client.call("boom")
        assert exc.value.kind == "runtime" and "exploded" in exc.value.message
        with pytest.raises(ApiError) as exc:
            client.call("bad")
        assert exc.value.kind == "runtime"
        # the connection survives every error above
        assert client.call("add", a=1, b=1) == 2


def test_garbage_frame_gets_a_usage_error(server: ApiServer) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    with sock:
        sock.connect(str(server.path))
        sock.sendall(struct.pack("!I", 4) + b"\xff\xfe{}")
        reply = read_frame(sock)
    assert reply is not None and reply["ok"] is False and reply["error"]["kind"] == "usage"


def test_unreachable_socket_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "missing.sock"
    with pytest.raises(ApiUnavailable, match=r"missing\.sock"):
        ApiClient(path, timeout=1).call("add", a=1, b=2)


def test_stale_socket_is_replaced_and_live_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "ctl.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # file left behind, nobody listening
    first = ApiServer(path, {"add": _add})
    first.start()
    try:
        with pytest.raises(ApiUnavailable, match="already listening"):
            ApiServer(path, {"add": _add}).start()
        assert ApiClient(path).call("add", a=1, b=2) == 3
    finally:
        first.stop()
    assert not path.exists()
