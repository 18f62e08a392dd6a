"""Experiment files and presets: validated on load, every problem named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from icefabric.experiment.config import (
    ExperimentError,
    IceKnobs,
    load_experiment,
    parse_experiment,
)
from icefabric.experiment.presets import (
    DEFAULT_PRESET,
    load_preset,
    preset_names,
    preset_path,
)
from icefabric.traffic.workload import build_schedule, check_against_demand

GOOD = {
    "name": "t",
    "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 1}},
    "workload": {"collective": "all-reduce", "channels": 1, "message_bytes": "1MiB"},
}


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_and_its_schedule_matches_the_plan(name: str) -> None:
    exp = load_preset(name)
    for job, slices in exp.jobs:
        sched = build_schedule(job, slices=slices)
        assert check_against_demand(sched, job) == []
    assert exp.modes and exp.engine == "virtual"


def test_default_preset_is_the_issue_fabric() -> None:
    exp = load_preset(DEFAULT_PRESET)
    leaves = {h.leaf for h in exp.topology.hosts}
    assert len(leaves) == 4 and len(exp.topology.hosts) == 8
    assert sum(1 for s in exp.topology.switches if s.role == "spine") == 2
    (ph,) = exp.job.phases
    assert (ph.collective, ph.algorithm, ph.channels) == ("all-reduce", "ring", 2)
    assert exp.modes == ("ecmp+dcqcn", "ice")
    hosts = [r.host for r in exp.job.ranks]  # every ring neighbour on another leaf
    leaf = {h.name: h.leaf for h in exp.topology.hosts}
    assert all(leaf[a] != leaf[b] for a, b in zip(hosts, hosts[1:] + hosts[:1], strict=True))


def test_defaults_and_round_trip() -> None:
    exp = parse_experiment(GOOD)
    assert exp.modes == ("ecmp+dcqcn", "ice") and exp.seed == 1
    assert exp.rates.scale == 0.001 and exp.rates.mtu_bytes == 4096
    assert exp.topology.interleaved_hosts() == [r.host for r in exp.job.ranks]
    again = parse_experiment({**GOOD, "workload": {"job": exp.to_dict()["job"]}})
    assert again.job == exp.job


def test_file_paths_resolve_relative_to_the_file(tmp_path: Path) -> None:
    topo = Path(__file__).resolve().parents[3] / "topo" / "examples" / "leaf_spine_2x2.yaml"
    (tmp_path / "fab.yaml").write_text(topo.read_text())
    (tmp_path / "x.yaml").write_text(
        yaml.safe_dump(
            {
                **GOOD,
                "topology": {"file": "fab.yaml"},
                "workload": {**GOOD["workload"], "hosts": "all"},
            }
        )
    )
    exp = load_experiment(tmp_path / "x.yaml")
    assert exp.topology.name == "ls-2x2"


@pytest.mark.parametrize(
    ("patch", "expect"),
    [
        ({"name": "a b"}, "name: expected"),
        ({"colour": 1}, "colour: unknown key"),
        ({"modes": ["ice", "ecmp"]}, "modes[1]: expected one of ecmp+dcqcn"),
        ({"modes": ["ice", "ice"]}, "modes[1]: ice is listed twice"),
        ({"seed": -1}, "seed: expected an integer"),
        ({"rates": {"scale": 2}}, "rates.scale: expected a number in (0, 1]"),
        ({"rates": {"mtu_bytes": 100}}, "rates.mtu_bytes: expected an integer 256..9000"),
        ({"engine": "ns3"}, "engine: expected one of virtual, mininet"),
        ({"target": "tofino"}, "target: expected one of embedded, bmv2"),
        ({"target": "bmv2"}, "target: bmv2 runs on engine mininet only"),
        (
            {"topology": {"leaf_spine": {"leaves": 0, "spines": 2, "hosts_per_leaf": 1}}},
            "topology.leaf_spine",
        ),
        ({"topology": {"file": "/nonexistent.yaml"}}, "cannot read"),
        ({"topology": "x"}, "topology: expected a mapping with one key"),
        (
            {"workload": {"collective": "all-reduce", "job": "x.yaml"}},
            "expected exactly one of job",
        ),
        ({"workload": {"collective": "broadcast"}}, "collective: expected one of"),
        ({"workload": {"collective": "all-reduce", "hosts": ["h1", "h9"]}}, "no host 'h9'"),
        ({"workload": {"collective": "all-reduce", "slices": 0}}, "workload.slices"),
        ({"limits": {"wall_s": 0}}, "limits.wall_s"),
        ({"background": [{"src": "h1", "dst": "h1", "bytes": 10}]}, "background[0]: expected two"),
        ({"background": [{"src": "h1", "dst": "h9", "bytes": 10}]}, "background[0]: expected two"),
        ({"background": [{"src": "h1", "dst": "h2"}]}, "background[0]: expected a mapping"),
        ({"background": [{"src": "h1", "dst": "h2", "bytes": "2GiB"}]}, "background[0].bytes"),
        ({"link_down": {"a": "leaf1", "b": "leaf2", "at_us": 1}}, "link_down: no link between"),
        ({"link_down": {"a": "leaf1", "b": "spine1"}}, "link_down: expected {a"),
        (
            {"link_down": {"a": "leaf1", "b": "spine1", "at_us": 1}, "engine": "mininet"},
            "engine: background and link_down run on engine virtual only",
        ),
        ({"modes": ["ecmp+pfc"]}, "modes[0]: expected one of"),
    ],
)
def test_bad_input_names_file_key_and_expectation(patch: dict, expect: str) -> None:
    with pytest.raises(ExperimentError) as ei:
        parse_experiment({**GOOD, **patch}, source="x.yaml")
    text = str(ei.value)
    assert expect in text and text.startswith("x.yaml: "), text
    assert "\n" not in text.strip() or all(line.startswith("x.yaml: ") for line in ei.value.errors)


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ExperimentError, match="known: ablations"):
        preset_path("nope")
    with pytest.raises(ExperimentError):
        preset_path("../config")


def test_not_a_mapping_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="expected a mapping"):
        parse_experiment([1, 2])
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(ExperimentError, match="not valid YAML"):
        load_experiment(p)


def test_run_topology_stretches_delays_like_the_rates() -> None:
    from icefabric.experiment.config import run_topology

    exp = parse_experiment({**GOOD, "rates": {"scale": 0.001, "link_delay_us": 2}})
    spec = run_topology(exp)
    assert spec.defaults.link_delay_us == pytest.approx(2000.0)
    assert all(spec.link_delay(ln) == pytest.approx(2000.0) for ln in spec.links)
    assert exp.to_dict()["rates"]["link_delay_us"] == 2.0
    with pytest.raises(ExperimentError, match=r"rates\.link_delay_us"):
        parse_experiment({**GOOD, "rates": {"link_delay_us": -1}})


def test_control_delay_scales_and_nccl_log_jobs_are_learned_late() -> None:
    exp = parse_experiment({**GOOD, "rates": {"scale": 0.001, "control_delay_us": 50}})
    assert exp.rates.run_control_delay_us() == pytest.approx(50_000.0)
    assert exp.to_dict()["rates"]["control_delay_us"] == 50.0
    assert parse_experiment(GOOD).rates.control_delay_us == 100.0
    with pytest.raises(ExperimentError, match=r"rates\.control_delay_us: expected a number"):
        parse_experiment({**GOOD, "rates": {"control_delay_us": "soon"}})
    assert exp.phases_known_ahead
    assert not load_preset("nccl-log").phases_known_ahead


def test_ice_knobs_from_the_file_and_the_command_line() -> None:
    from icefabric.control.cli.common import CliError
    from icefabric.experiment.cli import parse_ice_overrides
    from icefabric.experiment.config import MODES
    from icefabric.experiment.options import cap_target, ice_params

    exp = parse_experiment({**GOOD, "ice": {"anchor": False, "eta": 0.9}})
    assert exp.to_dict()["ice"] == {
        "anchor": False,
        "derived_ai": True,
        "eta": 0.9,
        "sample_n": 32,
        "sample_gap": IceKnobs().sample_gap,
        "starts": True,
    }
    assert not parse_experiment({**GOOD, "ice": {"starts": False}}).ice.starts
    with pytest.raises(ExperimentError, match=r"ice\.starts: expected true or false"):
        parse_experiment({**GOOD, "ice": {"starts": 1}})
    assert parse_experiment({**GOOD, "ice": {"sample_gap": 0}}).ice.sample_gap == 0.0
    for bad in (-1, 101, "x", True):
        with pytest.raises(ExperimentError, match=r"ice\.sample_gap: expected a number"):
            parse_experiment({**GOOD, "ice": {"sample_gap": bad}})
    with pytest.raises(ExperimentError, match=r"ice\.sample_n: expected a power of two"):
        parse_experiment({**GOOD, "ice": {"sample_n": 12}})
    p = ice_params(exp)
    assert (p.anchor, p.derived_ai, p.eta) == (False, True, 0.9)
    assert cap_target(exp, MODES["ice"]) == 0.95  # no anchor: HPCC's headroom in the caps too
    with pytest.raises(ExperimentError, match=r"ice\.anchor: expected true or false"):
        parse_experiment({**GOOD, "ice": {"anchor": "yes"}})
    with pytest.raises(ExperimentError, match=r"ice\.eta: expected a number in \(0, 1\]"):
        parse_experiment({**GOOD, "ice": {"eta": 1.5}})
    knobs = parse_ice_overrides("derived_ai=false, eta=0.99", exp.ice)
    assert (knobs.anchor, knobs.derived_ai, knobs.eta) == (False, False, 0.99)
    for bad, msg in (("anchor", "KEY=VALUE"), ("x=1", "unknown key"), ("anchor=no", "true or")):
        with pytest.raises(CliError, match=msg):
            parse_ice_overrides(bad, exp.ice)


def test_ice_caps_leave_room_for_ices_own_bytes() -> None:
    from icefabric.experiment.config import MODES
    from icefabric.experiment.options import cap_target, ice_wire_overhead, mode_options

    # a 4 KiB RoCEv2 frame (4154 bytes) on a 3-switch path, INT on every frame, feedback 1 in 8:
    # shim 8 + two records 72 + a 186-byte feedback frame / 8
    assert ice_wire_overhead(4154, 3, int_every_n=1, feedback_every_n=8) == pytest.approx(
        (8 + 72 + 186 / 8) / 4154
    )
    # sampled 1 in 32 for both: 8 + (72 + 186) / 32
    assert ice_wire_overhead(4154, 3, int_every_n=32, feedback_every_n=32) == pytest.approx(
        (8 + 258 / 32) / 4154
    )
    exp = parse_experiment({**GOOD, "ice": {"sample_n": 8}})
    # INT and feedback on 1 in 8: shim 8 + (two records 72 + a 186-byte feedback frame) / 8
    assert cap_target(exp, MODES["ice"]) == pytest.approx(1 / (1 + (8 + 258 / 8) / 4154))
    assert cap_target(exp, MODES["ice-paths"]) == 1.0
    opts = mode_options(exp, MODES["ice"], report_every_n=64)
    assert (opts.int_sample_every_n, opts.feedback_every_n, opts.report_every_n) == (8, 1, 8)
    opts = mode_options(exp, MODES["ice-paths"], report_every_n=64)
    assert (opts.int_sample_every_n, opts.feedback_every_n, opts.report_every_n) == (1, 0, 64)


def test_the_sampling_time_floor_in_the_options_and_the_overhead() -> None:
    from icefabric.experiment.config import MODES
    from icefabric.experiment.options import ice_overhead_for, ice_wire_overhead, mode_options

    exp = parse_experiment({**GOOD, "ice": {"sample_n": 32, "sample_gap": 0.5}})
    # the controller writes the gap in the fabric's time: sample_gap x ICE's base RTT
    opts = mode_options(exp, MODES["ice"], report_every_n=64, base_rtt_us=9413.1)
    assert (opts.int_sample_every_n, opts.int_sample_max_gap_us) == (32, 4707)
    assert mode_options(exp, MODES["ice"], report_every_n=64).int_sample_max_gap_us == 0
    no_int = mode_options(exp, MODES["ice-paths"], report_every_n=64, base_rtt_us=9413.1)
    assert no_int.int_sample_max_gap_us == 0  # no INT, no floor
    off = parse_experiment({**GOOD, "ice": {"sample_gap": 0}})
    assert (
        mode_options(off, MODES["ice"], report_every_n=64, base_rtt_us=9413.1).int_sample_max_gap_us
        == 0
    )
    # the floor counts where a line-rate flow sends fewer frames in the gap than N
    assert ice_wire_overhead(
        4154, 3, int_every_n=32, feedback_every_n=32, gap_frames=14.0
    ) == pytest.approx((8 + 258 / 14) / 4154)
    assert ice_wire_overhead(
        4154, 3, int_every_n=32, feedback_every_n=32, gap_frames=100.0
    ) == pytest.approx((8 + 258 / 32) / 4154)
    # and the spec's T and rate give the frames in the gap: more gap, less overhead, down to 1/N
    spec, mtu = exp.topology, exp.rates.mtu_bytes
    o = [ice_overhead_for(spec, mtu, 32, g) for g in (0.25, 0.5, 100.0)]
    assert o[0] > o[1] > o[2] == pytest.approx(ice_overhead_for(spec, mtu, 32, 0.0))


def test_mininet_queue_rates_from_the_link_rates() -> None:
    from icefabric.experiment.mininet import MininetEngineError, queue_rate_args
    from icefabric.topo.generators import leaf_spine

    args = queue_rate_args(leaf_spine(leaves=2, spines=2, hosts_per_leaf=2), 5e-5)
    assert args[:2] == ["--queue-rate-bps", "1:5000000"] and len(args) == 8  # ports 1-4
    uneven = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1)  # hosts 100, uplinks 50 Gbit/s
    with pytest.raises(MininetEngineError, match="one rate per port number"):
        queue_rate_args(uneven, 5e-5)


def test_bmv2_queue_rates_per_switch_in_full_data_frames() -> None:
    """BMv2 sets each switch's ports on their own (no one-rate-per-port-number limit), in
    packets/s of mtu_bytes + 58-byte frames."""
    from icefabric.experiment.mininet import frame_bytes, queue_pps, queue_rate_commands
    from icefabric.topo.generators import leaf_spine

    assert frame_bytes(1024) == 1082
    assert queue_pps(5e6, 1024) == round(5e6 / 8 / 1082) == 578
    assert queue_pps(1.0, 1024) == 1  # never 0 (BMv2 would stop the queue)
    uneven = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1)  # hosts 100, uplinks 50 Gbit/s
    cmds = queue_rate_commands(uneven, 5e-5, 1024)
    assert set(cmds) == {s.name for s in uneven.switches}
    leaf = cmds["leaf1"].splitlines()
    host_port = uneven.host("h1").port
    assert f"set_queue_rate 578 {host_port}" in leaf
    assert sum(1 for ln in leaf if ln.startswith("set_queue_rate 289 ")) == 2  # two uplinks
    assert all(ln.startswith("set_queue_rate 289 ") for ln in cmds["spine1"].splitlines())


def test_icectl_target_bmv2_usage_errors_are_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--target bmv2 needs the mininet engine, and the BMv2 tools on PATH: else exit 2 with one
    line, before anything runs (nothing written under --out)."""
    from icefabric.icectl import main

    out = tmp_path / "r"
    base = ["experiment", "run", "--preset", "mininet-small", "--out", str(out)]
    assert main([*base, "--target", "bmv2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--engine mininet" in err and len(err.splitlines()) == 1, err
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert main([*base, "--engine", "mininet", "--target", "bmv2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "p4c-bm2-ss" in err and "simple_switch_grpc" in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_background_and_link_down_round_trip() -> None:
    exp = parse_experiment(
        {
            **GOOD,
            "background": [{"src": "h1", "dst": "h2", "bytes": "1MiB"}],
            "link_down": {"a": "leaf1", "b": "spine2", "at_us": 5, "drain_us": 1},
        }
    )
    assert exp.background[0].bytes == 1 << 20 and exp.link_down is not None
    d = exp.to_dict()
    assert d["background"] == [{"src": "h1", "dst": "h2", "bytes": 1 << 20}]
    assert d["link_down"] == {"a": "leaf1", "b": "spine2", "at_us": 5.0, "drain_us": 1.0}
    assert parse_experiment(GOOD).to_dict()["link_down"] is None


def test_incast_storage_is_an_unplanned_incast_on_a_ring_member() -> None:
    from icefabric.experiment.matrix import PACKET_PRESETS

    exp = load_preset("incast-storage")
    assert PACKET_PRESETS["incast-storage"] == "incast-storage"
    assert {b.dst for b in exp.background} == {"h10"} and len(exp.background) == 3
    ring = set(exp.data["workload"]["hosts"])
    assert "h10" in ring and not {b.src for b in exp.background} & ring
