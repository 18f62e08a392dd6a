"""RoCEv2 endpoints and rate agents in the virtual-time fabric (ice.p4 on embedded switches)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from icefabric.control.controller import Controller
from icefabric.control.fabric import FabricOptions
from icefabric.control.p4rt import PipelineConfig
from icefabric.experiment.virtual_fabric import VirtualConfig, VirtualFabric
from icefabric.topo.spec import TopologySpec, load_topology

pytestmark = pytest.mark.dataplane

ROOT = Path(__file__).resolve().parents[2]
SCALE = 1e-3  # 50/100 Gbit/s links run at 50/100 Mbit/s
# Flowlet gaps scale with the link rate too (100 us at 100G -> 100 ms here): flows keep their path.
OPTIONS = FabricOptions(
    mode="ice", feedback_every_n=1, report_every_n=0, flowlet_timeout_us=100_000
)

Build = Callable[..., tuple[VirtualFabric, Controller]]


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return PipelineConfig.for_embedded(ROOT / "p4src" / "ice.p4")


@pytest.fixture(scope="module")
def spec_2x2() -> TopologySpec:
    return load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x2.yaml")


@pytest.fixture
def build(pipeline: PipelineConfig) -> Iterator[Build]:
    made: list[tuple[VirtualFabric, Controller]] = []

    def make(
        spec: TopologySpec, *, options: FabricOptions = OPTIONS, **cfg: Any
    ) -> tuple[VirtualFabric, Controller]:
        vf = VirtualFabric(spec, VirtualConfig(rate_scale=SCALE, **cfg))
        vf.start()
        ctl = Controller(
            spec, pipeline, addresses=vf.addresses, options=options, probe_interval_s=0
        )
        made.append((vf, ctl))
        ctl.start()
        assert ctl.active
        return vf, ctl

    try:
        yield make
    finally:
        for vf, ctl in made:
            ctl.stop()
            vf.stop()


def _one_flow(vf: VirtualFabric, nbytes: int) -> list[tuple[str, Any, int, int, int]]:
    got: list[tuple[str, Any, int, int, int]] = []
    vf.on_message = lambda *a: got.append(a)
    key = vf.open_flow("h1", "h2", job="j", flow_id="j/f")
    vf.post(key, nbytes, tag=42)
    vf.run_until_idle(max_us=10**8)
    return got


def test_one_flow_runs_end_to_end(build: Build, spec_2x2: TopologySpec) -> None:
    vf, _ = build(spec_2x2)
    got = _one_flow(vf, 100_000)
    assert len(got) == 1
    host, key, tag, nbytes, when = got[0]
    assert (host, tag, nbytes) == ("h2", 42, 100_000)
    st = vf.flow_stats()[key]
    assert st.psn_gap_losses == 0 and st.out_of_order == 0
    assert st.packets_received == st.packets_sent == 98  # ceil(100000 / 1024)
    assert st.feedback_received == st.packets_sent  # feedback_every_n = 1: every packet
    assert st.last_rx_us == when
    # The fabric links (50 Mbit/s) are the bottleneck: the flow takes at least its bytes' time.
    assert when >= 100_000 * 8 / 50e6 * 1e6
    assert sum(d.get("queue_full", 0) for d in vf.drops().values()) == 0


def test_same_run_gives_the_same_numbers(build: Build, spec_2x2: TopologySpec) -> None:
    results = []
    for _ in range(2):
        vf, _ = build(spec_2x2)
        got = _one_flow(vf, 60_000)
        stats = {k.to_dict()["qp"]: v.to_dict() for k, v in vf.flow_stats().items()}
        ports = {k: p.to_dict(vf.now_us) for k, p in vf.port_stats().items()}
        results.append((got, stats, ports, vf.now_us))
    assert results[0] == results[1]
