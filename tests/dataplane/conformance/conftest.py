"""Fixtures of the conformance suite: one small P4 program per feature on the embedded target."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from icefabric.target.compiler import Program, load_program
from icefabric.target.device import Device
from icefabric.target.runtime import ActionCall, ManualClock, Match, TableEntry

PROGRAMS = Path(__file__).parent / "programs"


def program(name: str) -> Program:
    """Compile a conformance program by file stem."""
    return load_program(PROGRAMS / f"{name}.p4")


def add_entry(
    dev: Device, table: str, match: tuple[Match, ...], action: str, *params: int, priority: int = 0
) -> None:
    """Insert a table entry through the runtime Table API."""
    assert dev.pipeline is not None
    dev.pipeline.tables[table].insert(
        TableEntry(match=match, priority=priority, action=ActionCall(action, tuple(params)))
    )


def send(dev: Device, port: int, data: bytes) -> list[tuple[int, bytes]]:
    """Inject one packet, run the switch until idle and return what left (port, bytes)."""
    dev.inject(port, data)
    dev.run_until_idle()
    return dev.collect()


@pytest.fixture
def make_switch() -> Iterator[Callable[..., Device]]:
    """Factory: a Device running a conformance program on a manual clock."""
    made: list[Device] = []

    def make(name: str, *, cpu_port: int | None = None) -> Device:
        dev = Device(cpu_port=cpu_port, clock=ManualClock(1_000_000))
        dev.set_program(program(name))
        made.append(dev)
        return dev

    yield make
    for dev in made:
        stop = getattr(dev, "stop", None)
        if callable(stop):
            stop()
