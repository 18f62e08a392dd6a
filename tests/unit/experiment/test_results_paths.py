"""Which switches each flow crossed, as results.json records them (``mode_paths``)."""

from icefabric.experiment.results import mode_paths

ICE = {"mode": "ice", "paths": {"j/c0/r0->r1": ["leaf1", "spine1", "leaf2"]}, "engine": {}}
ECMP = {
    "mode": "ecmp+dcqcn",
    "paths": {},  # a DCQCN mode carries no INT
    "engine": {
        "ecmp_model": {
            "links_checked": 16,
            "links_off": ["leaf1-spine2"],
            "predicted_paths": {"j/c0/r0->r1": ["leaf1", "spine2", "leaf2"]},
        }
    },
}


def test_int_paths_come_first() -> None:
    paths, source = mode_paths(ICE)
    assert paths == {"j/c0/r0->r1": ["leaf1", "spine1", "leaf2"]}
    assert source == "INT reports"


def test_a_mode_without_int_uses_the_checked_ecmp_model_and_says_how_well_it_matched() -> None:
    paths, source = mode_paths(ECMP)
    assert paths == {"j/c0/r0->r1": ["leaf1", "spine2", "leaf2"]}
    assert source == "ECMP model, 15/16 fabric links as predicted"


def test_nothing_recorded() -> None:
    assert mode_paths({"mode": "ice", "paths": {}, "engine": {}}) == ({}, "none recorded")
