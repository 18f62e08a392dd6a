"""The controller with host agents on the real socket (no switches): real keys replace the
stand-ins, caps are max-min fair and reach the agents, a lost agent's caps are released, a
phase change pushes new caps, bad reports are refused, the state file carries real keys."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from icefabric.control.agents.client import AgentClient, Backoff
from icefabric.control.agents.hub import lowered_caps
from icefabric.control.agents.protocol import FlowReport
from icefabric.control.controller import Controller
from icefabric.control.daemon.api import RequestError
from icefabric.control.daemon.service import api_handlers
from icefabric.control.daemon.state import SharedState, encode_state, load_state
from icefabric.control.flowkey import FlowKey
from icefabric.control.install import flow_key
from icefabric.control.p4rt import PipelineConfig, TableEntry
from icefabric.p4src import ice_p4 as n
from icefabric.private import write_private
from icefabric.topo.spec import load_topology
from icefabric.waiting import poll_until

ROOT = Path(__file__).resolve().parents[4]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
FAST = Backoff(initial_s=0.01, max_s=0.05)
G = 1e9

# h1 -> h5 and h3 -> h5 share h5's 100G downlink in p1; h1 -> h3 runs alone in p2
FANIN: dict[str, Any] = {
    "name": "fanin",
    "hosts": ["h1", "h3", "h5"],
    "phases": [
        {
            "name": "p1",
            "collective": "send-recv",
            "pairs": [[0, 2], [1, 2]],
            "message_bytes": "1MiB",
        },
        {"name": "p2", "collective": "send-recv", "pairs": [[0, 1]], "message_bytes": "1MiB"},
    ],
}
F1 = "fanin/p1/c0/r0->r2"  # h1 -> h5
F3 = "fanin/p1/c0/r1->r2"  # h3 -> h5
F2 = "fanin/p2/c0/r0->r1"  # h1 -> h3
KEY1 = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.3.1", udp_sport=50001, dst_qp=0x77)
KEY3 = FlowKey(src_ip="10.0.2.1", dst_ip="10.0.3.1", udp_sport=50003, dst_qp=0x78)


# Generous: a condition that holds returns at once, and a loaded host (2 cores shared by a
# compiler build and other test runs) can take many seconds to run the threads involved.
WAIT_S = 120.0


def _until(cond: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    return poll_until(cond, timeout, 0.005)


def _controller(pipeline: PipelineConfig, state: Path) -> Controller:
    c = Controller(SPEC, pipeline, state_file=state)
    # as after a takeover, without switches: base forwarding is what the switches hold
    c.installer.holds_all(c.desired())
    c.active = True
    c.start_worker()
    return c


@pytest.fixture
def ctl(pipeline: PipelineConfig, tmp_path: Path) -> Iterator[Controller]:
    c = _controller(pipeline, tmp_path / "state.json")
    # no spurious loss under load: a session ends after 3 silent heartbeats (30 s here); the
    # tests end sessions by closing them, which the server sees at once
    c.agents.listen(tmp_path / "agents.sock", heartbeat_s=10.0)
    try:
        yield c
    finally:
        c.stop()


class Agent:
    """A fake host agent: a real AgentClient recording the caps it receives."""

    def __init__(self, ctl: Controller, host: str) -> None:
        assert ctl.agents.server is not None and ctl.agents.server.unix_path is not None
        self.caps: list[dict[FlowKey, float]] = []
        self.client = AgentClient(
            ctl.agents.server.unix_path, host, on_caps=self.caps.append, backoff=FAST
        )
        self.client.start()
        assert self.client.wait_connected(WAIT_S)

    def last(self) -> dict[FlowKey, float] | None:
        return self.caps[-1] if self.caps else None


def _flow_path_keys(c: Controller, sw: str) -> set[tuple[Any, ...]]:
    return {
        (e.match["src_addr"], e.match["dst_addr"], e.match["udp_src_port"], e.match["dst_qp"])
        for e in c.installed[sw].values()
        if isinstance(e, TableEntry) and e.table == n.TABLE_FLOW_PATH
    }


def _close(a: float | None, b: float) -> bool:
    return a is not None and abs(a - b) <= 1e-6 * b


def test_real_key_replaces_the_stand_in_and_survives_a_restart(
    ctl: Controller, pipeline: PipelineConfig, tmp_path: Path
) -> None:
    ctl.add_job(FANIN)
    stand_in = flow_key(ctl.topo, ctl.flows[F1])
    assert (stand_in.src_ip, stand_in.dst_ip, stand_in.udp_sport, stand_in.dst_qp) in (
        _flow_path_keys(ctl, "leaf1")
    )
    h1 = Agent(ctl, "h1")
    try:
        h1.client.report_flows([FlowReport(job="fanin", flow_id=F1, key=KEY1)])
        real = ("10.0.1.1", "10.0.3.1", 50001, 0x77)
        assert _until(lambda: real in _flow_path_keys(ctl, "leaf1"))
        keys = _flow_path_keys(ctl, "leaf1")
        assert (stand_in.udp_sport, stand_in.dst_qp) not in {(k[2], k[3]) for k in keys}
        (row,) = ctl.paths(flow=F1)
        assert row["key_source"] == "agent" and row["key"]["udp_sport"] == 50001
        assert ctl.agents.key_installs[-1].entries == 2  # insert the real key, delete the stand-in
        # telemetry names a report of the real key by its flow
        assert ctl._flow_of_key(KEY1) == F1
        # p1 is the job's first phase: h1 -> h5 shares h5's downlink with h3 -> h5
        assert _until(lambda: _close((h1.last() or {}).get(KEY1), 0.95 * 100 * G / 2))
    finally:
        h1.client.close()
    # a restarted controller (or a backup) installs the real key from the state file
    again = Controller(SPEC, pipeline, state_file=tmp_path / "state.json")
    again.statefile.load()
    fp = {
        (e.match["udp_src_port"], e.match["dst_qp"])
        for e in again.desired()["leaf1"]
        if isinstance(e, TableEntry) and e.table == n.TABLE_FLOW_PATH
    }
    assert (50001, 0x77) in fp and (stand_in.udp_sport, stand_in.dst_qp) not in fp


def test_caps_are_max_min_fair_and_a_lost_agent_releases_them(ctl: Controller) -> None:
    ctl.add_job(FANIN)
    h1, h3 = Agent(ctl, "h1"), Agent(ctl, "h3")
    try:
        h1.client.report_flows([FlowReport(job="fanin", flow_id=F1, key=KEY1)])
        h3.client.report_flows([FlowReport(job="fanin", flow_id=F3, key=KEY3)])
        half = 0.95 * 100 * G / 2
        assert _until(lambda: h1.last() == {KEY1: pytest.approx(half)})
        assert _until(lambda: h3.last() == {KEY3: pytest.approx(half)})
        # h1's agent goes away: its flow no longer counts, h3 -> h5 gets the whole downlink
        h1.client.close()
        assert _until(lambda: h3.last() == {KEY3: pytest.approx(2 * half)})
        assert "h1" in ctl.agents.view_agents()["lost"]
        # it comes back and re-reports: re-learned, the link is shared again
        h1b = Agent(ctl, "h1")
        try:
            h1b.client.report_flows([FlowReport(job="fanin", flow_id=F1, key=KEY1)])
            assert _until(lambda: h3.last() == {KEY3: pytest.approx(half)})
            assert _until(lambda: h1b.last() == {KEY1: pytest.approx(half)})
            assert ctl.agents.view_agents()["lost"] == []
        finally:
            h1b.client.close()
    finally:
        h1.client.close()
        h3.client.close()


def test_a_phase_change_pushes_the_next_phases_caps(ctl: Controller) -> None:
    ctl.add_job(FANIN)
    h1, h3 = Agent(ctl, "h1"), Agent(ctl, "h3")
    try:
        assert _until(lambda: h3.last() is not None and len(h3.last() or {}) == 1)
        api = api_handlers(ctl)
        res = api["jobs.phase"]({"job": "fanin", "phase": "p2"})
        assert res["phase"] == "p2" and res["flows"] == 1 and res["hosts_pushed"] == 2
        k2 = flow_key(ctl.topo, ctl.flows[F2])  # not reported: the planned stand-in key
        want = k2
        assert _until(lambda: h1.last() == {want: pytest.approx(0.95 * 100 * G)})
        assert _until(lambda: h3.last() == {})  # nothing to send in p2: no caps
        caps = api["caps"]({})
        assert [r["flow"] for r in caps["flows"]] == [F2] and caps["phases"] == {"fanin": "p2"}
        with pytest.raises(RequestError, match="no phase 'p9'"):
            api["jobs.phase"]({"job": "fanin", "phase": "p9"})
        with pytest.raises(RequestError, match="no job 'nope'"):
            api["jobs.phase"]({"job": "nope", "phase": "p1"})
    finally:
        h1.client.close()
        h3.client.close()


def test_reports_that_do_not_match_are_refused_and_listed(ctl: Controller) -> None:
    ctl.add_job(FANIN)
    before = _flow_path_keys(ctl, "leaf2")
    h3 = Agent(ctl, "h3")
    try:
        h3.client.report_flows(
            [
                FlowReport(job="fanin", flow_id=F1, key=KEY1),  # h1's flow, reported by h3
                FlowReport(job="other", flow_id=F3, key=KEY3),  # wrong job
                # wrong source address
                FlowReport(job="fanin", flow_id=F3, key=replace(KEY1, dst_qp=5)),
                FlowReport(
                    job="fanin",
                    flow_id="fanin/p1/c0/r9->r2",
                    key=replace(KEY3, dst_qp=6),
                ),
                # traffic of no job: counted, neither planned nor refused
                FlowReport(job="", flow_id="", key=replace(KEY3, dst_qp=9)),
            ]
        )
        assert _until(lambda: len(ctl.agents.flows.rejected.get("h3", [])) == 4)
        why = " | ".join(ctl.agents.flows.rejected["h3"])
        assert "sends from h1" in why and "belongs to job 'fanin'" in why
        assert "expected addresses 10.0.2.1 -> 10.0.3.1" in why and "no such flow" in why
        assert _flow_path_keys(ctl, "leaf2") == before and not ctl.agents.flows.keys
        view = api_handlers(ctl)["agents"]({})
        (a,) = view["agents"]
        assert a["host"] == "h3" and a["flows"] == 5 and a["accepted"] == 0
        assert a["unplanned"] == 1
        assert len(a["rejected"]) == 4
    finally:
        h3.client.close()


def test_a_report_before_its_job_counts_once_the_job_arrives(ctl: Controller) -> None:
    h1 = Agent(ctl, "h1")
    try:
        h1.client.report_flows([FlowReport(job="fanin", flow_id=F1, key=KEY1, state="pending")])
        assert _until(lambda: len(ctl.agents.flows.rejected.get("h1", [])) == 1)
        ctl.add_job(FANIN)
        assert ("10.0.1.1", "10.0.3.1", 50001, 0x77) in _flow_path_keys(ctl, "leaf1")
        assert ctl.agents.flows.rejected.get("h1") is None
        assert _until(lambda: (h1.last() or {}).get(KEY1) is not None)
        ctl.remove_job("fanin")
        assert not ctl.agents.flows.keys and not _flow_path_keys(ctl, "leaf1")
        assert _until(lambda: h1.last() == {})
    finally:
        h1.client.close()


def test_rates_follow_failures_and_telemetry_above_target(ctl: Controller) -> None:
    ctl.add_job(FANIN)
    h3 = Agent(ctl, "h3")
    try:
        half = 0.95 * 100 * G / 2
        assert _until(lambda: (h3.last() or {}).get(_planned(ctl, F3)) == pytest.approx(half))
        # a replan after a link failure recomputes the rates
        before = ctl.rates.count
        ctl.fail_link("leaf2", "spine1")
        # an agent's own report may be allocated right after the failure: look at every
        # allocation since, not only the last one
        since = list(ctl.rates.history)[-(ctl.rates.count - before) :]
        assert ctl.rates.count > before and any("down" in a.reason for a in since)
        # telemetry measures h5's downlink at 100 % while the allocation put 2 x 47.5 G there:
        # 5 G of traffic nobody accounts for comes off the link before sharing it again
        down = ctl.topo.host_downlink("h5")
        ctl.agents.over_target({down: 100 * G})
        want = (0.95 * 100 * G - 5 * G) / 2
        assert _until(lambda: (h3.last() or {}).get(_planned(ctl, F3)) == pytest.approx(want))
        assert "above target" in ctl.rates.history[-1].reason
    finally:
        h3.client.close()


def test_a_replan_pushes_the_lowered_caps_before_it_writes_the_moved_flows(
    ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Make-before-break: a change's caps that go down leave for the agents before the
    switches get the moved flows; the raised ones after the writes (lowered_caps)."""
    ctl.add_job(FANIN)
    h3 = Agent(ctl, "h3")
    try:
        half = 0.95 * 100 * G / 2
        assert _until(lambda: (h3.last() or {}).get(_planned(ctl, F3)) == pytest.approx(half))
        order: list[str] = []
        apply, push = ctl.installer.apply, ctl.agents.push

        def writes(*a: Any, **k: Any) -> int:
            order.append("write")
            return apply(*a, **k)

        def pushes(caps: Any, starts: Any = None) -> int:
            order.append("push")
            return push(caps, starts)

        monkeypatch.setattr(ctl.installer, "apply", writes)
        monkeypatch.setattr(ctl.agents, "push", pushes)
        ctl.fail_link("leaf2", "spine1")
        assert order[0] == "push" and "write" in order and order[-1] == "push", order
        assert order.index("write") < len(order) - 1
    finally:
        h3.client.close()


