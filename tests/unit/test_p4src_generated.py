"""icefabric.p4src.ice_p4 is what p4src/ice.p4 says: regenerated here and compared byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from icefabric.p4src import P4SRC_DIR, ice_p4
from icefabric.p4src.generate import OUTPUT, generate, main

pytest.importorskip("icefabric.target.compiler")


def test_the_committed_module_is_what_the_sources_generate() -> None:
    assert OUTPUT.read_text(encoding="utf-8") == generate(), (
        "p4src/ice_p4.py is out of date: run python -m icefabric.p4src.generate"
    )


def test_a_changed_constant_makes_the_sources_and_the_module_disagree(tmp_path: Path) -> None:
    copy = tmp_path / "p4src"
    shutil.copytree(P4SRC_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    meta = copy / "v1model" / "metadata.p4"
    meta.write_text(meta.read_text().replace("CPU_PORT = 255", "CPU_PORT = 254"))
    text = generate(copy / "ice.p4")
    assert "CPU_PORT: Final = 254" in text
    assert text != OUTPUT.read_text(encoding="utf-8")


def test_values_the_consumers_rely_on() -> None:
    assert ice_p4.CPU_PORT == 255
    assert ice_p4.DROP_REASONS[ice_p4.DROP_REASON_PARSER_ERROR] == "parser-error"
    assert ice_p4.TABLE_FLOW_PATH == "IceIngress.path_select.flow_path"
    # header sizes are computed from the P4 field widths and agree with the byte constants
    assert sum(w for _, w in ice_p4.HEADERS["int_hop_t"]) // 8 == ice_p4.INT_HOP_BYTES
    assert ice_p4.ICE_SHIM_BYTES == 8 and ice_p4.ETHERNET_BYTES == 14


def test_check_mode(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--check"]) == 0
    stale = tmp_path / "ice_p4.py"
    stale.write_text("# stale\n")
    assert main(["--check", "--out", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().out
