"""The ceiling of a set of paths (sim/bound.py): a bound no scheme beats, exact on small cases."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from icefabric.control.topology import Topology
from icefabric.sim.bound import _failure_time, _volume_time, paths_ceiling
from icefabric.sim.config import config_for, uncontrolled_config
from icefabric.sim.engine import Simulator
from icefabric.sim.matrix import run_seed
from icefabric.sim.scenarios import build
from icefabric.traffic.modes import get_mode

SCHEMES = (
    "ecmp+dcqcn",
    "ecmp+hpcc",
    "ecmp+pfc",
    "eecmp4+dcqcn",
    "flowlet+hpcc",
    "spray+hpcc",
    "ice",
)


def test_volume_and_failure_times_by_hand() -> None:
    # two links of 1 byte/s (ids 0, 1; the pad 2); one flow of 100 bytes on link 0
    cap = np.array([1.0, 1.0, np.inf])
    first, after, size = np.array([[0, 2]]), np.array([[1, 2]]), np.array([100.0])
    assert _volume_time(first, size, cap) == pytest.approx(100.0)
    # link 0 stops at 50 s, the flow moves to link 1 at 60 s: 50 + 50 bytes, done at 110 s
    assert _failure_time(first, after, size, cap, [0], 50.0, 60.0) == pytest.approx(110.0)
    # a second flow on link 1 the whole time: the moved flow shares it after 60 s
    first2, after2 = np.array([[0, 2], [1, 2]]), np.array([[1, 2], [1, 2]])
    got = _failure_time(first2, after2, np.array([100.0, 100.0]), cap, [0], 50.0, 60.0)
    assert got == pytest.approx(150.0)  # link 1 carries 100 + 50 bytes from 0 s on, at 1 B/s


def test_the_programme_is_exact_at_real_magnitudes() -> None:
    """Bytes of 1e6-1e8 against capacities of 5e10 bytes/s and microseconds: unscaled, the
    solver stopped 38 % above the optimum. A failure at once with no detection delay must give
    the volume time of the paths after it."""
    case = build("failure", 128, 1, 32 << 20)
    topo = Topology(case.spec)
    sim = Simulator(topo, case.workload, config_for(get_mode("ecmp+dcqcn"), seed=1))
    (fail,) = case.failures
    down = copy.deepcopy(topo)
    dead = down.fail_link(fail.link)
    after = sim.route_on(down)[0].path
    cap = np.append(topo.capacity, np.inf)
    size = case.workload.size.astype(np.float64)
    want = _volume_time(after, size, cap)
    got = _failure_time(sim.routes.path, after, size, cap, dead, 1e-12, 2e-12)
    assert got == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("scenario", ["collisions", "background", "failure", "two-jobs"])
@pytest.mark.parametrize("seed", [1, 2])
def test_no_scheme_beats_the_ceiling_of_its_paths(scenario: str, seed: int) -> None:
    r = run_seed(scenario, seed, SCHEMES, 32, 8 << 20)
    for name in SCHEMES:
        assert 0.0 < r["scheme"][name] <= r["ceiling"][name] + 1e-9, (name, r)
        assert r["ceiling"][name] <= 1.0


def test_running_the_paths_with_no_control_is_no_bound() -> None:
    """Why the ceiling is computed, not simulated: with no control the line-rate background
    takes more of the shared links than ICE's control gives it, so ICE beats that run."""
    case = build("background", 32, 2, 8 << 20)
    topo = Topology(case.spec)
    ice = get_mode("ice")
    sim_ice = Simulator(topo, case.workload, config_for(ice, seed=2), failures=()).run()
    free = Simulator(topo, case.workload, uncontrolled_config(ice, seed=2)).run()
    got = sim_ice.collectives[0].busbw_over_bound
    assert got > free.collectives[0].busbw_over_bound
    assert got <= paths_ceiling(topo, case.workload, config_for(ice, seed=2), case.measured)


def test_resume_keeps_old_runs_and_computes_their_ceiling_again(tmp_path) -> None:
    """A task written before the ceiling's definition changed (no 'ceiling' in its key): its
    scheme runs are kept, its ceilings computed again, the file rewritten under the new key."""
    import json

    from icefabric.sim.matrix import _task_key, _task_path, run_matrix

    schemes = ("ecmp+dcqcn", "ice")
    task = ("collisions", 1, schemes, 32, 8 << 20)
    fresh = run_seed(*task)
    legacy = {k: v for k, v in _task_key(task).items() if k != "ceiling"}
    old = {
        "scheme": {"ecmp+dcqcn": 0.123, "ice": 0.456},
        "ceiling": {"ecmp+dcqcn": 0.1, "ice": 0.2},
    }
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    path = _task_path(tasks, task)
    path.write_text(json.dumps({"task": legacy, "result": {**old, "cpu_s": 7.0}}))
    doc = run_matrix(
        scenarios=("collisions",),
        schemes=schemes,
        seeds=1,
        gpus=32,
        message=8 << 20,
        tasks_dir=tasks,
        resume=True,
    )
    (r,) = doc["per_seed"]["collisions"]
    assert r["scheme"] == old["scheme"]  # not run again
    assert r["ceiling"] == fresh["ceiling"] and r["cpu_s"] >= 7.0
    assert json.loads(path.read_text())["task"] == _task_key(task)
