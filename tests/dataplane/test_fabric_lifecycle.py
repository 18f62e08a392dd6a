"""The in-process fabric's stop leaves nothing running: every thread a fabric starts (each
switch's scheduler, its P4Runtime server, the server's idle-timeout scanner) is gone after
``stop``, in real time and in virtual time, also for a switch killed and revived on the way."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from icefabric.experiment.virtual_fabric import VirtualFabric
from icefabric.experiment.wire import InProcessFabric
from icefabric.topo.spec import TopologySpec, load_topology
from icefabric.waiting import poll_until

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"


def _new_threads(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())


def _left_running(before: set[threading.Thread]) -> list[str]:
    """The threads started since ``before`` that are still alive after at most 10 s (a stopped
    thread may take a moment to return from its last wait)."""
    poll_until(lambda: not _new_threads(before), 10.0)
    return _new_threads(before)


FABRICS: dict[str, Callable[[TopologySpec], Any]] = {
    "real-time": InProcessFabric,
    "virtual-time": VirtualFabric,
}


@pytest.mark.parametrize("kind", sorted(FABRICS))
def test_stop_leaves_no_thread_running(kind: str) -> None:
    spec = load_topology(SPEC)
    before = set(threading.enumerate())
    fab = FABRICS[kind](spec)
    fab.start()
    try:
        assert _new_threads(before), "a started fabric runs threads (its servers at least)"
    finally:
        fab.stop()
    assert _left_running(before) == []


def test_a_killed_switch_leaves_no_thread_running() -> None:
    spec = load_topology(SPEC)
    before = set(threading.enumerate())
    with InProcessFabric(spec) as fab:
        name = spec.switches[0].name
        fab.kill_switch(name)
        fab.revive_switch(name)
        fab.restart_switch(name)
        assert name in fab.addresses
    assert _left_running(before) == []
