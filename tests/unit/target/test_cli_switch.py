"""ice-switch command line: options, errors, exit codes, a subprocess serving P4Runtime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from icefabric.target.bench import PROGRAM
from icefabric.target.cli import load, main
from icefabric.target.device import Device
from icefabric.target.server import serve
from icefabric.waiting import Deadline

TABLES = {"MyIngress.port_vrf", "MyIngress.routes", "MyIngress.nhops"}


def test_p4info_out_writes_and_exits(tmp_path: Path) -> None:
    out = tmp_path / "p4info.txt"
    assert main(["--p4", str(PROGRAM), "--p4info-out", str(out)]) == 0
    assert 'name: "MyIngress.routes"' in out.read_text()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["-i", "veth1"], 2, "expected PORT@IFACE"),
        (["-i", "600@veth1"], 2, "port must be in"),
        (["-i", "1@a", "-i", "1@b"], 2, "given twice"),
        (["--p4info-out", "x.txt"], 2, "needs a program"),
        (["--p4", "nonexistent.p4"], 2, "no such file"),
        (["--p4", "prog.json"], 2, "BMv2 JSON is not supported"),
        (["--queue-rate", "x:y"], 2, "expected [PORT:]NUMBER"),
        (["--priority-queues", "9"], 2, "--priority-queues 9: must be in [1, 8]"),
        (["--priority-queues", "0"], 2, "must be in [1, 8]"),
        (["--queue-priority-rate", "1:7"], 2, "expected PORT:PRIORITY:PPS"),
        (["--priority-queues", "8", "--queue-priority-rate", "1:8:100"], 2, "priority 0..7"),
        (["-i", "1@ice-nosuch0"], 1, "cannot open interface ice-nosuch0"),
    ],
)
def test_usage_errors(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == code
    assert message in capsys.readouterr().err


def test_compile_error_is_reported_with_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.p4"
    bad.write_text("control X() { apply { x = 1 } }\n")
    assert main(["--p4", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1:" in err and "Traceback" not in err


def test_subprocess_serves_p4runtime_and_stops_on_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "p4rt.sock"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "icefabric.target.cli",
            "--p4",
            str(PROGRAM),
            "--device-id",
            "3",
            "--cpu-port",
            "255",
            "--grpc-server-addr",
            f"unix:{sock}",
            "--queue-rate",
            "2:1000",
            "--log-console",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        channel = grpc.insecure_channel(f"unix:{sock}")
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        deadline = Deadline(120)  # generous: a loaded host starts Python slowly
        while True:
            try:
                resp = stub.GetForwardingPipelineConfig(
                    p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=3), timeout=10
                )
                break
            except grpc.RpcError:
                if deadline.expired or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        # the first answer already has the program (committed before the server takes calls)
        assert {t.preamble.name for t in resp.config.p4info.tables} == TABLES
        channel.close()
        proc.send_signal(signal.SIGTERM)
        # communicate, not wait: the switch logs to a pipe that must be drained while it exits
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0
        assert "shutting down" in err
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def test_serve_commits_the_program_before_the_first_call() -> None:
    device = Device(device_id=3)
    server, port, _ = serve(device, "127.0.0.1:0", program=load(PROGRAM, []), device_config=b"x")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            resp = stub.GetForwardingPipelineConfig(
                p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=3),
                timeout=60,
                wait_for_ready=True,
            )
        assert {t.preamble.name for t in resp.config.p4info.tables} == TABLES
        assert resp.config.p4_device_config == b"x"
    finally:
        server.stop(0)
        device.stop()
