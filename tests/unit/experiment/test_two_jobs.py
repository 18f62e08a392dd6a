"""Several jobs sharing the fabric at packet level: the ``jobs`` key of an experiment file,
:func:`merge_schedules`, a virtual-time run of two jobs and its ceiling (scenario (b) of the
peers matrix, preset ``two-jobs``)."""

from __future__ import annotations

from typing import Any

import pytest

from icefabric.control.ccl import parse_job
from icefabric.experiment.config import ExperimentError, parse_experiment
from icefabric.experiment.matrix import PACKET_PRESETS
from icefabric.experiment.presets import load_preset
from icefabric.experiment.runner import run_experiment
from icefabric.experiment.versus import ceiling, load_run
from icefabric.traffic.workload import WorkloadExecutor, build_schedule, merge_schedules


def _ring(name: str, hosts: list[str]) -> Any:
    return parse_job(
        {
            "name": name,
            "hosts": hosts,
            "phases": [{"name": "ar", "collective": "all-reduce", "message_bytes": "1MiB"}],
        }
    )


def test_merged_schedule_keeps_each_job_apart_and_runs_them_side_by_side() -> None:
    a = build_schedule(_ring("a", ["h1", "h2", "h3"]), slices=2)
    b = build_schedule(_ring("b", ["h4", "h5"]), slices=1)
    m = merge_schedules([a, b])
    assert m.job == "a+b" and len(m.messages) == len(a.messages) + len(b.messages)
    assert [x.id for x in m.messages] == list(range(len(m.messages)))
    n = len(a.messages)
    for old, new in zip(b.messages, m.messages[n:], strict=True):
        assert new.deps == tuple(d + n for d in old.deps) and new.job == "b"
        assert new.phase == "b/ar" and new.flow_id == old.flow_id
    assert [(p.name, p.job, p.first, p.last) for p in m.phases] == [
        ("a/ar", "a", 0, n),
        ("b/ar", "b", n, len(m.messages)),
    ]
    # both jobs' first messages go out at the start: no job waits for the other
    posted: list[int] = []
    ex = WorkloadExecutor(m, lambda msg, t: posted.append(msg.id))
    ex.start(0.0)
    assert any(i < n for i in posted) and any(i >= n for i in posted)
    assert merge_schedules([a]) is a
    with pytest.raises(ValueError, match="distinct job names"):
        merge_schedules([a, a])


GOOD = {
    "name": "t",
    "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
    "workload": {"collective": "all-reduce", "hosts": ["h1", "h3"], "name": "a"},
    "jobs": [{"collective": "all-reduce", "hosts": ["h2", "h4"], "name": "b", "slices": 2}],
}


def test_jobs_key_parses_and_names_every_problem() -> None:
    exp = parse_experiment(GOOD)
    assert [(j.name, k) for j, k in exp.jobs] == [("a", 1), ("b", 2)]
    assert exp.to_dict()["jobs"][0]["job"]["name"] == "b"
    assert "jobs" not in parse_experiment({**GOOD, "jobs": []}).to_dict()  # one job: as before
    cases = [
        (
            {"jobs": [{"collective": "all-reduce", "hosts": ["h2", "h4"], "name": "a"}]},
            "jobs[0].name: job name 'a' is taken",
        ),
        (
            {"jobs": [{"collective": "all-reduce", "hosts": ["h2", "h9"], "name": "b"}]},
            "jobs[0].collective: rank 1: no host 'h9'",
        ),
        ({"jobs": [{"hosts": ["h2"]}]}, "jobs[0]: expected exactly one of job, nccl_log"),
        ({"jobs": [{"collective": "all-reduce", "bogus": 1, "name": "b"}]}, "jobs[0].bogus"),
        ({"jobs": {"name": "b"}}, "jobs: expected a list"),
        ({"jobs": [dict(GOOD["jobs"][0], name=f"j{i}") for i in range(8)]}, "at most 7"),
        ({"engine": "mininet"}, "engine: jobs (more than one job) run on engine virtual only"),
    ]
    for extra, want in cases:
        with pytest.raises(ExperimentError) as e:
            parse_experiment({**GOOD, **extra})
        assert any(want in line for line in e.value.errors), (want, e.value.errors)


