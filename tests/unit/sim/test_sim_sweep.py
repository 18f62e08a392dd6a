"""Sweeps on Dask: the same results serially, on a local cluster and through a scheduler address
(scheduler and worker started as separate processes, as on two machines, here on loopback)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icefabric.sim import hetero_report
from icefabric.sim.hetero import Cluster, Group, Scenario, Training
from icefabric.sim.hetero_report import Outcome, task
from icefabric.sim.model import TransformerModel
from icefabric.sim.sweep import SweepError, run_tasks
from icefabric.waiting import poll_until

distributed = pytest.importorskip("distributed")

WORKER = ("--nworkers", "1", "--nthreads", "1")
SMALL = TransformerModel(layers=8, hidden=1024, ffn_hidden=2816, vocab=8000, seq=1024)
SCENARIO = Scenario(
    name="sweep",
    parallel="dp",
    groups=(Group(device="A100", servers=2), Group(device="BR104", servers=2)),
    training=Training(model=SMALL, global_batch=24),
)
CLUSTER = Cluster(servers_per_leaf=2)  # two units: rings cross the spines
# ECMP's collisions and DCQCN's cuts differ by placement (seed): results that must come back
# in task order, not in the order the workers finish
TASKS: list[tuple[object, ...]] = [
    (SCENARIO, name, s, CLUSTER) for name in ("ecmp+dcqcn", "ice") for s in (1, 2)
]


@pytest.fixture(scope="module")
def serial() -> list[Outcome]:
    return run_tasks(task, TASKS, serial=True, progress=False)


def test_local_cluster_gives_the_serial_results(serial: list[Outcome]) -> None:
    # every result carries its task's scheme and seed: equal lists are equal in task order
    assert [(o.scheme, o.seed) for o in serial] == [(t[1], t[2]) for t in TASKS]
    got = run_tasks(task, TASKS, workers=2, progress=False)
    assert got == serial


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def scheduler() -> Iterator[str]:
    """``dask scheduler`` and one ``dask worker`` as separate processes on loopback."""
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    common = ["--no-dashboard"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dask",
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *common,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dask",
                    "worker",
                    addr,
                    "--host",
                    "127.0.0.1",
                    *WORKER,
                    *common,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

        def one_worker() -> bool:
            try:
                with distributed.Client(addr, timeout=2) as c:
                    return len(c.scheduler_info()["workers"]) == 1
            except (OSError, TimeoutError):
                return False

        assert poll_until(one_worker, timeout=120, interval=0.5), "no worker joined in 120 s"
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_scheduler_address_gives_the_serial_results(scheduler: str, serial: list[Outcome]) -> None:
    got = run_tasks(task, TASKS, cluster=scheduler, progress=False)
    assert got == serial


def test_unreachable_scheduler_is_one_clear_error() -> None:
    addr = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(SweepError, match="cannot reach the Dask scheduler at"):
        run_tasks(task, TASKS[:1], cluster=addr, progress=False, connect_timeout=2.0)


def test_a_failing_task_is_named() -> None:
    unknown = Scenario(name="z", parallel="dp", groups=(Group(device="Z9", servers=2),))
    bad = [TASKS[0], (unknown, "ecmp+dcqcn", 1, CLUSTER)]
    with pytest.raises(SweepError, match=r"task 1 .* unknown accelerator 'Z9'"):
        run_tasks(task, bad, workers=1, progress=False)


def _fake_outcome(sc: Scenario, scheme: str, seed: int, cluster: Cluster) -> Outcome:
    # no simulation: a figure that differs per row, scheme and seed
    eff = 0.9 + seed / 1000 + len(scheme) / 10_000 + cluster.nics / 100_000
    return Outcome(
        scenario=sc.name,
        parallel=sc.parallel,
        scheme=scheme,
        gpus=sum(g.servers for g in sc.groups) * cluster.gpus,
        seed=seed,
        efficiency=eff,
        compute_efficiency=0.99,
        step_s=1.0,
        comm_s=0.01,
        cpu_s=0.5,
    )


def test_resume_runs_only_what_the_file_lacks_and_reports_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[object, ...]] = []

    def fake_run_tasks(fn: object, tasks: list[tuple[object, ...]], **kw: object) -> list[Outcome]:
        ran.extend(tasks)
        return [_fake_outcome(*t) for t in tasks]  # type: ignore[arg-type]

    monkeypatch.setattr(hetero_report, "run_tasks", fake_run_tasks)
    path = str(tmp_path / "resume.json")
    kw: dict[str, Any] = {"cluster": None, "workers": 1, "serial": True, "plot": None}
    full = hetero_report.report([1, 2], (128, 256), resume=path, **kw)
    first = len(ran)
    assert first == (4 + 4) * 3 * 2  # 4 study rows and 2 x 2 scale rows, 3 modes, 2 seeds
    # a sweep stopped after the study rows and the first scale point: the rest runs, once
    saved = hetero_report.load_outcomes(path)
    keep = dict(list(saved.items())[: 4 * 3 * 2 + 3 * 2])
    hetero_report.save_outcomes(path, keep)
    ran.clear()
    again = hetero_report.report([1, 2], (128, 256), resume=path, **kw)
    assert len(ran) == first - len(keep)
    assert hetero_report.load_outcomes(path) == saved
    ran.clear()
    third = hetero_report.report([1, 2], (128, 256), resume=path, **kw)
    assert ran == []

    def table(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("|")]

    assert table(full) == table(again) == table(third)
    assert "resumed from a file" in third and "resumed from a file" not in full


def test_a_bad_resume_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hetero_outcomes": {"x|ice|1": {"efficiency": "high"}}}')
    with pytest.raises(ValueError, match=r"bad.json: entry 'x\|ice\|1'"):
        hetero_report.load_outcomes(str(bad))
    bad.write_text("[1, 2")
    with pytest.raises(ValueError, match=r"--resume: .*bad.json"):
        hetero_report.load_outcomes(str(bad))
    assert hetero_report.load_outcomes(str(tmp_path / "none.json")) == {}
