"""Fixtures of the unit tier: ice.p4's P4Info with no device behind it, and a Controller built on
it that talks to no switch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from icefabric.control.controller import Controller
    from icefabric.control.p4rt import PipelineConfig
    from icefabric.topo.spec import TopologySpec

ROOT = Path(__file__).resolve().parents[2]
OfflineController = Callable[..., "Controller"]


@pytest.fixture(scope="session")
def pipeline() -> PipelineConfig:
    """ice.p4's P4Info for the embedded target (no device config: nothing runs it)."""
    from icefabric.control.p4rt import PipelineConfig

    compiler = pytest.importorskip("icefabric.target.compiler")
    program = compiler.load_program(ROOT / "p4src" / "ice.p4")
    return PipelineConfig(p4info=program.p4info, device_config=b"{}", cookie=1, kind="embedded")


@pytest.fixture
def offline_controller(pipeline: PipelineConfig) -> OfflineController:
    """``make(spec, state_file, active=True)``: a Controller as after a takeover with no switch
    connected: the switches are taken to hold base forwarding, and writes reach no switch."""
    from icefabric.control.controller import Controller

    def make(spec: TopologySpec, state_file: Path, *, active: bool = True) -> Controller:
        c = Controller(spec, pipeline, state_file=state_file)
        c.installer.holds_all(c.desired())
        c.active = active
        return c

    return make
