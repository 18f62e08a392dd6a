"""Measures, results.json, the table, comparison.png and icectl experiment show/list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icefabric.experiment import results
from icefabric.experiment.config import parse_experiment
from icefabric.experiment.measures import (
    Observed,
    bound_us,
    cdf_points,
    hist_percentile,
    host_bps,
    measure,
    percentile,
)
from icefabric.experiment.report import write_plot
from icefabric.icectl import main
from icefabric.traffic.workload import WorkloadExecutor, build_schedule

EXP = {
    "name": "t",
    "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
    "workload": {"collective": "all-reduce", "channels": 1, "message_bytes": "1MiB"},
}


def _ideal_run(exp, slowdown: float = 1.0):
    """Every message takes exactly its bytes / host rate x slowdown: the analytic ring."""
    sched = build_schedule(exp.job)
    rate = host_bps(exp.topology, exp.rates.scale)
    pending: list[tuple[float, int]] = []
    ex = WorkloadExecutor(
        sched,
        lambda m, t: pending.append((t + m.nbytes * 8 / rate[m.src_host] * 1e6 * slowdown, m.id)),
    )
    ex.start(0.0)
    while pending:
        pending.sort()
        t, mid = pending.pop(0)
        ex.on_message(mid, t)
    return sched, ex


def test_ring_busbw_equals_the_bound_when_messages_run_at_line_rate() -> None:
    exp = parse_experiment(EXP)
    sched, ex = _ideal_run(exp)
    n, size, bps = 4, 1 << 20, 100e9 * 1e-3
    assert bound_us(sched, sched.phases[0].name, host_bps(exp.topology, 1e-3)) == pytest.approx(
        2 * (n - 1) / n * size * 8 / bps * 1e6
    )
    obs = Observed(
        mode="ice", executor=ex, link_bps={"leaf1>spine1": bps}, link_bytes={"leaf1>spine1": size}
    )
    doc = measure(obs, sched, exp.topology, exp.rates.scale)
    assert doc["ok"] and doc["busbw_over_bound"] == pytest.approx(1.0, abs=1e-6)
    assert doc["busbw_gbps"] == pytest.approx(0.1, rel=1e-6)  # 100 Gbit/s x 0.001
    assert doc["busbw_gbps_full"] == pytest.approx(100.0, rel=1e-5)
    (ph,) = doc["phases"]
    assert ph["algbw_gbps"] * 1.5 == pytest.approx(ph["busbw_gbps"], rel=1e-5)
    assert (
        doc["flows"]["count"] == 4
        and doc["flows"]["slowest"]["completion_us"] == doc["completion_us"]
    )
    slow_sched, slow = _ideal_run(exp, slowdown=2.0)
    doc2 = measure(Observed(mode="ecmp+dcqcn", executor=slow), slow_sched, exp.topology, 1e-3)
    assert doc2["busbw_over_bound"] == pytest.approx(0.5, abs=1e-6)
    cmp = results.comparison([doc2, doc])
    assert cmp["baseline"] == "ecmp+dcqcn" and cmp["speedup"]["ice"] == pytest.approx(2.0)


def test_wire_overhead_counts_ices_bytes_on_the_switch_links_only() -> None:
    exp = parse_experiment(EXP)
    sched, ex = _ideal_run(exp)
    names = ["leaf1>spine1", "spine1>leaf2", "leaf2>h3"]
    obs = Observed(
        mode="ice",
        executor=ex,
        link_bps=dict.fromkeys(names, 1e8),
        link_bytes={"leaf1>spine1": 100_400, "spine1>leaf2": 100_600, "leaf2>h3": 200_000},
        link_overhead={"leaf1>spine1": 400, "spine1>leaf2": 600, "leaf2>h3": 5_000},
    )
    doc = measure(obs, sched, exp.topology, exp.rates.scale)
    # 1,000 bytes of shim / INT / feedback over 200,000 others; the host link does not count
    assert doc["wire_overhead"] == pytest.approx(0.005)
    assert {ln["link"]: ln["overhead_bytes"] for ln in doc["links"]}["spine1>leaf2"] == 600
    # an engine that cannot tell the bytes apart reports none
    obs.link_overhead = None
    assert measure(obs, sched, exp.topology, exp.rates.scale)["wire_overhead"] is None


def test_unfinished_run_reports_no_bandwidth() -> None:
    exp = parse_experiment(EXP)
    sched = build_schedule(exp.job)
    ex = WorkloadExecutor(sched, lambda m, t: None)
    ex.start(0.0)
    doc = measure(
        Observed(mode="ice", executor=ex, ok=False, error="time limit"), sched, exp.topology, 1e-3
    )
    assert not doc["ok"] and doc["busbw_gbps"] is None and doc["error"] == "time limit"
    assert doc["messages"]["arrived"] == 0


def test_percentiles_and_cdf() -> None:
    vals = list(range(1, 101))
    assert percentile(vals, 50) == 50 and percentile(vals, 99) == 99 and percentile([], 50) == 0
    assert hist_percentile({0: 3, 5: 1}, 50) == 0 and hist_percentile({0: 3, 5: 1}, 99) == 5
    assert hist_percentile({}, 50) == 0
    pts = cdf_points({0: 3, 5: 1})
    assert pts[0] == [0.0, 0.75] and pts[-1] == [5.0, 1.0]


def _doc(tmp_path: Path) -> Path:
    exp = parse_experiment(EXP)
    sched, ex = _ideal_run(exp)
    obs = Observed(
        mode="ice",
        executor=ex,
        link_bps={"leaf1>spine1": 1e8, "h1>leaf1": 1e8},
        link_bytes={"leaf1>spine1": 1000},
        queue_hist={0: 1, 1: 1, 2: 1, 3: 1},
    )
    m = measure(obs, sched, exp.topology, 1e-3)
    doc = results.build(exp.to_dict(), [m], wall_s={"ice": 1.0}, started=0.0)
    d = results.results_dir(tmp_path, "t", 0.0)
    assert d.name == "t-19700101-000000"
    assert results.results_dir(tmp_path, "t", 0.0).name == "t-19700101-000000-2"
    results.write(doc, d)
    write_plot(doc, d / "comparison.png")
    return d


def test_results_round_trip_plot_and_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _doc(tmp_path)
    doc = results.load(d)
    assert doc["schema"] == results.SCHEMA and doc["modes"][0]["mode"] == "ice"
    assert results.comparable(doc) == {k: v for k, v in doc.items() if k != "run"}
    assert (d / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["experiment", "show", str(d)]) == 0
    out = capsys.readouterr().out
    assert "busbw / bound" in out and "leaf1>spine1" in out
    assert main(["experiment", "show", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == results.SCHEMA


def test_show_rejects_what_is_not_a_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["experiment", "show", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "results.json").write_text('{"schema": "other"}')
    assert main(["experiment", "show", str(tmp_path)]) == 2
    assert "schema: expected 'icefabric.experiment/1'" in capsys.readouterr().err


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "list", "--json"]) == 0
    names = [r["name"] for r in json.loads(capsys.readouterr().out)]
    assert "ecmp-collides" in names
    assert main(["experiment", "run", "--preset", "single-flow", "--seed", "-1"]) == 2
    assert "--seed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--modes", ""], "--modes: expected names from"),
        (["--modes", "ice,ice"], "--modes: a mode is named twice"),
        (["--out", "/proc/no-such-dir"], "--out /proc/no-such-dir: cannot create it"),
    ],
)
def test_run_options_are_checked_before_any_mode_runs(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: --modes "" ran the file's modes, "ice,ice" ran ICE twice, and an unwritable --out
    # was an internal error after every mode had run.
    assert main(["experiment", "run", "--preset", "single-flow", "--no-plot", *options]) == 2
    assert message in capsys.readouterr().err


def test_a_mode_whose_engine_fails_is_reported_and_the_others_still_run(tmp_path: Path) -> None:
    from icefabric.experiment.runner import run_experiment

    exp = parse_experiment({**EXP, "modes": ["ecmp+dcqcn", "ice"]})

    class Engine:
        """ECMP + DCQCN cannot start; ICE runs the analytic ring."""

        def run_mode(self, exp, mode, schedule, progress):  # type: ignore[no-untyped-def]
            if mode.name == "ecmp+dcqcn":
                raise RuntimeError("switch process exited")
            _sched, ex = _ideal_run(exp)
            progress(mode.name, 1.0)
            return Observed(mode=mode.name, executor=ex)

    out = run_experiment(exp, out_base=tmp_path, engine=Engine(), plot=False)
    assert not out.ok
    bad, good = out.doc["modes"]
    assert not bad["ok"] and bad["error"] == "RuntimeError: switch process exited"
    assert good["ok"] and good["busbw_over_bound"] == pytest.approx(1.0, abs=1e-6)
    assert out.doc["comparison"]["speedup"]["ice"] is None  # no baseline to compare with
    assert out.directory is not None and (out.directory / "results.json").is_file()