def test_two_jobs_run_score_each_job_and_the_ceiling_covers_both() -> None:
    exp = parse_experiment(
        {
            **GOOD,
            "workload": {**GOOD["workload"], "message_bytes": "256KiB"},
            "jobs": [{**GOOD["jobs"][0], "message_bytes": "512KiB"}],
            "modes": ["ecmp+dcqcn", "ice"],
        }
    )
    doc = run_experiment(exp, out_base=None, plot=False).doc
    run = load_run(doc, "two-job run")
    assert run.measured == (0, 1) and len(run.job_workload.collectives) == 2
    for m in doc["modes"]:
        assert m["ok"], m["error"]
        jobs = m["jobs"]
        assert set(jobs) == {"a", "b"}
        # the run's score is the mean of the jobs' (as the simulator's two-jobs scenario)
        mean = (jobs["a"]["busbw_over_bound"] + jobs["b"]["busbw_over_bound"]) / 2
        assert m["busbw_over_bound"] == pytest.approx(mean, abs=2e-6)
        assert jobs["b"]["bound_us"] == pytest.approx(2 * jobs["a"]["bound_us"], rel=1e-6)
        assert [p["name"] for p in m["phases"]] == ["a/all-reduce", "b/all-reduce"]
        assert m["messages"]["arrived"] == m["messages"]["total"]
        c, _ = ceiling(run, m["mode"])
        assert m["busbw_over_bound"] <= c + 1e-3
    ice = next(m for m in doc["modes"] if m["mode"] == "ice")
    # the controller planned both jobs: INT names a path for the flows of each
    assert {f.split("/")[0] for f in ice["paths"]} == {"a", "b"}


def test_two_jobs_preset_is_the_matrix_scenario_b() -> None:
    exp = load_preset("two-jobs")
    assert PACKET_PRESETS["two-jobs"] == "two-jobs"
    hosts = [{r.host for r in j.ranks} for j, _ in exp.jobs]
    assert len(hosts) == 2 and not hosts[0] & hosts[1]
    leaf = {h.name: h.leaf for h in exp.topology.hosts}
    # every leaf holds ranks of both jobs: their flows share the spine links
    assert {leaf[h] for h in hosts[0]} == {leaf[h] for h in hosts[1]} == set(leaf.values())


def test_a_held_job_waits_for_its_release() -> None:
    a = build_schedule(_ring("a", ["h1", "h2", "h3"]), slices=1)
    b = build_schedule(_ring("b", ["h4", "h5"]), slices=1)
    m = merge_schedules([a, b])
    n = len(a.messages)
    posted: list[tuple[int, float]] = []
    ex = WorkloadExecutor(m, lambda msg, t: posted.append((msg.id, t)), held=frozenset({"b"}))
    ex.start(0.0)
    assert posted and all(i < n for i, _ in posted)  # only a's first messages
    ex.release("b", 50.0)
    assert any(i >= n and t == 50.0 for i, t in posted)
    assert all(ex.posted_us[i] == 50.0 for i in range(n, len(m.messages)) if not m.messages[i].deps)
    with pytest.raises(ValueError, match="not held"):
        ex.release("b", 60.0)


def test_start_us_parses_and_names_its_problems() -> None:
    exp = parse_experiment({**GOOD, "jobs": [{**GOOD["jobs"][0], "start_us": 40}]})
    assert dict(exp.job_starts) == {"b": 40.0}
    assert exp.to_dict()["jobs"][0]["start_us"] == 40.0
    assert parse_experiment(GOOD).job_starts == {}  # 0 or absent: starts with the workload
    for bad in (-1, "soon", True, 2e7):
        with pytest.raises(ExperimentError) as e:
            parse_experiment({**GOOD, "jobs": [{**GOOD["jobs"][0], "start_us": bad}]})
        assert any("jobs[0].start_us: expected a number" in x for x in e.value.errors), bad


def test_a_job_arriving_mid_run_is_learnt_planned_and_timed_from_its_arrival() -> None:
    exp = parse_experiment(
        {
            **GOOD,
            "workload": {**GOOD["workload"], "message_bytes": "512KiB"},
            "jobs": [{**GOOD["jobs"][0], "message_bytes": "512KiB", "start_us": 20}],
            "modes": ["ecmp+dcqcn", "ice"],
            "rates": {"scale": 0.01},
        }
    )
    doc = run_experiment(exp, out_base=None, plot=False).doc
    arrival_us = 20 / 0.01
    for m in doc["modes"]:
        assert m["ok"], m["error"]
        assert m["messages"]["arrived"] == m["messages"]["total"]
        b = m["jobs"]["b"]
        # job b is timed from its own first message, which left at its arrival: the run ends
        # no earlier than that arrival plus b's time
        assert b["time_us"] < m["completion_us"]
        assert m["completion_us"] >= arrival_us + b["time_us"] - 1.0
    ice = next(m for m in doc["modes"] if m["mode"] == "ice")
    # b's QPs opened when it arrived and the controller took their keys (it refuses the keys
    # of a job it does not know, which fails the mode): INT names paths of both jobs' flows
    assert {f.split("/")[0] for f in ice["paths"]} == {"a", "b"}


def test_job_arrives_preset_is_two_jobs_with_a_late_second_job() -> None:
    exp, two = load_preset("job-arrives"), load_preset("two-jobs")
    assert PACKET_PRESETS["job-arrives"] == "job-arrives"
    assert [j.to_dict() for j, _ in exp.jobs] == [j.to_dict() for j, _ in two.jobs]
    assert dict(exp.job_starts) == {"job-b": 200.0} and two.job_starts == {}
