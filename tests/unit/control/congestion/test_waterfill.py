"""Water-filling against hand-computed max-min rates, and the max-min property on random
graphs (feasible, and every flow has a bottleneck or meets its demand)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from icefabric.control.congestion import max_min_fill, max_min_rates


def _close(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-9), (k, got[k], v)


def test_one_link_is_shared_equally() -> None:
    _close(max_min_rates({"a": [0], "b": [0], "c": [0]}, {0: 9.0}), {"a": 3, "b": 3, "c": 3})


def test_two_bottlenecks() -> None:
    # B (4) is f1's and f3's bottleneck: 2 each; f2 gets what f1 leaves on A (10): 8
    paths = {"f1": ["A", "B"], "f2": ["A"], "f3": ["B"]}
    _close(max_min_rates(paths, {"A": 10.0, "B": 4.0}), {"f1": 2, "f2": 8, "f3": 2})


def test_parking_lot() -> None:
    # a long flow over three unit links, one short flow on each: 1/2 each
    paths = {"long": [1, 2, 3], "s1": [1], "s2": [2], "s3": [3]}
    _close(
        max_min_rates(paths, {1: 1.0, 2: 1.0, 3: 1.0}),
        {"long": 0.5, "s1": 0.5, "s2": 0.5, "s3": 0.5},
    )


def test_three_levels() -> None:
    # Level 0.5: L1 (1) is full (f0, f1 frozen at 0.5; L2 has 3 - 1.5 = 1.5 left, L3 2 - 1).
    # Level 1.0: L3 (f3, f4: 1 left, 0.5 more each) is full before L2 (1.5 / 2 = 0.75 more):
    # f3 = f4 = 1. Then f2 alone takes L2's last 0.5: 1.5.
    paths = {"f0": ["L1"], "f1": ["L1", "L2"], "f2": ["L2"], "f3": ["L2", "L3"], "f4": ["L3"]}
    _close(
        max_min_rates(paths, {"L1": 1.0, "L2": 3.0, "L3": 2.0}),
        {"f0": 0.5, "f1": 0.5, "f2": 1.5, "f3": 1.0, "f4": 1.0},
    )


def test_demands_cap_flows_and_free_capacity_for_others() -> None:
    paths = {"small": [0], "b": [0], "c": [0]}
    _close(max_min_rates(paths, {0: 10.0}, {"small": 2.0}), {"small": 2, "b": 4, "c": 4})
    # every demand below its share: each flow gets exactly its demand
    _close(
        max_min_rates(paths, {0: 10.0}, {"small": 1.0, "b": 2.0, "c": 3.0}),
        {"small": 1, "b": 2, "c": 3},
    )


def test_zero_capacity_empty_paths_and_repeated_links() -> None:
    got = max_min_rates(
        {"dead": [0, 1], "ok": [1], "free": [], "capped": []}, {0: 0.0, 1: 6.0}, {"capped": 5.0}
    )
    _close(got, {"dead": 0.0, "ok": 6.0, "free": math.inf, "capped": 5.0})
    # a link listed twice on one path counts the flow once
    _close(max_min_rates({"a": [0, 0], "b": [0]}, {0: 2.0}), {"a": 1.0, "b": 1.0})


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="link 'X' has no capacity"):
        max_min_rates({"f": ["X"]}, {"A": 1.0})
    with pytest.raises(ValueError, match="link 5 has no capacity"):
        max_min_rates({"f": [0, 5]}, {0: 1.0, 1: 1.0})
    with pytest.raises(ValueError, match="link -1 has no capacity"):
        max_min_rates({"f": [-1]}, {0: 1.0})
    with pytest.raises(ValueError, match="integer link ids"):
        max_min_rates({"f": ["A"]}, {0: 1.0})
    with pytest.raises(ValueError, match="capacity"):
        max_min_rates({"f": ["A"]}, {"A": float("nan")})
    with pytest.raises(ValueError, match="demand"):
        max_min_rates({"f": ["A"]}, {"A": 1.0}, {"f": -1.0})
    with pytest.raises(ValueError, match="outside"):
        max_min_fill(np.array([0]), np.array([5]), np.array([1.0]), 1)


@pytest.mark.parametrize("seed", range(20))
def test_random_graphs_are_max_min_fair(seed: int) -> None:
    rng = random.Random(seed)
    n_links = rng.randint(1, 12)
    cap = {lk: float(rng.choice([0, 1, 2, 5, 10, 40, 100])) for lk in range(n_links)}
    paths = {
        f: rng.sample(range(n_links), rng.randint(1, min(4, n_links)))
        for f in range(rng.randint(1, 30))
    }
    demand = {f: float(rng.randint(1, 30)) for f in paths if rng.random() < 0.3}
    rates = max_min_rates(paths, cap, demand)
    load = {lk: 0.0 for lk in cap}
    for f, p in paths.items():
        for lk in p:
            load[lk] += rates[f]
    for lk in cap:
        assert load[lk] <= cap[lk] * (1 + 1e-9) + 1e-9
    for f, p in paths.items():
        if f in demand and math.isclose(rates[f], demand[f], rel_tol=1e-9):
            continue
        assert rates[f] <= demand.get(f, math.inf) * (1 + 1e-9)
        # a bottleneck: a full link on which no flow gets more than f
        assert any(
            math.isclose(load[lk], cap[lk], rel_tol=1e-7, abs_tol=1e-9)
            and all(rates[g] <= rates[f] * (1 + 1e-7) + 1e-12 for g, q in paths.items() if lk in q)
            for lk in p
        ), (f, rates[f])
