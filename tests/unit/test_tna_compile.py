"""The TNA program (p4src/tna/ice.p4) passes p4c's front and mid end for Tofino 1 and 2.

Needs ``p4test`` on PATH and the open-source TNA headers (tna.p4, t2na.p4 and the files they
include, from p4c's backends/tofino/bf-p4c/p4include) in the folder ``$ICE_TNA_INCLUDE`` names;
skips with the reason otherwise.  bf-p4c (the real Tofino back end) is checked by `make p4-tna`
where a user has it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4src" / "tna" / "ice.p4"


def _tools() -> tuple[str, Path]:
    p4test = shutil.which("p4test")
    if p4test is None:
        pytest.skip("p4test is not on PATH (build p4c to check the TNA program)")
    inc = os.environ.get("ICE_TNA_INCLUDE")
    if not inc:
        pytest.skip("ICE_TNA_INCLUDE is not set (the folder holding tna.p4 and t2na.p4)")
    folder = Path(inc)
    if not (folder / "tna.p4").is_file() or not (folder / "t2na.p4").is_file():
        pytest.skip(f"ICE_TNA_INCLUDE={inc}: no tna.p4 and t2na.p4 there")
    return p4test, folder


@pytest.mark.parametrize("chip", [1, 2], ids=["tofino", "tofino2"])
def test_tna_program_compiles_with_no_error_or_warning(chip: int) -> None:
    # No --p4runtime-files: p4test's P4Info generator knows v1model and PSA externs only (TNA's
    # Counter/Register/DirectCounter are "unknown" to it); bf-p4c writes the TNA P4Info.
    # uninitialized_out_param is off as in `make p4-tna`: the TNA parsers leave some metadata
    # unset on purpose (Tofino writes a checksum verdict once; bf-p4c checks real
    # uninitialized reads itself, tests/tofino).
    p4test, inc = _tools()
    cmd = [
        p4test,
        "--std",
        "p4-16",
        "--Wdisable=uninitialized_out_param",
        f"-D__TARGET_TOFINO__={chip}",
        "-I",
        str(inc),
        str(PROGRAM),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    out = (res.stdout + res.stderr).strip()
    assert res.returncode == 0, out
    assert "warning" not in out.lower() and "error" not in out.lower(), out
