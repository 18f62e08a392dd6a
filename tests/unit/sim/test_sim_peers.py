"""The peer schemes in the fluid simulator: E-ECMP's QPs, spraying, PFC, the ceiling, failures
and unplanned background traffic (traffic/modes.py, sim/stripes.py, sim/scenarios.py)."""

from __future__ import annotations

import numpy as np
import pytest

from icefabric.control.ccl.job import parse_job
from icefabric.control.planner.ecmp import EcmpModel
from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology
from icefabric.sim.bound import paths_ceiling
from icefabric.sim.config import config_for, uncontrolled_config
from icefabric.sim.engine import LinkFailure, Simulator
from icefabric.sim.matrix import run_seed, stripes_for, summarise
from icefabric.sim.scenarios import SCENARIOS, build, collisions, ring_step_cap
from icefabric.sim.stripes import spray_stripes, stripe
from icefabric.sim.workload import workload_from_jobs
from icefabric.topo.generators import leaf_spine
from icefabric.traffic.modes import MODES, get_mode

MSG = 8 << 20


def _ring(hosts: list[str], channels: int = 2) -> object:
    return parse_job(
        {
            "name": "j",
            "hosts": hosts,
            "phases": [
                {
                    "name": "ar",
                    "collective": "all-reduce",
                    "algorithm": "ring",
                    "channels": channels,
                    "message_bytes": MSG,
                }
            ],
        }
    )


@pytest.fixture(scope="module")
def fabric() -> tuple[object, list[str]]:
    spec = leaf_spine(leaves=4, spines=4, hosts_per_leaf=4, host_rate_gbps=400.0)
    rng = np.random.default_rng(3)
    return spec, [spec.hosts[i].name for i in rng.permutation(len(spec.hosts))]


def _run(spec: object, hosts: list[str], mode: str, *, failures=()):
    m = get_mode(mode)
    topo = Topology(spec)
    w = stripe(workload_from_jobs([_ring(hosts)]), stripes_for(m, topo, len(failures)))
    sim = Simulator(topo, w, config_for(m), failures=failures)
    return sim, sim.run()


def test_eecmp_spreads_a_connection_over_its_qps_by_ice_p4s_hash(fabric) -> None:
    spec, hosts = fabric
    sim, res = _run(spec, hosts, "eecmp4+dcqcn")
    assert res.unfinished == 0 and res.flows == 4 * 32
    topo = Topology(spec)
    state = PlanState(topo)
    state.add_flows(list(sim.work.flows))
    model = EcmpModel(topo)
    rows = np.arange(len(sim.work.flows))
    table, parr = model.bucket_paths(state, rows)
    want = parr[table[rows, model.row_buckets(state, rows)]]
    spread = []
    for i in range(0, len(rows), 4):  # one connection = 4 consecutive rows, one per QP
        spine_links = set()
        for r in range(i, i + 4):
            fabric_links = [
                int(x)
                for x in sim.routes.path[r]
                if x < topo.n_links and topo.links[int(x)].kind == "fabric"
            ]
            assert fabric_links == [int(x) for x in want[r] if x < topo.n_links], r
            spine_links.add(tuple(fabric_links))
        spread.append(len(spine_links))
    assert max(spread) <= 4 and max(spread) > 1  # up to 4 paths, and the hash did spread
    assert len({f.entropy_sport() for f in sim.work.flows}) == len(sim.work.flows)


def test_spray_puts_a_connection_evenly_on_every_spine(fabric) -> None:
    spec, hosts = fabric
    sim, res = _run(spec, hosts, "spray+hpcc")
    k = spray_stripes(Topology(spec))
    assert k == 4 and sim.work.stripes == 4
    topo = Topology(spec)
    leaf = {h.name: h.leaf for h in spec.hosts}
    for i in range(0, len(sim.work.flows), k):
        f = sim.work.flows[i]
        if leaf[f.src_host] == leaf[f.dst_host]:
            continue
        spines = {topo.links[int(sim.routes.path[r][1])].dst for r in range(i, i + k)}
        assert len(spines) == 4, f.flow_id
    assert res.unfinished == 0
    assert res.collectives[0].busbw_over_bound > 0.9  # no collisions left to lose to


def test_pfc_is_lossless_with_no_end_host_control(fabric) -> None:
    spec, hosts = fabric
    _, res = _run(spec, hosts, "ecmp+pfc")
    assert res.unfinished == 0 and res.cnps == 0
    assert res.config["pfc"] and res.config["control"] == "none"


def test_the_ceiling_is_at_least_every_scheme_on_the_same_paths(fabric) -> None:
    spec, hosts = fabric
    topo = Topology(spec)
    for name in ("ecmp+dcqcn", "ecmp+hpcc", "eecmp4+dcqcn", "spray+hpcc", "ice", "ice-paths"):
        sim, res = _run(spec, hosts, name)
        top = paths_ceiling(topo, sim.work, config_for(get_mode(name)), (0,))
        assert res.collectives[0].busbw_over_bound <= top + 1e-9, (name, top)


def test_a_failed_link_moves_its_flows_and_the_collective_completes(fabric) -> None:
    spec, hosts = fabric
    topo = Topology(spec)
    _, res0 = _run(spec, hosts, "ecmp+dcqcn")
    sim0, _ = _run(spec, hosts, "ecmp+dcqcn")
    used = [
        int(x)
        for x in sim0.routes.path[:, 1]
        if x < topo.n_links and topo.links[int(x)].kind == "fabric"
    ]
    link = used[0]
    fail = (LinkFailure(link=link, at_us=50.0, detect_us=100.0),)
    for name in ("ecmp+dcqcn", "ice", "spray+hpcc"):
        sim, res = _run(spec, hosts, name, failures=fail)
        assert res.unfinished == 0 and res.reroutes > 0, name
        assert not (sim.routes.path == link).any(), name  # nothing left on the dead link
    assert res0.collectives[0].time_us > 0


