"""The fabrics share one API: the embedded real-time fabric (experiment/wire.py) and the BMv2
one (experiment/bmv2_wire.py) expose exactly ``WireFabric``'s public methods, and the virtual-time
fabric the ones it shares with them (no switch processes to kill: its time is driven, not real).
No switch is started: this reads the classes."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from icefabric.experiment.bmv2_wire import Bmv2WireFabric
from icefabric.experiment.virtual_fabric import VirtualFabric
from icefabric.experiment.wire import InProcessFabric
from icefabric.experiment.wiring import WireFabric, wiring
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[2]


def public(cls: type) -> set[str]:
    """Public methods and properties of ``cls`` (its own and inherited), plus the context
    manager pair."""
    names = {n for n in dir(cls) if not n.startswith("_")}
    names |= {"__enter__", "__exit__"} & set(dir(cls))
    return {n for n in names if callable(getattr(cls, n)) or isinstance(getattr(cls, n), property)}


def protocol_members() -> set[str]:
    return {
        n
        for n, v in vars(WireFabric).items()
        if (not n.startswith("_") or n in ("__enter__", "__exit__"))
        and (inspect.isfunction(v) or isinstance(v, property))
    }


def test_real_time_fabrics_have_exactly_the_wire_fabric_api() -> None:
    api = protocol_members()
    assert {"send", "cut_link", "kill_switch", "addresses", "__enter__"} <= api
    assert public(InProcessFabric) == api, public(InProcessFabric) ^ api
    assert public(Bmv2WireFabric) == api, public(Bmv2WireFabric) ^ api
    for name in api - {"addresses"}:  # same parameters, same names
        want = inspect.signature(getattr(WireFabric, name))
        for cls in (InProcessFabric, Bmv2WireFabric):
            got = inspect.signature(getattr(cls, name))
            assert list(got.parameters) == list(want.parameters), (cls.__name__, name, got)


def test_virtual_fabric_shares_the_lifecycle_and_link_cuts() -> None:
    shared = {"start", "stop", "addresses", "cut_link", "heal_link", "__enter__", "__exit__"}
    assert shared <= public(VirtualFabric)
    assert shared <= protocol_members()


def test_wiring_lists_every_port_once_links_then_hosts() -> None:
    spec = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
    wires = wiring(spec)
    ends = [(w.switch, w.port) for w in wires]
    assert len(ends) == len(set(ends)) == 2 * len(spec.links) + len(spec.hosts)
    fabric = [w for w in wires if w.link is not None]
    assert [w.host for w in wires[len(fabric) :]] == list(spec.hosts)
    for w in fabric:  # every wire has its reverse
        assert any(
            (v.switch, v.port, v.peer, v.peer_port) == (w.peer, w.peer_port, w.switch, w.port)
            for v in fabric
        )


def test_bmv2_fabric_without_its_tools_says_what_is_missing() -> None:
    from icefabric.experiment.netns import TargetUnavailable, bmv2_unavailable_reason

    reason = bmv2_unavailable_reason()
    if reason is None:
        pytest.skip("BMv2 tools and root are here: the BMv2 tier runs the fabric")
    spec = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
    with pytest.raises(TargetUnavailable, match="ICE_TARGET=bmv2 needs") as err:
        Bmv2WireFabric(spec)
    assert str(err.value) == reason
