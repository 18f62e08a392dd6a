"""Host agents across a controller takeover, over real P4Runtime: a real flow key an agent
reported to the primary is on the switch; the backup that takes over installs it from the state
file (0 writes on the intact fabric), the agent moves to the backup's socket, re-reports and gets
its caps from the new primary."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import wait_until

from icefabric.control.agents.client import AgentClient, Backoff
from icefabric.control.agents.protocol import FlowReport
from icefabric.control.controller import Controller
from icefabric.control.flowkey import FlowKey
from icefabric.control.p4rt import PipelineConfig
from icefabric.experiment.linkdemo import interleaved_hosts, ring_job
from icefabric.experiment.wire import InProcessFabric
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import TopologySpec

pytestmark = pytest.mark.dataplane


@pytest.fixture
def make_ctl(
    spec: TopologySpec, pipeline: PipelineConfig, fab: InProcessFabric, tmp_path: Path
) -> Iterator[Callable[..., Controller]]:
    made: list[Controller] = []

    def make(name: str, **kw: object) -> Controller:
        c = Controller(
            spec,
            pipeline,
            addresses=fab.addresses,
            state_file=tmp_path / "state.json",
            connect_timeout=5.0,
            probe_interval_s=0.0,
            **kw,  # type: ignore[arg-type]
        )
        made.append(c)
        c.start()
        c.agents.listen(tmp_path / f"{name}-agents.sock", heartbeat_s=1.0)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.stop()


def _real_keys_on(ctl: Controller, leaf: str) -> set[tuple[int, int]]:
    return {
        (int(e.match["udp_src_port"]), int(e.match["dst_qp"]))
        for e in ctl.pool[leaf].read_table(n.TABLE_FLOW_PATH)
    }


def test_a_real_key_survives_a_takeover_and_the_agent_follows(
    make_ctl: Callable[..., Controller], tmp_path: Path
) -> None:
    primary = make_ctl("primary")
    backup = make_ctl("backup", backup=True)
    assert primary.active and not backup.active
    primary.add_job(ring_job(interleaved_hosts(primary.topo), channels=1, name="ring"))
    flow = next(f for f in primary.flows.values() if f.src_host == "h1")
    src = primary.spec.host(flow.src_host).address
    dst = primary.spec.host(flow.dst_host).address
    key = FlowKey(src_ip=src, dst_ip=dst, udp_sport=50123, dst_qp=0x4321)
    caps: list[dict[FlowKey, float]] = []
    client = AgentClient(
        [tmp_path / "primary-agents.sock", tmp_path / "backup-agents.sock"],
        "h1",
        on_caps=caps.append,
        backoff=Backoff(initial_s=0.01, max_s=0.1),
    )
    client.report_flows([FlowReport(job="ring", flow_id=flow.flow_id, key=key)])
    client.start()
    try:
        leaf = primary.spec.host("h1").leaf
        assert wait_until(lambda: (50123, 0x4321) in _real_keys_on(primary, leaf))
        assert wait_until(lambda: bool(caps) and key in caps[-1])
        assert backup.agents.server is not None and backup.agents.server.hosts() == []

        primary.stop()
        assert wait_until(lambda: backup.active), "backup did not take over"
        writes = sum(s.writes for s in backup.last_resync.values())
        assert writes == 0, f"takeover rewrote {writes} entries (the real key was lost?)"
        assert (50123, 0x4321) in _real_keys_on(backup, leaf)
        # the agent moved to the backup's socket and re-reported; caps come from there
        assert wait_until(
            lambda: backup.agents.server is not None and backup.agents.server.hosts() == ["h1"]
        )
        server = backup.agents.server
        assert wait_until(lambda: backup.agents.flows.reported.get("h1", {}).get(flow.flow_id))
        assert wait_until(lambda: server.stats.caps_pushed >= 1 and key in caps[-1])
        assert client.stats.connects == 2
    finally:
        client.close()
