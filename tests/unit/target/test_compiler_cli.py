"""`python -m icefabric.target.compiler`: exit codes, P4Info and code output, clean errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.target.compiler.__main__ import main
from icefabric.target.compiler.bench import FORWARDING_P4


def test_compiles_and_writes_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "fwd.p4"
    src.write_text(FORWARDING_P4)
    rc = main([str(src), "--p4info-out", str(tmp_path / "p.txt"),
               "--python-out", str(tmp_path / "p.py")])  # fmt: skip
    assert rc == 0
    assert 'name: "Ing.routes"' in (tmp_path / "p.txt").read_text()
    assert "def T_Ing_routes(S):" in (tmp_path / "p.py").read_text()
    assert "3 tables" in capsys.readouterr().out


def test_errors_are_reported_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.p4"
    bad.write_text("const bit<8> X = 1 +;\n")
    assert main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:1:21: error: expected an expression but found ';'")
    assert "Traceback" not in err
    assert main([str(tmp_path / "missing.p4")]) == 1
    assert capsys.readouterr().err.startswith(f"{tmp_path / 'missing.p4'}: error: cannot read")


def test_defines_reach_the_preprocessor(tmp_path: Path) -> None:
    src = tmp_path / "d.p4"
    src.write_text("#ifndef OK\n#error OK not defined\n#endif\n" + FORWARDING_P4)
    assert main([str(src)]) == 1
    assert main([str(src), "-D", "OK"]) == 0