def test_lowered_caps_take_the_decreases_only() -> None:
    """SWAN's order as data: down at once, a new cap where there was none, up and released
    caps keep their old value until the writes are done."""
    k = [
        FlowKey(src_ip="10.0.1.1", dst_ip="10.0.3.1", udp_sport=50000 + i, dst_qp=i)
        for i in range(5)
    ]
    pushed = {"h1": {k[0]: 40 * G, k[1]: 40 * G, k[2]: 40 * G}, "h2": {k[4]: 10 * G}}
    new = {"h1": {k[0]: 20 * G, k[1]: 60 * G, k[3]: 30 * G}, "h3": {k[4]: 5 * G}}
    assert lowered_caps(pushed, new) == {
        "h1": {k[0]: 20 * G, k[1]: 40 * G, k[2]: 40 * G, k[3]: 30 * G},
        "h2": {k[4]: 10 * G},  # released in the new set: kept until after the writes
        "h3": {k[4]: 5 * G},  # a host never pushed to: its new caps (all lower than none)
    }


def _planned(ctl: Controller, fid: str) -> FlowKey:
    k = flow_key(ctl.topo, ctl.flows[fid], ctl.agents.flows.install_keys())
    return k


def test_state_file_flow_keys_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    good = KEY1.to_dict()
    data = json.loads(encode_state("t", [], flow_keys={F1: good}))
    assert _load(path, data).flow_keys == {F1: KEY1}
    data["flow_keys"] = {F1: good, F3: {**good, "qp": -1}, "x": "nope"}
    st = _load(path, data)
    assert st.flow_keys == {F1: KEY1} and len(st.errors) == 2
    assert "qp" in st.errors[0] and "expected an object" in st.errors[1]
    data["flow_keys"] = [1]
    assert "flow_keys: expected an object" in _load(path, data).errors[0]


