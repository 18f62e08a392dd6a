"""Packet-level scenarios of the peers matrix (issue 19): unplanned background traffic and a link
that goes down mid-collective, in virtual time (presets background, link-down)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from icefabric.experiment.presets import load_preset
from icefabric.experiment.runner import run_experiment
from icefabric.experiment.virtual import VirtualEngine

pytestmark = [pytest.mark.dataplane, pytest.mark.slow]


def _links(m: dict) -> dict[str, int]:
    return {ln["link"]: ln["bytes"] for ln in m["links"]}


def test_background_flows_cross_the_fabric_unplanned(engine: VirtualEngine) -> None:
    exp = replace(load_preset("background"), modes=("ecmp+dcqcn", "ice"))
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
    exp = replace(load_preset("link-down"), modes=("ecmp+dcqcn", "ice"))
    assert exp.link_down is not None
    doc = run_experiment(exp, out_base=None, engine=engine).doc
    a, b = exp.link_down.a, exp.link_down.b
    for m in doc["modes"]:
        assert m["ok"], m["error"]
        assert m["psn_losses"] == 0 and m["drops"] == 0, m["mode"]
        assert m["engine"]["link_down"] == f"{a}-{b}"
        links = _links(m)
        # down after 150 of ~600-2,000 us: the leaf's other uplink carried most of its bytes
        assert links[f"{a}>{b}"] < links[f"{a}>spine2"], (m["mode"], links)