def test_background_is_unplanned_uncapped_and_hashed() -> None:
    case = build("background", 32, 1, MSG)
    w = case.workload
    assert w.unplanned is not None and w.unplanned.sum() == case.notes["background_flows"] > 0
    topo = Topology(case.spec)
    sim = Simulator(topo, w, config_for(MODES["ice"]))
    ecmp = Simulator(topo, w, config_for(MODES["ecmp+dcqcn"]))
    bg = np.flatnonzero(w.unplanned)
    assert (sim.routes.path[bg] == ecmp.routes.path[bg]).all()  # ice.p4's hash, not the plan
    res = sim.run()
    assert res.unfinished == 0


def test_job_arrives_starts_job_b_late_and_times_it_from_its_start() -> None:
    case = build("job-arrives", 32, 1, MSG)
    two = build("two-jobs", 32, 1, MSG)
    at = case.notes["arrive_us"]
    assert at > 0
    a, b = case.workload.collectives
    assert (a.job, a.delay_us, b.job, b.delay_us) == ("job-a", 0.0, "job-b", at)
    # the same fabric, hosts and flows as two-jobs: only job-b's start moved
    assert case.workload.flows == two.workload.flows
    res = Simulator(Topology(case.spec), case.workload, config_for(MODES["ice"])).run()
    ra, rb = res.collectives
    assert ra.start_us == 0.0 and rb.start_us >= at
    assert rb.time_us == pytest.approx(rb.end_us - rb.start_us)
    assert res.unfinished == 0


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_runs_every_scheme(scenario: str) -> None:
    runs = [
        run_seed(scenario, seed, ("ecmp+dcqcn", "spray+hpcc", "ice"), 32, 4 << 20) for seed in (1,)
    ]
    cell = summarise({scenario: runs}, ("ecmp+dcqcn", "spray+hpcc", "ice"))[scenario]
    assert cell["best_peer"] in ("ecmp+dcqcn", "spray+hpcc")
    for name, s in cell["schemes"].items():
        assert s["busbw_over_bound"]["median"] > 0, name
        # no scheme beats the ceiling of its paths, background and failure included
        assert s["busbw_over_bound"]["median"] <= s["ceiling"]["median"] + 1e-9, name
        assert s["seeds"] == 1
    assert cell["ice_over_best_peer"] == pytest.approx(
        float(np.median([r["scheme"]["ice"] / r["scheme"][cell["best_peer"]] for r in runs])),
        abs=1e-3,
    )


def test_the_matrix_on_a_local_dask_cluster_equals_the_serial_run() -> None:
    from icefabric.sim.matrix import run_matrix

    kw = {"scenarios": ("collisions",), "schemes": ("ecmp+dcqcn",), "seeds": 2}
    serial = run_matrix(**kw, gpus=32, message=1 << 20)
    pooled = run_matrix(**kw, gpus=32, message=1 << 20, workers=2)
    assert serial["scenarios"] == pooled["scenarios"]

    def strip(doc: dict) -> list[dict]:
        return [
            {k: v for k, v in r.items() if k != "cpu_s"}
            for runs in doc["per_seed"].values()
            for r in runs
        ]

    assert strip(serial) == strip(pooled)


@pytest.mark.parametrize(("gpus", "message", "cap"), [(32, 3_200_000, 0.5), (16, 6_400_000, 2.0)])
def test_a_ring_of_small_steps_is_latency_bound_at_ring_step_cap(
    gpus: int, message: int, cap: float
) -> None:
    """A ring step takes one simulator step at least, so a ring all-reduce with small steps
    reaches ``ring_step_cap`` of the bound even with planned paths and no control (the 1,024-GPU
    matrix at 32 MiB: every scheme at 0.164 = 8 channels x 4 KiB / 4 us ÷ 400G); with steps big
    enough it reaches the bound."""
    assert ring_step_cap(1024, 32 << 20) == pytest.approx(0.164, abs=5e-4)
    assert ring_step_cap(gpus, message) == pytest.approx(cap)
    case = collisions(gpus, 1, message)
    res = Simulator(Topology(case.spec), case.workload, uncontrolled_config(MODES["ice"])).run()
    assert res.collectives[0].busbw_over_bound == pytest.approx(min(cap, 1.0), rel=0.02)


def test_the_spread_table_has_a_row_per_scheme_and_a_column_per_scenario() -> None:
    from icefabric.sim.matrix import markdown_spread

    runs = [
        {
            "scheme": {"ecmp+dcqcn": 0.5 + 0.1 * i, "ice": 0.9},
            "ceiling": {"ecmp+dcqcn": 0.7, "ice": 1.0},
        }
        for i in range(3)
    ]
    schemes = ("ecmp+dcqcn", "ice")
    doc = {"schemes_order": list(schemes), "scenarios": summarise({"a": runs, "b": runs}, schemes)}
    lines = markdown_spread(doc).splitlines()
    assert lines[0] == "| scheme | a | b |"
    assert lines[2] == "| ecmp+dcqcn | 0.600 [0.520, 0.680] | 0.600 [0.520, 0.680] |"
    assert lines[3].startswith("| ice | 0.900 [0.900, 0.900] |")
    assert lines[4].startswith("| ceiling | 1.000 [1.000, 1.000] |")
    assert lines[5] == "| best peer | ecmp+dcqcn | ecmp+dcqcn |"
    assert lines[6].startswith("| ICE ÷ best peer | 1.50 [1.33, 1.74] |")  # 0.9 / 0.5..0.7
