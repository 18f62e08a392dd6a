"""The controller's bookkeeping with no switch connected: jobs, failures, modes, state, API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from _jobs import ring_job

from icefabric.control import fabric
from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.controller import Controller, JobRejected
from icefabric.control.daemon.api import RequestError
from icefabric.control.daemon.service import api_handlers
from icefabric.control.p4rt import PipelineConfig, TableEntry
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import load_topology
from icefabric.waiting import Deadline

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


@pytest.fixture
def ctl(offline_controller: Callable[..., Controller], tmp_path: Path) -> Controller:
    # as after a takeover, without switches (not active: nothing here waits on writes)
    return offline_controller(SPEC, tmp_path / "state.json", active=False)


def flow_paths(c: Controller) -> dict[str, list[TableEntry]]:
    return {
        sw: [e for e in ents.values() if isinstance(e, TableEntry) and e.table == n.TABLE_FLOW_PATH]
        for sw, ents in c.installed.items()
    }


def test_add_job_records_flow_entries_on_first_hops(ctl: Controller) -> None:
    res = ctl.add_job(ring_job())
    assert res["flows"] == 8 and res["job"] == "ring"
    fp = flow_paths(ctl)
    assert sum(len(v) for v in fp.values()) == 8
    assert all(not fp[s] for s in ("spine1", "spine2"))
    # base forwarding is there too
    assert len(ctl.installed["leaf1"]) > 200
    assert [j["name"] for j in ctl.list_jobs()] == ["ring"]
    rows = ctl.paths(job="ring")
    assert len(rows) == 8 and ctl.paths(flow=rows[0]["flow"]) == [rows[0]]


def test_job_validation(ctl: Controller) -> None:
    ctl.add_job(ring_job())
    with pytest.raises(JobRejected, match="already running"):
        ctl.add_job(ring_job())
    with pytest.raises(JobRejected, match="h42"):
        ctl.add_job(ring_job("other", ("h1", "h42")))
    with pytest.raises(JobRejected, match="phases"):
        ctl.add_job({"name": "x", "hosts": ["h1", "h3"], "phases": "nope"})
    with pytest.raises(JobRejected, match="no job 'zzz'"):
        ctl.remove_job("zzz")


def test_remove_job_deletes_its_entries_only(ctl: Controller) -> None:
    ctl.add_job(ring_job("a"))
    ctl.add_job(ring_job("b", ("h2", "h4", "h6", "h8")))
    assert sum(len(v) for v in flow_paths(ctl).values()) == 16
    ctl.remove_job("a")
    left = flow_paths(ctl)
    assert sum(len(v) for v in left.values()) == 8
    srcs = {e.match["src_addr"] for v in left.values() for e in v}
    assert srcs == {"10.0.1.2", "10.0.2.2", "10.0.3.2", "10.0.4.2"}


def test_link_failure_moves_flows_off_the_link_and_fixes_groups(ctl: Controller) -> None:
    ctl.add_job(ring_job())
    rep = ctl.fail_link("leaf1", "spine1")
    dead = set(
        ctl.topo.links_between("leaf1", "spine1") + ctl.topo.links_between("spine1", "leaf1")
    )
    for ents in flow_paths(ctl).values():
        for e in ents:
            assert not dead & set(ctl.tags.path(int(e.params["path_tag"])).links)
    cands = [
        e
        for e in ctl.installed["leaf1"].values()
        if isinstance(e, TableEntry) and e.table == n.TABLE_PATH_CANDIDATE
    ]
    assert cands and all(
        not dead & set(ctl.tags.path(int(e.params["path_tag"])).links) for e in cands
    )
    assert rep.moved >= 1 and rep.entries >= rep.moved and rep.install_ms >= 0
    assert ctl.status()["failed_links"] == ["leaf1:3->spine1:1"]
    back = ctl.restore_link("leaf1", "spine1")
    assert back.what == "link leaf1-spine1 up" and not ctl.status()["failed_links"]


def test_mode_switch_rewrites_lb_config_of_leaves(ctl: Controller) -> None:
    res = ctl.set_mode("ecmp")
    # per leaf: lb_config and one int_policy entry per path kind (int_sampling is unchanged)
    assert res["entries"] == 4 * (1 + len(fabric.ALL_PATH_KINDS))
    lb = [
        e
        for e in ctl.installed["leaf2"].values()
        if isinstance(e, TableEntry) and e.table == n.TABLE_LB_CONFIG
    ]
    assert lb[0].params["mode"] == n.LB_MODE_ECMP
    assert ctl.set_mode("ecmp")["entries"] == 0


def test_state_file_carries_jobs_to_a_backup(pipeline: PipelineConfig, ctl: Controller) -> None:
    ctl.add_job(ring_job())
    assert ctl.state_file is not None and ctl.state_file.exists()
    backup = Controller(SPEC, pipeline, backup=True, state_file=ctl.state_file)
    assert backup.election_id < ctl.election_id
    backup.statefile.load()
    assert set(backup.flows) == set(ctl.flows)
    assert backup.desired() == ctl.desired()  # the same plan: a takeover writes nothing
    ctl.fail_link("leaf2", "spine2")
    later = Controller(SPEC, pipeline, backup=True, state_file=ctl.state_file)
    later.statefile.load()
    assert (later.topo.failed == ctl.topo.failed).all() and later.topo.failed.sum() == 2
    assert later.desired() == ctl.desired()


def test_api_handlers_map_errors_to_usage(ctl: Controller) -> None:
    h = api_handlers(ctl)
    with pytest.raises(RuntimeError, match="standby"):
        h["jobs.add"]({"job": ring_job()})
    st = h["status"]({})
    assert st["role"] == "backup" and st["jobs"] == 0
    ctl.active = True  # as after a takeover (writes go nowhere: no switch is connected)
    assert h["jobs.add"]({"job": ring_job()})["flows"] == 8
    with pytest.raises(RequestError, match="already running"):
        h["jobs.add"]({"job": ring_job()})
    with pytest.raises(RequestError, match="expected a job description"):
        h["jobs.add"]({"job": "ring.yaml"})
    with pytest.raises(RequestError, match="mode"):
        h["mode"]({"mode": "turbo"})
    with pytest.raises(RequestError, match="no link between"):
        h["link"]({"a": "leaf1", "b": "leaf2", "state": "down"})
    with pytest.raises(RequestError, match="limit"):
        h["int"]({"limit": -1})
    res = h["int"]({"limit": 5})
    assert (res["received"], res["undecodable"], res["reports"], res["links"]) == (0, 0, [], [])
    st = h["status"]({})
    assert (
        st["role"] == "primary"
        and st["jobs"] == 1
        and set(st["switches"]) == {s.name for s in SPEC.switches}
    )
    assert h["switches"]({})["leaf1"]["address"] == "127.0.0.1:9559"


def test_reports_name_the_flow_by_its_key(ctl: Controller) -> None:
    from icefabric.traffic.packets import IntHop, TelemetryReport

    ctl.add_job(ring_job())
    f = next(iter(ctl.flows.values()))
    from icefabric.control.install import flow_key

    k = flow_key(ctl.topo, f)
    payload = bytes(
        TelemetryReport(
            reason=1,
            path_tag=3,
            switch_id=2,
            flow_src_addr=k.src_ip,
            flow_dst_addr=k.dst_ip,
            flow_src_port=k.udp_sport,
            flow_dst_qp=k.dst_qp,
            hops=[IntHop(switch_id=2), IntHop(switch_id=5), IntHop(switch_id=1)],
        )
    )
    from icefabric.control.p4rt import PacketIn

    ctl.switch_events.on_packet(
        "leaf2", PacketIn(payload=payload, metadata={"reason": n.PUNT_REASON_TELEMETRY})
    )
    ctl.switch_events.on_packet(
        "leaf2", PacketIn(payload=b"\x00" * 3, metadata={"reason": n.PUNT_REASON_TELEMETRY})
    )
    ctl.switch_events.on_packet(
        "leaf2", PacketIn(payload=b"arp", metadata={"reason": n.PUNT_REASON_ARP})
    )
    (rep,) = ctl.reports.recent()
    assert rep["flow"] == f.flow_id and [h["switch_id"] for h in rep["hops"]] == [2, 5, 1]
    assert ctl.reports.received == 1 and ctl.reports.undecodable == 1


def test_tags_match_fabric_allocation(ctl: Controller) -> None:
    assert ctl.tags == fabric.allocate_tags(ctl.topo)


def test_report_log_keeps_the_newest() -> None:
    from icefabric.control.telemetry.reports import ReportLog
    from icefabric.traffic.packets import TelemetryReport

    log = ReportLog(3, clock=lambda: 1.0)
    for tag in range(5):
        log.add("leaf1", bytes(TelemetryReport(path_tag=tag)), {"reason": n.PUNT_REASON_TELEMETRY})
    assert [r["tag"] for r in log.recent()] == [2, 3, 4]
    assert [r["tag"] for r in log.recent(2)] == [3, 4]
    assert log.received == 5


def test_backup_takes_over_from_a_truncated_state_file(
    pipeline: PipelineConfig, ctl: Controller
) -> None:
    ctl.add_job(ring_job())
    assert ctl.state_file is not None
    data = ctl.state_file.read_bytes()
    ctl.state_file.write_bytes(data[: len(data) // 2])
    backup = Controller(SPEC, pipeline, backup=True, state_file=ctl.state_file)
    backup.statefile.load()  # reported, not raised
    assert backup.jobs == {} and len(backup.state_errors) == 1
    assert "JSON" in backup.state_errors[0]
    assert backup.status()["state_errors"] == backup.state_errors


def test_failed_takeover_is_retried(pipeline: PipelineConfig, tmp_path: Path) -> None:
    import queue as queue_mod

    c = Controller(SPEC, pipeline, backup=True, state_file=tmp_path / "state.json")
    c.switch_events.takeover_retry_s = 0.01
    tries: list[int] = []

    def take_over() -> None:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("switch went away mid-takeover")
        c.active = True

    c.take_over = take_over  # type: ignore[method-assign]
    c.switch_events.take_over_once()  # the first try fails: logged, not raised
    assert not c.active
    deadline = Deadline(10.0)
    while not c.active and not deadline.expired:
        try:
            item = c.worker.queue.get(timeout=0.1)
        except queue_mod.Empty:
            continue
        assert item is not None
        item()
    assert c.active and len(tries) == 2


def test_backup_restores_the_primarys_paths_exactly(
    pipeline: PipelineConfig, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paths planned around a job that has gone since: replanning the rest afresh finds
    # other (equally good) paths, so the standby must restore these, not plan its own.
    ctl.add_job(ring_job("b", ("h1", "h3", "h5", "h7")))
    ctl.add_job(ring_job("c", ("h2", "h4", "h6", "h8")))
    ctl.remove_job("b")
    fresh = Controller(SPEC, pipeline, backup=True, state_file=None)
    fresh.planner.add(demand_from_job(ctl.jobs["c"]))
    fresh_paths = {f.flow_id: f.path_index for f in fresh.planner.plan().flows}
    primary_paths = {f.flow_id: f.path_index for f in ctl.planner.plan().flows}
    assert fresh_paths != primary_paths  # the scenario is one where replanning differs
    backup = Controller(SPEC, pipeline, backup=True, state_file=ctl.state_file)
    backup.statefile.load()
    assert {f.flow_id: f.path_index for f in backup.planner.plan().flows} == primary_paths
    assert backup.desired() == ctl.desired()  # a takeover writes nothing


def test_a_won_term_adds_the_startup_jobs_set_after_construction(
    pipeline: PipelineConfig, tmp_path: Path
) -> None:
    """icectl run sets ctl.startup_jobs once the Controller exists: the replica that wins a
    term adds them (the election reads them at the takeover, not at construction)."""
    from icefabric.control.ccl.job import parse_job
    from icefabric.control.store import FileStore

    class WonTerm(FileStore):  # the state file, as a store that has just elected this replica
        elects = True
        term = 7

        def resign(self) -> None:
            raise AssertionError("the takeover failed")

    c = Controller(SPEC, pipeline, store=WonTerm(tmp_path / "state.json"))
    c.pool.connect_all = lambda timeout: {}  # type: ignore[method-assign,assignment,misc]

    def take_over() -> None:  # no switch to resync: the fabric is taken as installed
        c.installer.holds_all(c.desired())
        c.active = True

    c.take_over = take_over  # type: ignore[method-assign]
    c.startup_jobs = [parse_job(ring_job("startup"))]
    c.election._take_over(7)
    assert set(c.jobs) == {"startup"} and c.election_id == 7
    assert c.takeovers[-1]["startup_jobs_added"] == ["startup"]
