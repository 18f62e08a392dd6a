"""The experiment runner in virtual time: sanity of the measurement itself (issue 9).

ice.p4 on embedded switches, real P4Runtime, endpoints and agents in the discrete-event engine.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from icefabric.experiment import results
from icefabric.experiment.config import parse_experiment
from icefabric.experiment.presets import load_preset
from icefabric.experiment.runner import run_experiment
from icefabric.experiment.virtual import VirtualEngine

pytestmark = [pytest.mark.dataplane, pytest.mark.slow]


def test_single_flow_on_an_idle_path_reaches_its_link_rate(engine: VirtualEngine) -> None:
    exp = load_preset("single-flow")  # 4 MiB between two leaves, every link 100 Gbit/s x 1e-3
    doc = run_experiment(exp, out_base=None, engine=engine).doc
    rate_gbps = 100 * exp.rates.scale
    for m in doc["modes"]:
        assert m["ok"], m["error"]
        (flow,) = m["flows"]["goodput_gbps"]
        goodput = m["flows"]["goodput_gbps"][flow]
        window_s = exp.job.phases[0].message_bytes * 8 / (goodput * 1e9)  # first..last packet
        links = {ln["link"]: ln for ln in m["links"]}
        if m["paths"]:  # ICE: INT reports name the path
            ((_, path),) = m["paths"].items()
            on_path = [f"{a}>{b}" for a, b in itertools.pairwise(path)]
        else:  # DCQCN modes carry no INT: the one flow is what crosses the fabric
            on_path = [name for name in links if ">h" not in name]
        busiest = max(links[name]["bytes"] * 8 / window_s / 1e9 for name in on_path)
        # while it runs, the flow keeps the busiest link of its path >= 95 % busy (wire bytes,
        # INT included) ...
        assert busiest >= 0.95 * rate_gbps, (m["mode"], busiest / rate_gbps)
        # ... and delivers >= 90 % of the host link rate as payload (headers aside)
        assert goodput >= 0.90 * rate_gbps, (m["mode"], goodput / rate_gbps)
        assert m["busbw_over_bound"] >= 0.90, (m["mode"], m["busbw_over_bound"])
        assert m["drops"] == 0 and m["psn_losses"] == 0
        if m["mode"] == "ecmp+dcqcn":  # the one ECMP model predicts the path the switches took
            model = m["engine"]["ecmp_model"]
            assert model["links_checked"] > 0 and model["links_off"] == [], model


def test_ring_allreduce_on_a_nonblocking_fabric_is_close_to_the_analytic_time(
    engine: VirtualEngine,
) -> None:
    exp = load_preset("nonblocking-ring")  # 4 ranks, one ring, ICE
    doc = run_experiment(exp, out_base=None, engine=engine).doc
    (m,) = doc["modes"]
    assert m["ok"], m["error"]
    n = len(exp.job.ranks)
    size = exp.job.phases[0].message_bytes
    rate = 100e9 * exp.rates.scale
    analytic_us = 2 * (n - 1) / n * size * 8 / rate * 1e6
    assert m["bound_us"] == pytest.approx(analytic_us)
    assert analytic_us <= m["completion_us"] <= 1.10 * analytic_us, m["completion_us"] / analytic_us
    assert m["drops"] == 0 and m["messages"]["arrived"] == m["messages"]["total"]


SMALL = {
    "name": "twice",
    "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
    "workload": {"collective": "all-reduce", "channels": 2, "message_bytes": "256KiB"},
    "modes": ["ecmp+dcqcn", "ice"],
    "seed": 7,
}


def test_the_same_experiment_twice_gives_identical_results(
    engine: VirtualEngine, tmp_path: Path
) -> None:
    exp = parse_experiment(SMALL)
    one = run_experiment(exp, out_base=tmp_path, engine=engine)
    two = run_experiment(exp, out_base=tmp_path, engine=VirtualEngine())
    assert one.ok and two.ok
    assert one.directory != two.directory
    a = results.load(one.directory)  # type: ignore[arg-type]
    b = results.load(two.directory)  # type: ignore[arg-type]
    assert results.comparable(a) == results.comparable(b)
    assert a["modes"][0]["data_packets"] > 0 and a["modes"][1]["data_packets"] > 0
    assert a["modes"][0]["engine"]["ecmp_model"]["links_off"] == []
    assert (one.directory / "comparison.png").stat().st_size > 10_000  # type: ignore[operator]
    other = run_experiment(
        replace(exp, seed=8, modes=("ecmp+dcqcn",)), out_base=None, engine=engine
    )
    assert other.doc["experiment"]["seed"] == 8  # the seed reaches the agents' QP numbering


def test_a_mode_that_runs_out_of_virtual_time_fails_alone(engine: VirtualEngine) -> None:
    exp = parse_experiment({**SMALL, "limits": {"virtual_ms": 5}})
    out = run_experiment(exp, out_base=None, engine=engine)
    assert not out.ok
    for m in out.doc["modes"]:
        assert not m["ok"] and "virtual time limit 5 ms" in m["error"]
        assert m["busbw_gbps"] is None and m["messages"]["arrived"] < m["messages"]["total"]


def test_icectl_experiment_run_writes_results_and_exits_by_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import yaml

    from icefabric.icectl import main

    f = tmp_path / "x.yaml"
    f.write_text(yaml.safe_dump({**SMALL, "modes": ["ice"]}))
    assert main(["experiment", "run", str(f), "--out", str(tmp_path / "r"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["modes"][0]["ok"] and doc["comparison"]["all_ok"]
    (d,) = (tmp_path / "r").iterdir()
    assert d.name.startswith("twice-") and (d / "results.json").is_file()
    assert (d / "comparison.png").is_file()
    f.write_text(yaml.safe_dump({**SMALL, "modes": ["ice"], "limits": {"virtual_ms": 1}}))
    assert main(["experiment", "run", str(f), "--out", str(tmp_path / "r"), "--no-plot"]) == 1
    assert "virtual time limit" in capsys.readouterr().out
