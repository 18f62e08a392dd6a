"""The one mode registry (traffic/modes.py) and how each engine reads it."""

from __future__ import annotations

import pytest

from icefabric.experiment.config import ExperimentError, packet_modes, parse_experiment
from icefabric.sim.config import config_for, uncontrolled_config
from icefabric.traffic.modes import MODES, Mode, ModeError, get_mode, modes_for


def test_int_follows_the_rate_algorithm() -> None:
    for m in MODES.values():
        assert m.int_on == (m.rate == "ice"), m.name
    assert get_mode("ecmp+hpcc").int_on and not get_mode("ecmp+dcqcn").int_on
    assert not get_mode("ecmp+pfc").int_on


def test_switch_and_sim_views_of_a_mode() -> None:
    assert get_mode("ice").lb_mode == "ice" and get_mode("ice").planned
    assert get_mode("flowlet+hpcc").lb_mode == "ice" and not get_mode("flowlet+hpcc").planned
    assert get_mode("eecmp4+dcqcn").lb_mode == "ecmp"
    assert get_mode("eecmp16+hpcc").sim_routing == "ecmp" and get_mode("eecmp16+hpcc").qps == 16
    assert get_mode("spray+hpcc").sim_routing == "spray"
    cfg = config_for(get_mode("ecmp+pfc"))
    assert (cfg.routing, cfg.control, cfg.pfc, cfg.use_caps) == ("ecmp", "none", True, False)
    cfg = config_for(get_mode("ice"), seed=3)
    assert (cfg.routing, cfg.control, cfg.use_caps, cfg.seed) == ("ice", "ice", True, 3)
    ceil = uncontrolled_config(get_mode("ice"))
    assert (ceil.routing, ceil.control, ceil.use_caps, ceil.pfc) == ("ice", "none", False, False)


def test_inconsistent_modes_are_refused() -> None:
    with pytest.raises(ModeError, match="qps"):
        Mode(name="x", balance="ecmp", rate="dcqcn", qps=4)
    with pytest.raises(ModeError, match="caps need planned"):
        Mode(name="x", balance="ecmp", rate="ice", caps=True)
    with pytest.raises(ModeError, match="rate"):
        Mode(name="x", balance="ecmp", rate="timely")
    with pytest.raises(ModeError, match="expected one of"):
        get_mode("nope")


def test_experiment_files_take_packet_modes_only() -> None:
    assert set(packet_modes()) == set(modes_for("virtual")) | set(modes_for("mininet"))
    assert "ecmp+hpcc" in packet_modes() and "ecmp+pfc" not in packet_modes()
    base = {
        "name": "t",
        "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
        "workload": {"collective": "all-reduce", "message_bytes": "64KiB"},
    }
    exp = parse_experiment({**base, "modes": ["ecmp+hpcc", "flowlet+hpcc"]})
    assert exp.modes == ("ecmp+hpcc", "flowlet+hpcc")
    with pytest.raises(ExperimentError, match=r"modes\[0\].*simulator only"):
        parse_experiment({**base, "modes": ["ecmp+pfc"]})


def test_fabric_options_turn_int_on_by_the_rate_algorithm() -> None:
    from icefabric.experiment.options import mode_options

    base = {
        "name": "t",
        "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
        "workload": {"collective": "all-reduce", "message_bytes": "64KiB"},
    }
    exp = parse_experiment(base)
    hpcc = mode_options(exp, get_mode("ecmp+hpcc"), report_every_n=64)
    dcqcn = mode_options(exp, get_mode("ecmp+dcqcn"), report_every_n=64)
    assert hpcc.mode == dcqcn.mode == "ecmp"
    # INT and feedback on the same sampled packets, 1 in ice.sample_n
    assert hpcc.int_path_kinds() and hpcc.feedback_every_n == 1
    assert hpcc.int_sample_every_n == exp.ice.sample_n
    assert dcqcn.int_path_kinds() == () and dcqcn.feedback_every_n == 0
