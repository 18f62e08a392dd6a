"""What the icectl unit tests share: the example topology and icectl run in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.icectl import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = str(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``icectl ARGV...`` in this process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
