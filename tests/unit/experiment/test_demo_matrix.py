"""`make demo`'s peers-matrix summary names where ICE wins and where it does not."""

from __future__ import annotations

import io

from rich.console import Console

from icefabric.experiment.demo import _summary_matrix


def test_summary_names_the_scenarios_ice_loses() -> None:
    doc = {
        "gpus": 64,
        "seeds": [1, 2],
        "scenarios": {
            "collisions": {"ice_over_best_peer": 1.25, "best_peer": "ecmp+hpcc"},
            "background": {"ice_over_best_peer": 0.80, "best_peer": "spray+hpcc"},
            "failure": {"ice_over_best_peer": 1.0, "best_peer": "spray+hpcc"},
        },
    }
    buf = io.StringIO()
    _summary_matrix(Console(file=buf, width=400), doc)
    text = buf.getvalue()
    assert "ICE beats the best peer in 1 of 3 scenarios (collisions)" in text
    assert "ICE does not win in: background (spray+hpcc 1.25x ICE)" in text
    assert "failure (" not in text  # a tie is neither a win nor a loss
