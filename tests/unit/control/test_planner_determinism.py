"""The planner's counted work budget: the same input gives the same plan whatever the machine's
load (a CPU-burning thread runs during one of the two plans), the budget bounds the repair, and
the users that promise reproducible results (simulator, experiment engines, bench) use it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from icefabric.control.ccl.demand import Demand, demand_from_job
from icefabric.control.planner import (
    DEFAULT_WORK_BUDGET,
    Budget,
    Planner,
    PlanState,
    cut_lower_bound,
    greedy,
    improve,
    improve_within,
)
from icefabric.control.planner.bench import scattered_ring_job
from icefabric.control.topology import Topology
from icefabric.topo.generators import fat_tree, leaf_spine
from icefabric.topo.spec import TopologySpec

# fat-tree(8), every host a rank, 3 channels: greedy ends above the bound and the repair needs a
# few hundred steps (190 for seed 1, 460 for seed 2), so a budget below that cuts the search.
SPEC = fat_tree(8)
CUT = 120  # steps: well below what seeds 1 and 2 need


def _demand(spec: TopologySpec, seed: int) -> Demand:
    job = scattered_ring_job(
        spec, servers=len(spec.hosts), gpus_per_server=1, channels=3, size=1 << 30, seed=seed
    )
    return demand_from_job(job)


@contextmanager
def _busy_cpu() -> Iterator[None]:
    """A thread burning CPU (and the GIL) for as long as the block runs; the block starts once
    the thread is busy."""
    stop = threading.Event()
    busy = threading.Event()

    def burn() -> None:
        x = 0
        while not stop.is_set():
            for k in range(10_000):
                x ^= k * k
            busy.set()

    t = threading.Thread(target=burn, name="cpu-burner", daemon=True)
    t.start()
    try:
        assert busy.wait(60), "the CPU burner did not start"
        yield
    finally:
        stop.set()
        t.join()


def _plan(seed: int, work_budget: int) -> tuple[dict[str, int], float, int, float]:
    """Choices, max load, repair steps spent, lower bound."""
    p = Planner(Topology(SPEC), method="heuristic", work_budget=work_budget)
    plan = p.add(_demand(SPEC, seed))
    return p.choices(), plan.max_load_s, p.last_steps, plan.lower_bound_s


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("work_budget", [CUT, DEFAULT_WORK_BUDGET], ids=["cut", "default"])
def test_same_input_same_plan_on_a_loaded_machine(seed: int, work_budget: int) -> None:
    quiet = _plan(seed, work_budget)
    with _busy_cpu():
        loaded = _plan(seed, work_budget)
    assert loaded == quiet  # choices, max load and steps spent: identical
    choices, _, steps, _ = quiet
    assert steps > 0 and all(c >= 0 for c in choices.values())
    if work_budget == CUT:
        assert steps == CUT  # the budget, not the search, ended the repair


def test_the_default_budget_leaves_the_search_unbounded_here() -> None:
    """Seeds 1 and 2 reach the lower bound within the default budget; a cut search does not."""
    for seed in (1, 2):
        _, full, steps, bound = _plan(seed, DEFAULT_WORK_BUDGET)
        cut = _plan(seed, CUT)[1]
        assert full == pytest.approx(bound, rel=1e-9)
        assert CUT < steps < DEFAULT_WORK_BUDGET
        assert cut > full


def test_steps_bound_the_repair_and_are_counted() -> None:
    st = PlanState(Topology(SPEC))
    greedy(st, st.add_flows(list(_demand(SPEC, 2).flows)))
    before = st.max_load()
    assert improve(st, steps=0) == 0 and st.max_load() == before
    b = Budget.of(steps=50)
    assert b.counted and not b.spent()
    improve_within(st, b)
    assert b.used == 50 and b.spent() and not b.take()
    assert st.max_load() <= before
    with pytest.raises(ValueError, match="needs steps or seconds"):
        Budget.of()
    with pytest.raises(ValueError, match="work_budget: expected >= 0 steps, got -1"):
        Planner(Topology(SPEC), work_budget=-1)


def test_failure_replans_are_counted_too() -> None:
    """A replan after a failure runs on replan_work_budget (default work_budget // 20)."""
    results = []
    for busy in (False, True):
        p = Planner(Topology(SPEC), method="heuristic", work_budget=DEFAULT_WORK_BUDGET)
        p.add(_demand(SPEC, 1))
        if busy:
            with _busy_cpu():
                p.replan_after_failure(switches=["core0", "agg1_0"])
        else:
            p.replan_after_failure(switches=["core0", "agg1_0"])
        results.append((p.choices(), p.last_steps))
    assert results[0] == results[1]
    assert p.deterministic and p._budget(0.0, 0.0, replan=True).steps == DEFAULT_WORK_BUDGET // 20


def test_the_simulator_routes_the_same_under_load() -> None:
    from icefabric.sim.network import SimNetwork, route

    net = SimNetwork(Topology(SPEC))
    flows = list(_demand(SPEC, 2).flows)  # 384 flows: the heuristic, not the MILP
    quiet, state = route(net, flows, "ice")
    with _busy_cpu():
        loaded, _ = route(net, flows, "ice")
    assert np.array_equal(quiet.path, loaded.path)
    assert state.max_load() == pytest.approx(cut_lower_bound(state), rel=1e-9)


def test_small_instances_solved_exactly_plan_the_same_under_load() -> None:
    """auto takes the MILP for <= exact_max_flows choosing flows: its optimum is one plan."""
    spec = leaf_spine(leaves=4, spines=3, hosts_per_leaf=2)
    job = scattered_ring_job(spec, servers=8, gpus_per_server=1, channels=2, size=1 << 26, seed=5)
    d = demand_from_job(job)  # 16 flows: the MILP decides
    quiet = Planner(Topology(spec), work_budget=DEFAULT_WORK_BUDGET)
    quiet.add(d)
    loaded = Planner(Topology(spec), work_budget=DEFAULT_WORK_BUDGET)
    with _busy_cpu():
        loaded.add(d)
    assert quiet.last_method == loaded.last_method == "exact"
    assert quiet.choices() == loaded.choices()
