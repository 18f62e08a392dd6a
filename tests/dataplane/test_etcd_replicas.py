"""Controller replicas sharing an etcd cluster, over real P4Runtime to in-process switches:
one primary, election id = term, takeover with the same paths and 0 writes, real keys and
agents follow, fencing on quorum loss, a partitioned old primary cannot write."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from harness import wait_until

from icefabric.control.agents.client import AgentClient, Backoff
from icefabric.control.agents.protocol import FlowKey, FlowReport
from icefabric.control.controller import Controller
from icefabric.control.fabric import entity_key
from icefabric.control.p4rt import PipelineConfig
from icefabric.control.store import StoreFenced
from icefabric.control.store.etcd import EtcdStore, agent_discovery
from icefabric.control.store.localcluster import LocalEtcdCluster
from icefabric.experiment.linkdemo import interleaved_hosts, ring_job
from icefabric.experiment.wire import InProcessFabric
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import TopologySpec

pytestmark = pytest.mark.dataplane


@pytest.fixture
def make_replica(
    spec: TopologySpec,
    pipeline: PipelineConfig,
    fab: InProcessFabric,
    etcd3: LocalEtcdCluster,
    tmp_path: Path,
) -> Iterator[Callable[[str], Controller]]:
    made: list[Controller] = []

    def make(name: str) -> Controller:
        # 3 s leases: three controllers and six switches in one process on the shared test
        # machine can starve a 1 s lease's keepalives (the e2e test runs the default 1 s)
        store = EtcdStore(etcd3.url, spec.name, name=name, lease_s=3, poll_s=0.05)
        c = Controller(
            spec,
            pipeline,
            addresses=fab.addresses,
            store=store,
            connect_timeout=5.0,
            probe_interval_s=0.0,
        )
        made.append(c)
        c.start()
        server = c.agents.listen(tmp_path / f"{name}-agents.sock", heartbeat_s=0.5)
        store.publish(agent=[f"unix:{server.unix_path}"])
        return c

    try:
        yield make
    finally:
        for c in made:
            c.stop()


def crash(c: Controller) -> None:
    """What SIGKILL leaves behind: no resignation, no keepalive, streams and sockets gone."""
    store = c.store
    assert isinstance(store, EtcdStore)
    store.election._stop.set()
    c._stopping = True
    c.agents.stop()
    c.pool.close_all()


def on_switches(c: Controller) -> dict[str, set[tuple[object, ...]]]:
    out = {}
    for name, conn in c.pool.items():
        out[name] = {entity_key(e) for e in conn.read_table(n.TABLE_FLOW_PATH)}
    return out


def primary_of(ctls: list[Controller]) -> Controller:
    if not wait_until(lambda: sum(c.active for c in ctls) == 1, 30):
        import sys
        import traceback

        stacks = "\n".join(
            "".join(traceback.format_stack(f)[-6:]) for f in sys._current_frames().values()
        )
        raise AssertionError(f"no single primary: {[c.active for c in ctls]}\n{stacks}")
    return next(c for c in ctls if c.active)


def test_the_backup_takes_over_with_the_same_plan_and_the_agent_follows(
    make_replica: Callable[[str], Controller], tmp_path: Path
) -> None:
    ctls = [make_replica(f"r{i}") for i in range(3)]
    p = primary_of(ctls)
    assert p.election_id == p.store.term > 0  # type: ignore[union-attr]
    p.add_job(ring_job(interleaved_hosts(p.topo), channels=2, name="ring"))
    flow = next(f for f in p.flows.values() if f.src_host == "h1")
    key = FlowKey(
        src_ip=p.spec.host(flow.src_host).address,
        dst_ip=p.spec.host(flow.dst_host).address,
        udp_sport=50123,
        dst_qp=0x4321,
    )
    caps: list[dict[FlowKey, float]] = []
    store = p.store
    assert isinstance(store, EtcdStore)
    assert len(store.agent_addresses()) == 3  # every replica's channel, the primary's first
    client = AgentClient(
        store.agent_addresses()[:1],  # only the primary's: etcd tells it where to go next
        "h1",
        on_caps=caps.append,
        backoff=Backoff(initial_s=0.01, max_s=0.1),
        discover=agent_discovery(store.client.endpoints, p.spec.name),
    )
    client.report_flows([FlowReport(job="ring", flow_id=flow.flow_id, key=key)])
    client.start()
    try:
        assert wait_until(lambda: bool(caps) and key in caps[-1])
        assert wait_until(lambda: flow.flow_id in store.load(p.spec.name).flow_keys)
        planned = on_switches(p)
        choices = p.planner.choices()
        old_term = p.election_id
        t0 = time.monotonic()
        crash(p)
        rest = [c for c in ctls if c is not p]
        b = primary_of(rest)
        assert wait_until(lambda: bool(b.takeovers), 10)
        took = time.monotonic() - t0
        assert b.election_id > old_term
        assert b.takeovers[-1]["writes"] == 0  # same plan, real key included: nothing to write
        assert on_switches(b) == planned
        assert b.planner.choices() == choices and set(b.jobs) == {"ring"}
        assert all(conn.is_primary for conn in b.pool.values())
        assert wait_until(lambda: b.agents.server is not None and b.agents.server.hosts() == ["h1"])
        assert wait_until(lambda: key in caps[-1] and client.stats.connects >= 2)
        assert took < 20.0, f"takeover took {took:.2f} s"  # times: the e2e test, -s
    finally:
        client.close()


def test_quorum_loss_fences_the_primary_and_it_recovers(
    make_replica: Callable[[str], Controller], etcd3: LocalEtcdCluster
) -> None:
    a = make_replica("a")
    p = primary_of([a])
    p.add_job(ring_job(interleaved_hosts(p.topo), channels=1, name="ring"))
    term = p.election_id
    etcd3.stop_member(1)
    etcd3.stop_member(2)
    assert wait_until(lambda: not p.active and bool(p.fenced), 10)
    assert "stopped writing" in p.fenced[-1]["reason"]
    with pytest.raises(StoreFenced):
        p.check_fence()
    etcd3.start_member(1, wait=False)
    etcd3.start_member(2, wait=False)
    assert wait_until(lambda: p.active and p.election_id > term, 30)
    assert set(p.jobs) == {"ring"}  # reloaded from etcd


def test_a_partitioned_old_primary_cannot_write(
    make_replica: Callable[[str], Controller],
) -> None:
    ctls = [make_replica("x"), make_replica("y")]
    old = primary_of(ctls)
    old.add_job(ring_job(interleaved_hosts(old.topo), channels=1, name="ring"))
    store = old.store
    assert isinstance(store, EtcdStore)
    # cut its session off from etcd (its keepalives fail), its switch streams stay up
    store.election.client.close()
    store.election.client.endpoints = ["http://127.0.0.1:9"]
    new = next(c for c in ctls if c is not old)
    # fenced by its own clock: writes stop at the last keepalive's lease end less a margin
    # (checked on the election's own deadlines, not on when this thread got to look: a loaded
    # machine delays the look, not the fence)
    assert store.election._deadline < store.election._expires
    assert wait_until(lambda: bool(old.fenced), 10)
    assert not store.election.may_write()
    assert not old.active and not any(conn.is_connected for conn in old.pool.values())
    assert wait_until(lambda: new.active, 15)
    assert new.election_id > old.election_id
    with pytest.raises(StoreFenced):
        old.check_fence()
    with pytest.raises(StoreFenced):  # nor can it commit to etcd: the term is not the leader's
        store.election.term = old.election_id
        store.election._deadline = time.monotonic() + 10
        store.save(replace(old.statefile.snapshot(), jobs=[], choices={}))
    assert set(new.jobs) == {"ring"} and "ring" in {j.name for j in store.load(new.spec.name).jobs}
