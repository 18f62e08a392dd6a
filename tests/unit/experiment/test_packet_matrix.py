"""`icectl experiment matrix --engine virtual`: the packet-level peers matrix (experiment/matrix.py)
and the ceiling of a packet-level run's paths (experiment/versus.py ``ceiling``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icefabric.experiment import matrix as pm
from icefabric.experiment.presets import load_preset
from icefabric.experiment.versus import ceiling, load_run


def _cheap(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Play scenario 'collisions' with the 2-host single-flow preset (seconds, not minutes);
    the tasks run_seed was called with."""
    monkeypatch.setattr(pm, "PACKET_PRESETS", {"collisions": "single-flow"})
    calls: list[tuple[Any, ...]] = []
    real = pm.run_seed

    def counted(*task: Any) -> dict[str, Any]:
        calls.append(task)
        return real(*task)

    monkeypatch.setattr(pm, "run_seed", counted)
    return calls


def test_packet_matrix_cells_ceilings_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _cheap(monkeypatch)
    kw: dict[str, Any] = {
        "scenarios": ("collisions",),
        "schemes": ("ecmp+dcqcn", "ice"),
        "seeds": 2,
        "tasks_dir": tmp_path / "tasks",
    }
    doc = pm.run_packet_matrix(**kw)
    assert len(calls) == 2 and doc["engine"] == "virtual" and doc["seeds"] == [1, 2]
    assert doc["presets"] == {"collisions": "single-flow"}
    cell = doc["scenarios"]["collisions"]
    assert cell["best_peer"] == "ecmp+dcqcn"  # ICE is no peer
    for name in kw["schemes"]:
        c = cell["schemes"][name]
        assert c["seeds"] == 2 and c["losses"] == 0 and c["errors"] == []
        assert 0.5 < c["busbw_over_bound"]["median"] <= 1.0, c
        assert set(c["queue_p99"]) == {"median", "p10", "p90"}
    for r in doc["per_seed"]["collisions"]:
        for name in kw["schemes"]:
            # no congestion control can beat the ceiling of the same paths
            assert r["scheme"][name] <= r["ceiling"][name] + 1e-3, r
            assert r["ceiling_paths"][name] == "the run's paths", r
    # resumed: every task from DIR/tasks, none run again, the same document
    again = pm.run_packet_matrix(**kw, resume=True)
    assert len(calls) == 2
    assert again["scenarios"] == doc["scenarios"]


def test_a_failed_scheme_scores_zero_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scheme whose run raised is counted as nothing delivered, and its error is shown."""
    from icefabric.experiment.virtual import VirtualEngine
    from icefabric.icectl import main

    _cheap(monkeypatch)
    real = VirtualEngine.run_mode

    def broken(self: VirtualEngine, exp: Any, mode: Any, *a: Any) -> Any:
        if mode.name == "ice":
            raise RuntimeError("agent channel closed")
        return real(self, exp, mode, *a)

    monkeypatch.setattr(VirtualEngine, "run_mode", broken)
    out = tmp_path / "m"
    args = ["experiment", "matrix", "--engine", "virtual", "--seeds", "1", "--no-progress"]
    assert main([*args, "--schemes", "ecmp+dcqcn,ice", "--out", str(out)]) == 0
    doc = json.loads((out / "matrix.json").read_text())
    ice = doc["scenarios"]["collisions"]["schemes"]["ice"]
    assert ice["busbw_over_bound"]["median"] == 0.0
    assert ice["errors"] == ["RuntimeError: agent channel closed"]
    assert "ice: 0 packets lost over the seeds; errors: RuntimeError: agent channel closed" in (
        capsys.readouterr().out
    )
    assert doc["command"].startswith("icectl experiment matrix --engine virtual --seeds 1 ")


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--gpus", "128"], "--gpus: the packet-level matrix (--engine virtual) runs the presets'"),
        (["--message-mib", "64"], "--message-mib: the packet-level matrix"),
        (["--scenarios", "mixed-nics"], "scenarios: expected names from collisions, two-jobs, "),
        (["--schemes", "ecmp+pfc"], "schemes: ecmp+pfc does not run at packet level"),
    ],
)
def test_virtual_engine_refuses_what_it_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    from icefabric.icectl import main

    argv = ["experiment", "matrix", "--engine", "virtual", "--out", str(tmp_path / "x"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    assert not (tmp_path / "x" / "matrix.json").exists()


def test_link_down_ceiling_fails_the_link_when_the_run_did() -> None:
    """A run with link_down: the simulator fails the same link when the run's link stopped
    (at_us + drain_us, stretched by 1 / scale) and routes around it itself."""
    exp = load_preset("link-down").to_dict()
    doc = {"experiment": exp, "modes": [{"mode": m, "ok": True} for m in exp["modes"]]}
    run = load_run(doc, "link-down")
    (fail,) = run.failures
    assert fail.at_us == pytest.approx((150 + 20) / 0.001)
    from icefabric.control.topology import Topology

    assert Topology(run.spec).link_name(fail.link) == "leaf1:3->spine1:1"
    for mode in ("ecmp+dcqcn", "ice"):
        value, source = ceiling(run, mode)
        assert 0.0 < value <= 1.0 + 1e-9
        assert source.startswith("simulator's "), source
    # without the failure the planned paths' ceiling is the bound; with it, less
    healthy = load_run({**doc, "experiment": {**exp, "link_down": None}}, "healthy")
    assert ceiling(healthy, "ice")[0] == pytest.approx(1.0)
    assert ceiling(run, "ice")[0] < 0.99


def test_background_flows_are_in_the_ceiling_workload() -> None:
    exp = load_preset("background").to_dict()
    run = load_run({"experiment": exp, "modes": []}, "background")
    assert len(run.workload.flows) == len(run.job_workload.flows) + len(exp["background"])
    assert len(run.workload.collectives) == len(run.job_workload.collectives) + 1