def _load(path: Path, data: dict[str, Any]) -> SharedState:
    write_private(path, json.dumps(data).encode())
    return load_state(path, "t")


def test_a_flow_started_by_hand_is_bound_to_the_planned_flow_of_its_two_hosts(
    ctl: Controller,
) -> None:
    """icefabric-host --flow reports no job: it gets the path and cap of h1 -> h3's flow."""
    ctl.add_job(FANIN)
    h1 = Agent(ctl, "h1")
    hand = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.2.1", udp_sport=50123, dst_qp=0x99)
    try:
        h1.client.report_flows([FlowReport(job="", flow_id="", key=hand)])
        assert _until(lambda: ctl.agents.flows.keys.get(F2) == hand)
        assert _until(
            lambda: ("10.0.1.1", "10.0.2.1", 50123, 0x99) in _flow_path_keys(ctl, "leaf1")
        )
        assert _until(lambda: (h1.last() or {}).get(hand) is not None)
        (a,) = api_handlers(ctl)["agents"]({})["agents"]
        assert a["unplanned"] == 0 and a["accepted"] == 1
        # a flow to a host no planned flow goes to stays traffic of no job
        other = FlowKey(src_ip="10.0.1.1", dst_ip="10.0.4.1", udp_sport=50124, dst_qp=0x9A)
        h1.client.report_flows(
            [FlowReport(job="", flow_id="", key=hand), FlowReport(job="", flow_id="", key=other)]
        )
        assert _until(lambda: ctl.agents.flows.unplanned.get("h1") == 1)
        assert ctl.agents.flows.keys.get(F2) == hand
        kinds = [e["kind"] for e in ctl.events.since(0)]
        assert kinds.index("job_add") < kinds.index("agent_join") < kinds.index("install")
        assert "caps_pushed" in kinds
    finally:
        h1.client.close()


