"""A hostile P4Runtime client and a careless operator (issue 11, items 1, 4, 5, 6, 16, 17): includes
that read the switch's files, macro bombs, idle streams, a second switch on the same port."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeException
from test_server_fake import CPU_PORT, P4INFO_TEXT, loader

from icefabric.target.bundle import BundleError, load_device_config
from icefabric.target.cli import main
from icefabric.target.device import Device
from icefabric.target.p4.errors import P4CompileError
from icefabric.target.p4.preprocess import INCLUDE_DIR, MAX_LINE_CHARS, preprocess
from icefabric.target.server import serve
from icefabric.target.server.streams import MAX_STREAMS, MAX_STREAMS_PER_PEER
from icefabric.waiting import Deadline, poll_until

MARKER = "s3cr3t-marker-line-do-not-echo"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    p = tmp_path / "secret.txt"
    p.write_text(f"{MARKER} = 1;\nmore\n")
    return p


def _load_error(data: bytes) -> str:
    with pytest.raises((BundleError, P4CompileError)) as err:
        load_device_config(data)
    return str(err.value)


# ---------------------------------------------------------------- item 1: includes


def test_pushed_source_cannot_include_an_absolute_path(secret: Path) -> None:
    msg = _load_error(f'#include "{secret}"\n'.encode())
    assert MARKER not in msg and "cannot find include file" in msg


def test_pushed_source_cannot_include_relative_to_the_switch_cwd(
    secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(secret.parent)
    msg = _load_error(b'#include "secret.txt"\n')
    assert MARKER not in msg


def test_bundle_cannot_climb_out_with_dotdot(secret: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = secret.parent / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    bundle = {
        "format": "icefabric-p4/1",
        "main": "main.p4",
        "files": {"main.p4": '#include "../../secret.txt"\n'},
    }
    msg = _load_error(json.dumps(bundle).encode())
    assert MARKER not in msg and "bundled files" in msg


def test_angle_include_cannot_leave_the_target_include_folder(secret: Path) -> None:
    rel = os.path.relpath(secret, INCLUDE_DIR)
    assert rel.startswith("..")
    msg = _load_error(f"#include <{rel}>\n".encode())
    assert MARKER not in msg
    with pytest.raises(P4CompileError) as err:  # not from a local compile either
        preprocess(f"#include <{rel}>\n", "local.p4")
    assert MARKER not in str(err.value)


def test_bundle_still_includes_its_own_files() -> None:
    bundle = {
        "format": "icefabric-p4/1",
        "main": "main.p4",
        "files": {"main.p4": '#include "inc/x.p4"\n', "inc/x.p4": "const bit<8> X = 1;\n"},
    }
    lines = preprocess(
        bundle["files"]["main.p4"],
        "main.p4",
        files=bundle["files"],  # type: ignore[index]
    )
    assert [ln.text for ln in lines if ln.text.strip()] == ["const bit<8> X = 1;"]


# ---------------------------------------------------------------- item 6: macro bombs


@pytest.mark.timeout(60)
def test_object_macro_bomb_fails_fast() -> None:
    bomb = "#define A0 x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 40))
    with pytest.raises(P4CompileError, match="exceeds"):
        preprocess(bomb + "A39\n", "bomb.p4", files={})


@pytest.mark.timeout(60)
def test_function_macro_bomb_fails_fast() -> None:
    body = " ".join(["x"] * 64)
    src = f"#define F(x) {body}\n" + "F(" * 8 + "y" + ")" * 8 + "\n"
    with pytest.raises(P4CompileError, match="exceeds"):
        preprocess(src, "bomb.p4", files={})


@pytest.mark.timeout(60)
def test_deep_macro_argument_nesting_is_an_error_not_a_crash() -> None:
    src = "#define F(x) x\n" + "F(" * 5000 + "y" + ")" * 5000 + "\n"
    with pytest.raises(P4CompileError, match=r"nested|exceeds"):
        preprocess(src, "deep.p4", files={})


@pytest.mark.timeout(60)
def test_if_expression_bombs_are_errors() -> None:
    with pytest.raises(P4CompileError):
        preprocess("#if (1 << 2000000000) > 0\n#endif\n", "if.p4", files={})
    with pytest.raises(P4CompileError):
        preprocess("#if " + "(" * 5000 + "1" + ")" * 5000 + "\n#endif\n", "if.p4", files={})


def test_output_bound_leaves_room_for_real_programs() -> None:
    src = "#define W(x) x x x x\n" + "W(W(W(abc)))\n"
    (line,) = [ln for ln in preprocess(src, "ok.p4") if ln.text.strip()]
    assert line.text.split() == ["abc"] * 64
    assert MAX_LINE_CHARS >= 1 << 20


@pytest.fixture
def slow_switch() -> Iterator[tuple[str, Any, threading.Event, threading.Event]]:
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow_loader(data: bytes) -> Any:
        calls.append(1)
        if len(calls) > 1 or not data.endswith(b"-first"):  # the first push compiles at once
            started.set()
            release.wait(30)
        return loader(data.removesuffix(b"-first"))

    device = Device(device_id=1, cpu_port=CPU_PORT)
    server, port, service = serve(device, "127.0.0.1:0", loader=slow_loader)
    try:
        yield f"127.0.0.1:{port}", service, started, release
    finally:
        release.set()
        server.stop(0)
        service.close()


def _push(client: P4RuntimeClient, tmp_path: Path, suffix: bytes = b"") -> None:
    p4info = tmp_path / "p4info.txt"
    p4info.write_text(P4INFO_TEXT)
    cfg = tmp_path / "fake.bin"
    cfg.write_bytes(b"fake-program" + suffix)
    client.set_fwd_pipe_config(str(p4info), str(cfg))


def test_compile_runs_outside_the_service_lock(
    slow_switch: tuple[str, Any, threading.Event, threading.Event], tmp_path: Path
) -> None:
    addr, _service, started, release = slow_switch
    c = P4RuntimeClient(1, addr, (0, 1))
    _push(c, tmp_path, b"-first")
    errors: list[BaseException] = []

    def push() -> None:
        try:
            _push(c, tmp_path)
        except BaseException as exc:  # reported below
            errors.append(exc)

    t = threading.Thread(target=push, daemon=True)
    t.start()
    try:
        assert started.wait(10)
        # While the new program compiles, Read (which takes the service lock) is answered.
        ch = grpc.insecure_channel(addr)
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        req = p4runtime_pb2.ReadRequest(device_id=1)
        req.entities.add().table_entry.SetInParent()
        assert list(stub.Read(req, timeout=5))  # at least one (empty) response
        ch.close()
    finally:
        release.set()
        t.join(10)
        c.tear_down()
    assert errors == []


def test_compile_time_is_bounded(
    slow_switch: tuple[str, Any, threading.Event, threading.Event], tmp_path: Path
) -> None:
    addr, service, _started, _release = slow_switch
    service.compile_timeout_s = 0.3
    c = P4RuntimeClient(1, addr, (0, 1))
    try:
        with pytest.raises(P4RuntimeException) as err:
            _push(c, tmp_path)
        assert err.value.grpc_error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "abandoned" in err.value.grpc_error.details()
    finally:
        c.tear_down()


@pytest.mark.timeout(120)
def test_sigterm_ends_the_switch_during_a_long_compile(tmp_path: Path) -> None:
    sock = tmp_path / "p4rt.sock"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "icefabric.target.cli",
            "--device-id",
            "1",
            "--grpc-server-addr",
            f"unix:{sock}",
            "--log-console",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    channel = None
    try:
        deadline = Deadline(60)

        def listening() -> bool:
            assert proc.poll() is None
            return sock.exists()

        assert poll_until(listening, deadline.left(), 0.05)
        # A legal program big enough to compile for many seconds (about 3 MB).
        src = "#include <core.p4>\n" + "".join(
            f"const bit<32> C{i} = {i};\n" for i in range(110000)
        )
        client = P4RuntimeClient(1, f"unix:{sock}", (0, 1))
        channel = client
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1)
        req.election_id.low = 1
        req.action = req.VERIFY_AND_COMMIT
        req.config.p4_device_config = src.encode()
        threading.Thread(
            target=lambda: _quiet(lambda: client.stub.SetForwardingPipelineConfig(req)),
            daemon=True,
        ).start()
        while True:
            line = lines.get(timeout=max(deadline.left(), 0.1))
            if "compiling p4_device_config" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if channel is not None:
            _quiet(channel.tear_down)


def _quiet(fn: Any) -> None:
    try:
        fn()
    except Exception:  # the switch went away: expected here
        return


# ---------------------------------------------------------------- item 4: idle streams


def _idle_requests(stop: threading.Event) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
    stop.wait()
    return
    yield  # pragma: no cover


@pytest.mark.timeout(120)
def test_idle_streams_cannot_starve_unary_rpcs() -> None:
    device = Device(device_id=1, cpu_port=CPU_PORT)
    server, port, service = serve(device, "127.0.0.1:0", loader=loader)
    stop = threading.Event()
    channels: list[grpc.Channel] = []
    calls: list[Any] = []
    try:
        for _ in range(2 * MAX_STREAMS):  # each from its own connection (its own "client")
            ch = grpc.insecure_channel(
                f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
            )
            channels.append(ch)
            calls.append(p4runtime_pb2_grpc.P4RuntimeStub(ch).StreamChannel(_idle_requests(stop)))
        assert poll_until(lambda: sum(c.done() for c in calls) >= MAX_STREAMS, 30, 0.05), (
            "extra streams were not refused"
        )
        refused = [c for c in calls if c.done()]
        assert len(refused) == MAX_STREAMS
        assert all(c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for c in refused)
        # Unary RPCs of a new client still get through.
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        for _ in range(3):
            resp = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=5)
            assert resp.p4runtime_api_version
        req = p4runtime_pb2.ReadRequest(device_id=1)
        req.entities.add().table_entry.SetInParent()
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Read(req, timeout=5))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        ch.close()
    finally:
        stop.set()
        for c in calls:
            c.cancel()
        for ch in channels:
            ch.close()
        server.stop(0)
        service.close()


def test_streams_per_client_are_bounded() -> None:
    device = Device(device_id=1, cpu_port=CPU_PORT)
    server, port, service = serve(device, "127.0.0.1:0", loader=loader)
    stop = threading.Event()
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
    calls = [stub.StreamChannel(_idle_requests(stop)) for _ in range(MAX_STREAMS_PER_PEER + 2)]
    try:
        assert poll_until(lambda: sum(c.done() for c in calls) >= 2, 30, 0.05)
        done = [c for c in calls if c.done()]
        assert len(done) == 2
        assert all(c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for c in done)
        assert "from ipv" in done[0].details()
    finally:
        stop.set()
        for c in calls:
            c.cancel()
        ch.close()
        server.stop(0)
        service.close()


def test_stream_without_arbitration_is_closed() -> None:
    device = Device(device_id=1, cpu_port=CPU_PORT)
    server, port, service = serve(device, "127.0.0.1:0", loader=loader)
    service.arbitration_timeout_s = 0.2
    stop = threading.Event()
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = p4runtime_pb2_grpc.P4RuntimeStub(ch).StreamChannel(_idle_requests(stop))
    try:
        with pytest.raises(grpc.RpcError) as err:
            next(iter(call))
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "MasterArbitrationUpdate" in (err.value.details() or "")
    finally:
        stop.set()
        ch.close()
        server.stop(0)
        service.close()


# ---------------------------------------------------------------- item 5: one port, one switch


def test_second_switch_on_the_same_port_fails() -> None:
    device = Device(device_id=1)
    server, port, service = serve(device, "127.0.0.1:0", loader=loader)
    try:
        with pytest.raises(OSError, match="in use"):
            serve(Device(device_id=2), f"127.0.0.1:{port}", loader=loader)
    finally:
        server.stop(0)
        service.close()


def test_second_switch_on_the_same_unix_socket_fails(tmp_path: Path) -> None:
    addr = f"unix:{tmp_path / 'p4rt.sock'}"
    server, _port, service = serve(Device(device_id=1), addr, loader=loader)
    try:
        with pytest.raises(OSError, match="in use"):
            serve(Device(device_id=2), addr, loader=loader)
        ch = grpc.insecure_channel(addr)  # the first switch still serves its socket
        resp = p4runtime_pb2_grpc.P4RuntimeStub(ch).Capabilities(
            p4runtime_pb2.CapabilitiesRequest(), timeout=5
        )
        assert resp.p4runtime_api_version
        ch.close()
    finally:
        server.stop(0)
        service.close()


def test_ice_switch_cli_reports_a_taken_port(capsys: pytest.CaptureFixture[str]) -> None:
    server, port, service = serve(Device(device_id=1), "127.0.0.1:0", loader=loader)
    try:
        assert main(["--grpc-server-addr", f"127.0.0.1:{port}"]) == 1
        err = capsys.readouterr().err
        assert f"cannot listen on 127.0.0.1:{port}" in err and "in use" in err
        assert "Traceback" not in err
    finally:
        server.stop(0)
        service.close()


# ---------------------------------------------------------------- items 16, 17: the CLI


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--grpc-server-addr", "127.0.0.1:99999"], "port 0..65535"),
        (["--grpc-server-addr", "nohostport"], "HOST:PORT"),
        (["--device-id", "-1"], "--device-id -1"),
        (["--device-id", str(1 << 64)], "must be in [0, 2^64 - 1]"),
    ],
)
def test_ice_switch_rejects_bad_addresses_and_ids(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_ice_switch_rejects_a_non_utf8_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bin.p4"
    bad.write_bytes(b"\xff\xfe\x00binary")
    assert main(["--p4", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: not UTF-8" in err and "Traceback" not in err
