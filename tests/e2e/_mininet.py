"""What the Mininet end-to-end tests share: the root/Mininet skip, ``ICE_TARGET``, free gRPC
ports, ``icectl`` calls, and ``icectl run`` against the network until it is primary."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from icefabric.waiting import poll_until

TARGET = os.environ.get("ICE_TARGET", "embedded")
ICECTL = str(Path(sys.executable).parent / "icectl")
BMV2_TOOLS = ("p4c-bm2-ss", "simple_switch_grpc", "simple_switch_CLI")


def require_mininet() -> None:
    """Skip the calling test module unless this is root with Mininet installed."""
    if os.geteuid() != 0:
        pytest.skip("Mininet needs root (network namespaces, veth pairs)", allow_module_level=True)
    if shutil.which("mnexec") is None:
        pytest.skip(
            "Mininet is not installed (mnexec missing); run `make setup`", allow_module_level=True
        )


def require_target_tools() -> None:
    """Skip the calling test when ``ICE_TARGET=bmv2`` and a BMv2 tool is missing."""
    if TARGET != "bmv2":
        return
    missing = [t for t in BMV2_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"ICE_TARGET=bmv2 but {', '.join(missing)} not on PATH")


def free_port_base(count: int) -> int:
    """The first of ``count`` consecutive free TCP ports on loopback (the switches' gRPC)."""
    rng = random.Random(os.getpid())
    for _ in range(50):
        base = rng.randrange(20000, 40000)
        if all(_free(port) for port in range(base, base + count)):
            return base
    raise RuntimeError("no free block of TCP ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def icectl_json(sock: Path, *args: str) -> Any:
    """``icectl --socket SOCK ARGS --json``, which must succeed, parsed."""
    out = subprocess.run(
        [ICECTL, "--socket", str(sock), *args, "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def target_args() -> list[str]:
    """``icectl run`` options for ``ICE_TARGET``: BMv2 takes ice.p4 as p4c-bm2-ss builds it
    (the experiment engine's build cache, compiled when missing)."""
    args = ["--target", TARGET]
    if TARGET == "bmv2":
        from icefabric.p4src import ICE_P4
        from icefabric.target.bmv2 import build_pipeline

        bmv2_json, p4info = build_pipeline(ICE_P4)
        args += ["--bmv2-json", str(bmv2_json), "--p4info", str(p4info)]
    return args


@contextmanager
def controller(run_args: list[str], sock: Path, log_path: Path) -> Iterator[None]:
    """``icectl run --socket SOCK RUN_ARGS``, its output in ``log_path``, from the moment it is
    primary until the block ends (then terminated)."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [ICECTL, "run", "--socket", str(sock), *run_args],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:

            def primary() -> bool:
                st = subprocess.run(
                    [ICECTL, "--socket", str(sock), "status", "--json"],
                    capture_output=True,
                    text=True,
                )
                if st.returncode == 0 and json.loads(st.stdout).get("role") == "primary":
                    return True
                assert proc.poll() is None, log_path.read_text()
                return False

            assert poll_until(primary, 90, 0.2), "controller did not become primary in time"
            yield
        finally:
            proc.terminate()
            proc.wait(timeout=20)