def test_every_host_gets_the_start_table_of_what_the_caps_leave(ctl: Controller) -> None:
    """h2 has no flow: its cap set is empty, but its start table says what the fanin caps
    leave on leaf1's uplinks (one of them carries h1 -> h5 at half of h5's downlink)."""
    from icefabric.control.congestion.starts import unplanned_starts

    got: list[tuple[tuple[str, float], ...]] = []
    h2 = AgentClient(
        ctl.agents.server.unix_path,  # type: ignore[union-attr]
        "h2",
        on_caps=lambda caps: None,
        on_starts=got.append,
        backoff=FAST,
    )
    h2.start()
    try:
        assert h2.wait_connected(WAIT_S)
        ctl.add_job(FANIN)
        assert _until(lambda: bool(got) and bool(got[-1]))
        with ctl.lock:
            want = unplanned_starts(ctl.topo, ctl.rates.residual_bps, ["h2"], target=0.95)
        assert got[-1] == want["h2"] and h2.starts() == want["h2"] and h2.caps() == {}
        # every destination is behind leaf1's uplinks, one of which carries h1 -> h5's cap
        half = 0.95 * 100 * G / 2
        assert want["h2"] and all(bps == pytest.approx(half) for _, bps in want["h2"])
    finally:
        h2.close()
