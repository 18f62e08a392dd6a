"""`icectl experiment matrix` on the command line: its progress on a stderr that is no terminal,
its warning when the ring scenarios are latency-bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_matrix_prints_a_line_per_task_when_stderr_is_no_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Redirected to a file, rich's bar would show nothing until the end: one plain line per
    finished scenario-seed task instead (and none with --no-progress)."""
    from icefabric.icectl import main

    base = [
        "experiment", "matrix", "--engine", "sim", "--seeds", "2", "--gpus", "32",
        "--message-mib", "1", "--scenarios", "collisions", "--schemes", "ecmp+dcqcn",
    ]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    text = capsys.readouterr().err
    # 1 MiB over 32 ranks and 8 channels: 4 KiB ring steps, latency-bound (ring_step_cap)
    assert "every scheme scores at most 0.164 of the bound; --message-mib 7 or more" in text
    err = [ln for ln in text.splitlines() if ln.startswith("matrix: ")]
    assert len(err) == 3, err  # the start, then each of the 2 tasks
    assert err[0].startswith("matrix: 0/2 tasks, starting, ")
    assert err[1].startswith("matrix: 1/2 tasks, collisions seed 1 (")  # (N CPU s)
    assert err[2].startswith("matrix: 2/2 tasks, collisions seed 2 (")
    assert all(ln.endswith(" s elapsed") for ln in err), err
    doc = json.loads((tmp_path / "a" / "matrix.json").read_text())
    assert doc["seeds"] == [1, 2] and doc["ring_step_cap"] == 0.1638
    assert main([*base, "--no-progress", "--out", str(tmp_path / "b")]) == 0
    assert not [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("matrix: ")]


def test_matrix_resume_takes_the_finished_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each task is written to DIR/tasks/ as it finishes; --resume takes those that match (same
    GPUs, message, schemes) and runs the rest: the same document as one run of every seed."""
    from icefabric.icectl import main

    base = [
        "experiment", "matrix", "--seeds", "1", "--gpus", "32", "--message-mib", "7",
        "--scenarios", "collisions", "--schemes", "ecmp+dcqcn", "--out", str(tmp_path / "r"),
    ]  # fmt: skip
    assert main(base) == 0
    task = tmp_path / "r" / "tasks" / "collisions-seed1.json"
    assert json.loads(task.read_text())["task"]["seed"] == 1
    assert main([*base[:3], "2", *base[4:], "--resume"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("matrix: ")]
    assert err[-2].startswith("matrix: 1/2 tasks, starting (1 from "), err  # seed 1 taken
    assert err[-1].startswith("matrix: 2/2 tasks, collisions seed 2 ("), err
    resumed = json.loads((tmp_path / "r" / "matrix.json").read_text())
    assert main([*base[:3], "2", *base[4:-1], str(tmp_path / "whole")]) == 0
    whole = json.loads((tmp_path / "whole" / "matrix.json").read_text())

    def strip(doc: dict) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "cpu_s"} for r in doc["per_seed"]["collisions"]]

    assert strip(resumed) == strip(whole) and resumed["scenarios"] == whole["scenarios"]
    # another message: the task there is not this run's, so it runs again
    assert main([*base[:7], "8", *base[8:], "--resume"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("matrix: ")]
    assert err[-2].startswith("matrix: 0/1 tasks, starting, "), err
    assert json.loads(task.read_text())["task"]["message"] == 8 << 20


def test_a_stopped_task_goes_on_from_its_last_finished_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_seed keeps each finished run in its partial file and takes them from there when run
    again: a task stopped after its first scheme runs only the rest, with the same scores as
    an uninterrupted run; another task's partial file is not taken."""
    from icefabric.sim import matrix

    schemes = ("ecmp+dcqcn", "ice")
    whole = matrix.run_seed("collisions", 1, schemes, 32, 7 << 20)
    part = tmp_path / "collisions-seed1.partial.json"
    runs: list[str] = []
    score = matrix._score

    def counted(case, cfg, work):  # type: ignore[no-untyped-def]
        runs.append(cfg.control)
        if len(runs) == 2:  # ecmp+dcqcn, then stop in ice's run (ceilings are not runs)
            raise KeyboardInterrupt
        return score(case, cfg, work)

    monkeypatch.setattr(matrix, "_score", counted)
    with pytest.raises(KeyboardInterrupt):
        matrix.run_seed("collisions", 1, schemes, 32, 7 << 20, str(part))
    kept = json.loads(part.read_text())
    assert kept["task"]["scenario"] == "collisions" and kept["cpu_s"] > 0
    assert list(kept["scheme"]) == ["ecmp+dcqcn"]
    runs.clear()

    def logged(case, cfg, work):  # type: ignore[no-untyped-def]
        runs.append(cfg.control)
        return score(case, cfg, work)

    monkeypatch.setattr(matrix, "_score", logged)
    again = matrix.run_seed("collisions", 1, schemes, 32, 7 << 20, str(part))
    assert runs == ["ice"]  # ICE only
    assert again["scheme"] == whole["scheme"] and again["ceiling"] == whole["ceiling"]
    assert again["cpu_s"] >= kept["cpu_s"]
    runs.clear()  # another seed's task: the file is not its own, everything runs
    matrix.run_seed("collisions", 2, schemes, 32, 7 << 20, str(part))
    assert len(runs) == 2
