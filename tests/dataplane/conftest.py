"""Fixtures of the ICE data-plane tests (target chosen by ICE_TARGET=embedded|bmv2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import (
    TargetUnavailable,
    _bmv2_build,
    bmv2_unavailable_reason,
    program_path,
    target_name,
)
from leaf_spine import LeafSpine, Options, build_first_leaf, build_leaf_spine

from icefabric.control.p4rt import PipelineConfig
from icefabric.experiment.virtual import VirtualEngine
from icefabric.experiment.wire import InProcessFabric
from icefabric.experiment.wiring import WireFabric
from icefabric.topo.spec import TopologySpec, load_topology

ROOT = Path(__file__).resolve().parents[2]


# The controller against the example fabric (test_fabric_*, test_link_failure_detection): the
# demo's 2x4 leaf-spine of in-process embedded switches, or with ICE_TARGET=bmv2 of
# simple_switch_grpc processes (icefabric.experiment.bmv2_wire) with p4c's build of ice.p4 as the pipeline.
@pytest.fixture(scope="module")
def spec() -> TopologySpec:
    return load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    if target_name() == "bmv2":
        reason = bmv2_unavailable_reason()
        if reason:
            pytest.skip(reason)
        path = program_path()
        return PipelineConfig.for_bmv2(*_bmv2_build(str(path), path.stat().st_mtime))
    return PipelineConfig.for_embedded(ROOT / "p4src" / "ice.p4")


# The virtual-time experiment engine (test_experiment_virtual, test_sim_versus): ice.p4 compiled
# for the embedded target once for the whole session.
@pytest.fixture(scope="session")
def engine() -> VirtualEngine:
    eng = VirtualEngine()
    eng.pipeline()
    return eng


@pytest.fixture
def fab(spec: TopologySpec) -> Iterator[WireFabric]:
    if target_name() == "bmv2":
        from icefabric.experiment.bmv2_wire import Bmv2WireFabric

        try:
            wire = Bmv2WireFabric(spec)
        except TargetUnavailable as exc:
            pytest.skip(str(exc))
        with wire as f:
            yield f  # the same API as InProcessFabric (WireFabric), on BMv2
        return
    with InProcessFabric(spec) as f:
        yield f


@pytest.fixture
def leaf_spine_factory() -> Iterator[object]:
    """Build leaf-spine fabrics (or the first leaf alone) with given Options; every one is torn
    down after the test."""
    built: list[LeafSpine] = []

    def build(opts: Options | None = None, *, first_leaf_only: bool = False) -> LeafSpine:
        # first_leaf_only: L1 alone, uplinks unlinked (leaf_spine.build_first_leaf)
        try:
            ls = build_first_leaf(opts) if first_leaf_only else build_leaf_spine(opts)
        except TargetUnavailable as exc:
            pytest.skip(str(exc))
        built.append(ls)
        return ls

    try:
        yield build
    finally:
        for ls in built:
            ls.close()


@pytest.fixture
def fabric(leaf_spine_factory: object) -> LeafSpine:
    """The default leaf-spine fabric (planned + flowlet, INT and feedback on)."""
    return leaf_spine_factory()  # type: ignore[operator]


def pytest_report_header() -> str:
    """Say which target the data-plane tests run against."""
    return f"ICE data-plane target: {target_name()}"
