"""Windowed all-to-all (window.py): same time as every pair at once where the fabric does not
block, the NIC bound, each QP's own ECMP hash, rows re-armed as rounds progress."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import JobSpec, parse_job
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import Simulator
from icefabric.sim.network import SimNetwork, route
from icefabric.sim.window import A2aWindow, RoundPaths, reset_rows
from icefabric.sim.workload import workload_from_jobs
from icefabric.topo.generators import leaf_spine
from icefabric.traffic.rate import DcqcnParams
from icefabric.traffic.rate.vector import DcqcnArray

MSG = 64 << 20


def _job(hosts: list[str], per_host: int = 1) -> JobSpec:
    return parse_job(
        {
            "name": "a2a",
            "hosts": hosts,
            "ranks_per_host": per_host,
            "phases": [{"name": "x", "collective": "all-to-all", "message_bytes": MSG}],
        }
    )


def _time(topo: Topology, job: JobSpec, cfg: SimConfig, window: int | None) -> float:
    res = Simulator(topo, workload_from_jobs([job], a2a_window=window), cfg).run()
    assert res.unfinished == 0
    return res.collectives[0].time_us


@pytest.mark.parametrize("per_host", [1, 2])
def test_windowed_matches_all_at_once_and_the_nic_bound(per_host: int) -> None:
    # 16 hosts on a 1:1 leaf-spine with planned paths: nothing blocks but the NICs
    spec = leaf_spine(leaves=2, spines=8, hosts_per_leaf=8, host_rate_gbps=400.0)
    topo = Topology(spec)
    job = _job([h.name for h in spec.hosts], per_host)
    n = 16 * per_host
    # a host sends (n - per_host) / n of MSG per rank over its NIC (its own ranks via NVLink)
    bound = per_host * (n - per_host) * (MSG / n) * 8 / 400e9 * 1e6
    cfg = SimConfig(routing="ice", control="none")
    every = _time(topo, job, cfg, None)
    assert every == pytest.approx(bound, rel=0.01)
    # a window of at least the ranks per NIC keeps the NIC busy through rounds of local peers
    for window in (per_host, 4):
        assert _time(topo, job, cfg, window) == pytest.approx(every, rel=0.01)


def test_windowed_under_ice_control_stays_near_the_bound() -> None:
    spec = leaf_spine(leaves=2, spines=8, hosts_per_leaf=8, host_rate_gbps=400.0)
    topo = Topology(spec)
    job = _job([h.name for h in spec.hosts])
    every = _time(topo, job, SimConfig(routing="ice", control="ice"), None)
    assert _time(topo, job, SimConfig(routing="ice", control="ice"), 4) == pytest.approx(
        every, rel=0.02
    )


def test_rows_pairs_and_bytes_are_those_of_the_all_to_all() -> None:
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=4, host_rate_gbps=400.0)
    job = _job([h.name for h in spec.hosts], per_host=2)
    every = workload_from_jobs([job])
    win = workload_from_jobs([job], a2a_window=3)
    assert len(win) == 2 * 3 * 16 and len(win.windows) == 1
    assert win.windows[0].pairs == len(every)
    assert win.total_bytes == pytest.approx(every.total_bytes)
    assert float(win.size.sum()) == 0.0  # rows start empty; the run arms them
    with pytest.raises(ValueError, match="a2a_window"):
        workload_from_jobs([job], a2a_window=0)
    with pytest.raises(ValueError, match="flowlet"):
        Simulator(Topology(spec), win, SimConfig(routing="flowlet"))


def test_each_peer_flow_takes_its_own_ecmp_hash() -> None:
    spec = leaf_spine(leaves=4, spines=4, hosts_per_leaf=4, host_rate_gbps=400.0)
    topo = Topology(spec)
    net = SimNetwork(topo)
    job = _job([h.name for h in spec.hosts])
    flows = {(f.src_rank, f.dst_rank): f for f in demand_from_job(job)}
    spec_w = workload_from_jobs([job], a2a_window=2).windows[0]
    rp = RoundPaths(spec_w, net, "ecmp")
    n = 16
    spines_used = set()
    for s in (1, 5, 11):
        src = np.arange(n)
        got = rp.get(src, np.full(n, s))
        want, _ = route(net, [flows[(i, (i + s) % n)] for i in range(n)], "ecmp")
        assert np.array_equal(got, want.path)
        spines_used.update(got[:, 1].tolist())
    assert len(spines_used) > 2  # flows of one leaf pair spread over several uplinks


def test_ice_plans_each_shift_beside_the_window() -> None:
    spec = leaf_spine(leaves=2, spines=4, hosts_per_leaf=4, host_rate_gbps=400.0)
    topo = Topology(spec)
    net = SimNetwork(topo)
    job = _job([h.name for h in spec.hosts])
    wd = workload_from_jobs([job], a2a_window=2).windows[0]
    rp = RoundPaths(wd, net, "ice")
    n = 8
    loads = []
    for s in range(1, n):
        p = rp.get(np.arange(n), np.full(n, s))
        cross = p[:, 1] != net.pad
        loads.append(np.bincount(p[cross, 1], minlength=net.pad + 1))
        assert len(rp.state.live_rows()) <= 2 * n  # at most the window's shifts stay planned
    # with the window's previous shift planned too, two shifts never share a leaf uplink more
    # than twice: a 4-spine leaf sends at most 4 flows per shift
    for a, b in itertools.pairwise(loads):
        assert int((a + b).max()) <= 2


def test_reset_rows_gives_new_queue_pairs_fresh_state() -> None:
    p = DcqcnParams()
    d = DcqcnArray(4, p)
    twin = DcqcnArray(4, p)
    d.on_cnp(np.arange(4), 10.0)
    cut = d.rates().copy()
    assert (cut < p.line_rate_bps).all()
    reset_rows(d, twin, np.array([1, 3]))
    r = d.rates()
    assert r[1] == r[3] == twin.rates()[0]
    assert r[0] == cut[0] and r[2] == cut[2]


def test_window_spec_counts_pairs_across_hosts() -> None:
    w = A2aWindow(
        group=0,
        job="j",
        phase="p",
        channel=0,
        ranks=(0, 1, 2, 3),
        hosts=("a", "a", "b", "c"),
        pair_bytes=10.0,
        window=1,
        rows=np.zeros((4, 1, 2), dtype=np.int64),
    )
    assert w.pairs == 16 - (4 + 1 + 1)
    assert w.total_bytes == 100.0


def test_cli_runs_a_windowed_all_to_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from icefabric.icectl import main

    job = tmp_path / "a2a.yaml"
    job.write_text(
        "name: a\nhosts: [h1, h2, h3, h4, h5, h6, h7, h8]\n"
        "phases:\n  - {name: x, collective: all-to-all, message_bytes: 8388608}\n"
    )
    topo = str(Path(__file__).resolve().parents[3] / "topo" / "examples" / "leaf_spine_2x4.yaml")
    argv = ["sim", "run", "--topo", topo, "--job", str(job), "--no-progress", "--json"]
    assert main([*argv, "--a2a-window", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["flows"] == 2 * 2 * 8 and out["unfinished"] == 0
    assert main([*argv, "--a2a-window", "2", "--routing", "flowlet"]) != 0
    assert "flowlet" in capsys.readouterr().err


def test_a_windowed_all_to_all_is_sized_by_its_rows_not_its_pairs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run-size bound counts the rows a windowed all-to-all holds (2 W n per channel),
    not its n (n - 1) pairs: `sim.scale`'s 4,096-GPU case (16.8 M pairs in 131,072 rows) was
    refused before it ran."""
    import icefabric.sim.workload as workload

    hosts = [h.name for h in leaf_spine(leaves=4, spines=2, hosts_per_leaf=8).hosts]
    job = _job(hosts)  # 32 ranks: 992 pairs per channel
    pairs = sum(len(p.ranks) * (len(p.ranks) - 1) * p.channels for p in job.phases)
    monkeypatch.setattr(workload, "MAX_SIM_FLOWS", pairs - 1)
    with pytest.raises(ValueError, match="flows"):
        workload_from_jobs([job])
    w = workload_from_jobs([job], a2a_window=4)  # 2 x 4 x 32 rows per channel
    assert len(w.flows) <= pairs - 1
