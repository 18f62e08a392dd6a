"""icectl sim run|compare, PFC and flowlet runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icefabric.control.topology import Topology
from icefabric.icectl import main
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import Simulator
from icefabric.sim.workload import workload_from_jobs
from icefabric.topo.generators import leaf_spine

ROOT = Path(__file__).resolve().parents[3]
TOPO = str(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
JOB = str(ROOT / "control" / "ccl" / "examples" / "mixed_dp_allreduce.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def sim(capsys: pytest.CaptureFixture[str], verb: str, *argv: str) -> tuple[int, str, str]:
    """``icectl sim VERB`` on the 2x4 example fabric and the mixed job, then ``argv``."""
    return run(capsys, "sim", verb, "--topo", TOPO, "--job", JOB, *argv)


def test_sim_compare_json_png_and_ratio(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = sim(capsys, "compare", "--no-progress", "--json", "--out", str(tmp_path))
    assert code == 0
    rep = json.loads(out)
    labels = [r["label"] for r in rep["results"]]
    assert labels == ["ecmp+dcqcn", "ice+ice+caps"]
    ecmp, ice = rep["results"]
    assert ecmp["unfinished"] == 0 and ice["unfinished"] == 0
    c_e, c_i = ecmp["collectives"][0], ice["collectives"][0]
    assert c_e["collective"] == "all-reduce" and c_e["flows"] == 16
    # ice.p4's ECMP puts 3 of these flows' 256 MiB on one uplink where the plan puts 2 (icectl
    # plan: 56.4 vs 37.6 ms of load): the ring runs at the pace of that link
    assert c_i["time_us"] < c_e["time_us"]
    assert rep["speedup_over_first"]["ice+ice+caps"] == pytest.approx(
        c_e["time_us"] / c_i["time_us"], rel=0.02
    )
    assert 0.0 < c_e["busbw_over_bound"] < c_i["busbw_over_bound"] <= 1.0 + 1e-9
    assert (tmp_path / "sim.png").stat().st_size > 1000
    saved = json.loads((tmp_path / "ecmp+dcqcn.json").read_text())
    assert saved["trace"]["t_us"] and len(saved["flow_finish_us"]) == 16


def test_sim_run_table_and_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = sim(capsys, "run", "--routing", "ice", "--no-progress")
    assert code == 0 and "busbw" in out and "ice+dcqcn+caps" in out
    code, _, err = run(capsys, "sim", "run", "--topo", TOPO, "--job", str(tmp_path / "no.yaml"))
    assert code == 2 and "no.yaml" in err and "Traceback" not in err
    code, _, err = sim(capsys, "compare", "--config", "ecmp+tcp")
    assert code == 2 and "ROUTING+CONTROL" in err
    code, _, err = sim(capsys, "run", "--dt-us", "0")
    assert code == 2 and "dt_us" in err
    bad = tmp_path / "job.yaml"
    bad.write_text(
        "name: x\nhosts: [h1, nope]\nphases: [{name: a, collective: all-reduce, "
        "message_bytes: 1MiB}]\n"
    )
    code, _, err = run(capsys, "sim", "run", "--topo", TOPO, "--job", str(bad))
    assert code == 2 and "nope" in err


def _incast(hosts: list[str]) -> dict[str, object]:
    return {
        "name": "incast",
        "hosts": hosts,
        "phases": [
            {
                "name": "incast",
                "collective": "send-recv",
                "channels": 1,
                "message_bytes": 16 << 20,
                "pairs": [[k, 0] for k in range(1, len(hosts))],
            }
        ],
    }


def test_pfc_pauses_and_flowlets_move() -> None:
    from icefabric.control.ccl.job import parse_job

    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=4, host_rate_gbps=100.0)
    topo = Topology(spec)
    job = parse_job(_incast([h.name for h in spec.hosts]))
    w = workload_from_jobs([job])
    lossless = Simulator(
        topo, w, SimConfig(routing="ecmp", control="none", pfc=True, dt_us=2.0)
    ).run()
    lossy = Simulator(topo, w, SimConfig(routing="ecmp", control="none", dt_us=2.0)).run()
    assert lossless.unfinished == 0 and lossy.unfinished == 0
    assert lossless.pfc_pause_us_total > 0 and lossy.pfc_pause_us_total == 0
    # PFC holds the queues near XOFF instead of letting them grow
    assert lossless.queue_max_bytes < lossy.queue_max_bytes
    fl = Simulator(topo, w, SimConfig(routing="flowlet", control="dcqcn", dt_us=2.0)).run()
    assert fl.unfinished == 0


def _results(tmp_path: Path, *, drop_path: bool = False) -> Path:
    """A results.json as `icectl experiment run` writes it, with ECMP paths from the model."""
    from icefabric.control.ccl.job import load_job
    from icefabric.control.planner.ecmp import EcmpModel
    from icefabric.topo.spec import load_topology

    spec = load_topology(TOPO)
    topo = Topology(spec)
    job = load_job(JOB)
    w = workload_from_jobs([job])
    model = EcmpModel(topo)
    paths = {}
    for f in w.flows:
        a, b = topo.leaf_of[f.src_host], topo.leaf_of[f.dst_host]
        cand = topo.candidate_paths(a, b)[model.flow_path_index(f)]
        paths[f.flow_id] = [h.switch for h in cand.hops]
    if drop_path:
        paths.pop(next(iter(paths)))
    small = job.to_dict()
    small["phases"][0]["message_bytes"] = 4 << 20  # a short run
    data = {
        "experiment": {
            "name": "t",
            "topology": spec.to_dict(),
            "job": small,
            "slices": 4,
            "rates": {"scale": 0.01, "mtu_bytes": 4096},
        },
        "modes": [
            {
                "mode": "ecmp+dcqcn",
                "ok": True,
                "paths": paths,
                "busbw_over_bound": 0.5,
                "completion_us": 2.0e5,
            },
            {
                "mode": "ice",
                "ok": True,
                "paths": {},
                "busbw_over_bound": 0.9,
                "completion_us": 1.0e5,
            },
        ],
    }
    p = tmp_path / "results.json"
    p.write_text(json.dumps(data))
    return p


def test_versus_runs_the_experiment_beside_the_packet_level_figures(tmp_path: Path) -> None:
    from icefabric.experiment.versus import VersusError, compare

    out = compare(_results(tmp_path))
    assert out["packet_level_ratio"] == pytest.approx(2.0)
    e, i = out["modes"]["ecmp+dcqcn"], out["modes"]["ice"]
    # the model's ECMP paths put 3 flows on one uplink where the plan puts 2 (icectl plan)
    assert out["sim_ratio"] > 1.2
    assert i["sim_busbw_over_bound"] > e["sim_busbw_over_bound"]
    with pytest.raises(VersusError, match="no path for"):
        compare(_results(tmp_path, drop_path=True))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"modes": []}))
    with pytest.raises(VersusError, match="experiment"):
        compare(bad)


def test_versus_names_a_file_that_is_not_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from icefabric.experiment.versus import main as versus_main

    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x00\xff\xfe")
    assert versus_main([str(binary)]) == 2
    assert f"{binary}: not UTF-8 text (byte 1)" in capsys.readouterr().err
    text = tmp_path / "text.json"
    text.write_text("a: [\n")
    assert versus_main([str(text)]) == 2
    err = capsys.readouterr().err
    assert f"{text}: not valid JSON: Expecting value at line 1 column 1" in err
    assert "Traceback" not in err


def test_sim_compare_takes_modes_with_their_qps(capsys: pytest.CaptureFixture[str]) -> None:
    modes = ("eecmp4+dcqcn", "spray+hpcc", "ecmp+pfc")
    code, out, _ = sim(
        capsys, "compare", "--no-progress", "--json", *(a for m in modes for a in ("--config", m))
    )
    assert code == 0
    rep = json.loads(out)
    eecmp, spray, pfc = rep["results"]
    assert [r["label"] for r in rep["results"]] == ["eecmp4+dcqcn", "spray+hpcc", "ecmp+pfc"]
    assert eecmp["collectives"][0]["flows"] == 4 * 16  # 4 QPs per connection
    assert spray["collectives"][0]["flows"] == 2 * 16  # one stripe per spine (2 spines)
    assert pfc["config"]["pfc"] and pfc["config"]["control"] == "none"
    code, _, err = sim(capsys, "compare", "--config", "x+y")
    assert code == 2 and "expected a mode" in err
