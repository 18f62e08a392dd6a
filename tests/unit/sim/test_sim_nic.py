"""The simulator's NIC share (``sim/nic.py``) against the project's general water-filling."""

from __future__ import annotations

import numpy as np
import pytest

from icefabric.control.congestion.waterfill import max_min_fill
from icefabric.sim.nic import nic_round_robin, nic_share


@pytest.mark.parametrize("seed", range(20))
def test_round_robin_is_max_min_with_one_link_per_flow(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, hosts = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    host = rng.integers(0, hosts, n)
    want = rng.random(n) * rng.choice([0.05, 1.0, 4.0], n)
    cap = rng.random(hosts) + 0.2
    got = nic_round_robin(want, host, cap)
    ref = max_min_fill(np.arange(n), host, cap, n, demand=want)
    assert got == pytest.approx(ref, abs=1e-9)


def test_a_cut_flow_keeps_what_it_wants_and_the_others_share_the_rest() -> None:
    inj = np.array([0.5, 0.1, 0.5, 0.2, 0.2])  # host 0: three flows; host 1: two under its line
    host = np.array([0, 0, 0, 1, 1])
    nic_share(inj, host, np.array([0.7, 1.0]))
    # proportional scaling would have given the 0.1 flow 0.064 and the others 0.318
    assert inj == pytest.approx([0.3, 0.1, 0.3, 0.2, 0.2])
