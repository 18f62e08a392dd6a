"""`make bench`'s entry point: which benchmarks run and what --quick hands them (no benchmark
runs here: every module is a recorder)."""

from __future__ import annotations

import types

import pytest

from icefabric import bench


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}

    def fake_import(name: str) -> types.ModuleType:
        mod = types.ModuleType(name)

        def main(argv: list[str]) -> int:
            seen[name] = list(argv)
            return 0

        mod.main = main  # type: ignore[attr-defined]
        return mod

    monkeypatch.setattr(bench.importlib, "import_module", fake_import)
    return seen


def test_full_run_gives_every_benchmark_its_defaults(calls: dict[str, list[str]]) -> None:
    assert bench.main([]) == 0
    assert calls == {module: [] for module in bench.BENCHMARKS.values()}


def test_quick_leaves_out_the_simulators_long_runs_only(calls: dict[str, list[str]]) -> None:
    assert bench.main(["--quick", "sim", "planner"]) == 0
    assert calls == {bench.BENCHMARKS["sim"]: ["--quick"], bench.BENCHMARKS["planner"]: []}
