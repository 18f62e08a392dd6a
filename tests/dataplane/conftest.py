"""Fixtures of the ICE data-plane tests (target chosen by ICE_TARGET=embedded|bmv2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import TargetUnavailable, target_name
from leaf_spine import LeafSpine, Options, build_leaf_spine

from icefabric.control.p4rt import PipelineConfig
from icefabric.control.wire import InProcessFabric
from icefabric.topo.spec import TopologySpec, load_topology

ROOT = Path(__file__).resolve().parents[2]


# The controller against the example fabric of in-process embedded switches (test_fabric_*,
# test_link_failure_detection): the demo's 2x4 leaf-spine, ice.p4 as the embedded pipeline.
@pytest.fixture(scope="module")
def spec() -> TopologySpec:
    return load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return PipelineConfig.for_embedded(ROOT / "p4src" / "ice.p4")


@pytest.fixture
def fab(spec: TopologySpec) -> Iterator[InProcessFabric]:
    with InProcessFabric(spec) as f:
        yield f


@pytest.fixture
def leaf_spine_factory() -> Iterator[object]:
    """Build leaf-spine fabrics with given Options; every one is torn down after the test."""
    built: list[LeafSpine] = []

    def build(opts: Options | None = None) -> LeafSpine:
        try:
            ls = build_leaf_spine(opts)
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
