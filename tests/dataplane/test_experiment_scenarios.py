"""Packet-level scenarios of the peers matrix (issue 19): unplanned background traffic and a link
that goes down mid-collective, in virtual time (presets background, link-down)."""

from __future__ import annotations

import pytest

from icefabric.experiment.config import Experiment, parse_experiment
from icefabric.experiment.presets import PRESET_DIR, load_preset
from icefabric.experiment.runner import run_experiment
from icefabric.experiment.virtual import VirtualEngine

pytestmark = [pytest.mark.dataplane, pytest.mark.slow]


def _smaller(name: str, **changes: object) -> Experiment:
    """Preset ``name`` with a 1 MiB collective (and ``changes`` at the top level), modes
    ECMP + DCQCN and ICE: the same scenario in a quarter of the packets."""
    data = dict(load_preset(name).data)
    data["workload"] = {**data["workload"], "message_bytes": "1MiB"}
    data.update(changes, modes=["ecmp+dcqcn", "ice"])
    return parse_experiment(data, source=f"{name} (smaller)", base=PRESET_DIR)


def _links(m: dict) -> dict[str, int]:
    return {ln["link"]: ln["bytes"] for ln in m["links"]}


def test_background_flows_cross_the_fabric_unplanned(engine: VirtualEngine) -> None:
    bg = [{**b, "bytes": "2MiB"} for b in load_preset("background").data["background"]]
    exp = _smaller("background", background=bg)
    doc = run_experiment(exp, out_base=None, engine=engine).doc
    senders = {b.src for b in exp.background}
    for m in doc["modes"]:
        assert m["ok"], m["error"]
        assert m["psn_losses"] == 0 and m["drops"] == 0, m["mode"]
        links = _links(m)
        for h in senders:  # every background host sent
            leaf = next(x.leaf for x in exp.topology.hosts if x.name == h)
            assert links[f"{h}>{leaf}"] > 0, (m["mode"], h)
        # ICE's INT paths are the job's flows only: the controller never planned background
        assert all(not fid.startswith("background") for fid in m["paths"]), m["mode"]
    ecmp = next(m for m in doc["modes"] if m["mode"] == "ecmp+dcqcn")
    model = ecmp["engine"]["ecmp_model"]  # the switches hashed background like the job's QPs
    assert model["links_checked"] > 0 and model["links_off"] == [], model
    ice = next(m for m in doc["modes"] if m["mode"] == "ice")
    assert ice["engine"]["cap_pushes"] >= 2


def test_a_link_down_mid_collective_moves_the_traffic_without_loss(engine: VirtualEngine) -> None:
    ld = {**load_preset("link-down").data["link_down"], "at_us": 40}  # 1 MiB: ~150 us ideal
    exp = _smaller("link-down", link_down=ld)
    assert exp.link_down is not None
    doc = run_experiment(exp, out_base=None, engine=engine).doc
    a, b = exp.link_down.a, exp.link_down.b
    for m in doc["modes"]:
        assert m["ok"], m["error"]
        assert m["psn_losses"] == 0 and m["drops"] == 0, m["mode"]
        assert m["engine"]["link_down"] == f"{a}-{b}"
        links = _links(m)
        # down after 40 of ~150-500 us: the leaf's other uplink carried most of its bytes
        assert links[f"{a}>{b}"] < links[f"{a}>spine2"], (m["mode"], links)


def test_spray_spreads_every_leafs_packets_over_its_uplinks_without_loss(
    engine: VirtualEngine,
) -> None:
    exp = _smaller("ecmp-collides")
    exp = parse_experiment({**exp.data, "modes": ["spray+hpcc"]}, source="spray", base=PRESET_DIR)
    doc = run_experiment(exp, out_base=None, engine=engine).doc
    (m,) = doc["modes"]
    assert m["ok"], m["error"]
    # the receivers placed every out-of-order packet: nothing lost, nothing dropped
    assert m["psn_losses"] == 0 and m["drops"] == 0
    links = _links(m)
    for leaf in sorted({h.leaf for h in exp.topology.hosts}):
        up = [links[f"{leaf}>spine1"], links[f"{leaf}>spine2"]]
        # per packet in turn (bucket = PSN mod 64): each uplink carries half of the leaf's bytes
        assert abs(up[0] - up[1]) <= 0.1 * sum(up), (leaf, up)


def test_unplanned_flows_start_at_what_the_caps_leave(engine: VirtualEngine) -> None:
    """The start table (control/congestion/starts.py): ICE's background flows start at what
    the ring's caps leave on their paths, not at the line rate, so no uplink the caps fill is
    overrun: a shorter queue, the ring faster, than with the table off (`ice.starts`)."""
    bg = [{**b, "bytes": "2MiB"} for b in load_preset("background").data["background"]]
    got = {}
    for starts in (True, False):
        exp = _smaller("background", background=bg, ice={"starts": starts})
        exp = parse_experiment({**exp.data, "modes": ["ice"]}, source="bg", base=PRESET_DIR)
        (m,) = run_experiment(exp, out_base=None, engine=engine).doc["modes"]
        assert m["ok"], m["error"]
        assert m["psn_losses"] == 0 and m["drops"] == 0
        assert m["engine"]["background_sent_bytes"] > 0
        got[starts] = m
    on, off = got[True], got[False]
    assert on["queue_packets"]["p99"] < off["queue_packets"]["p99"], (on, off)
    assert on["busbw_over_bound"] > off["busbw_over_bound"]
