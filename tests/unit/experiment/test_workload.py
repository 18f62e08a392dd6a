"""Dependency schedules from CCL job descriptions, and the executor that runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.control.ccl import load_job, parse_job
from icefabric.traffic.workload import (
    Message,
    WorkloadExecutor,
    build_schedule,
    busbw_factor,
    check_against_demand,
)

ROOT = Path(__file__).resolve().parents[3]


def _job(
    collective: str, algorithm: str | None = None, *, rph: int = 1, hosts: int = 4, **kw: object
):
    ph: dict[str, object] = {
        "name": "p",
        "collective": collective,
        "channels": 2,
        "message_bytes": "1MiB",
        **kw,
    }
    if algorithm:
        ph["algorithm"] = algorithm
    return parse_job(
        {
            "name": "j",
            "hosts": [f"h{i + 1}" for i in range(hosts)],
            "ranks_per_host": rph,
            "phases": [ph],
        }
    )


def _run_instant(sched):
    """Deliver every posted message one time unit later, FIFO; returns the executor."""
    pending: list[int] = []
    ex = WorkloadExecutor(sched, lambda m, t: pending.append(m.id))
    ex.start(0.0)
    t = 0.0
    while pending:
        t += 1.0
        ex.on_message(pending.pop(0), t)
    return ex


@pytest.mark.parametrize(
    ("collective", "algorithm", "rph"),
    [
        ("all-reduce", "ring", 1),
        ("all-reduce", "ring", 2),
        ("all-reduce", "tree", 1),
        ("all-reduce", "halving-doubling", 1),
        ("all-gather", "ring", 1),
        ("reduce-scatter", "halving-doubling", 2),
        ("all-to-all", None, 1),
        ("send-recv", None, 1),
    ],
)
def test_schedule_volumes_match_the_planned_demand_and_complete(collective, algorithm, rph) -> None:
    job = _job(collective, algorithm, rph=rph)
    for slices in (1, 3):
        sched = build_schedule(job, slices=slices)
        assert check_against_demand(sched, job) == []
        ex = _run_instant(sched)
        assert ex.done and ex.remaining == 0


def test_ring_allreduce_sends_chunk_k_plus_1_only_after_receiving_chunk_k() -> None:
    job = _job("all-reduce", "ring", hosts=4)  # 4 ranks, 2 channels
    sched = build_schedule(job)
    n, steps = 4, 6
    assert len(sched.messages) == 2 * n * steps
    chunk = (1 << 20) // 2 // n
    assert {m.nbytes for m in sched.messages} == {chunk}
    by_id = {m.id: m for m in sched.messages}
    for m in sched.messages:
        if not m.deps:
            continue
        (d,) = m.deps  # exactly the previous step's message into the sender
        assert by_id[d].dst_host == m.src_host
        assert by_id[d].flow_id.split("/")[2] == m.flow_id.split("/")[2]  # same channel
    assert sum(1 for m in sched.messages if not m.deps) == 2 * n  # step 0 of each channel


def test_executor_posts_only_when_dependencies_arrived() -> None:
    sched = build_schedule(_job("all-reduce", "ring", hosts=3))
    posted: list[Message] = []
    ex = WorkloadExecutor(sched, lambda m, t: posted.append(m))
    ex.start(0.0)
    first = list(posted)
    assert all(not m.deps for m in first) and len(first) == 6
    ex.on_message(first[0].id, 5.0)  # h1 -> h2 arrived: h2 may send its step 1 on channel 0
    assert len(posted) == 7 and posted[-1].src_host == first[0].dst_host
    assert posted[-1].deps == (first[0].id,)
    ex.on_message(first[0].id, 6.0)  # a duplicate is ignored, not counted twice
    assert len(ex.arrived_us) == 1 and ex.arrived_us[first[0].id] == 5.0


def test_same_host_transfers_complete_at_once_and_phases_follow_per_host() -> None:
    job = parse_job(
        {
            "name": "j",
            "hosts": ["h1", "h2"],
            "ranks_per_host": 2,
            "phases": [
                {"name": "a", "collective": "all-reduce", "message_bytes": 4096},
                {"name": "b", "collective": "all-gather", "message_bytes": 4096},
            ],
        }
    )
    sched = build_schedule(job)
    assert any(m.flow_id is None for m in sched.messages)
    ex = _run_instant(sched)
    a, b = (ex.phase_times(p) for p in sched.phases)
    assert a is not None and b is not None and b[0] >= a[0]
    for h in ("h1", "h2"):  # a host starts phase b once its share of phase a arrived
        last_a = max(
            ex.arrived_us[m.id] for m in sched.messages if m.phase == "a" and m.dst_host == h
        )
        first_b = min(
            ex.posted_us[m.id] for m in sched.messages if m.phase == "b" and m.src_host == h
        )
        assert first_b >= last_a


def test_pipeline_stage_forwards_after_receiving() -> None:
    job = load_job(ROOT / "control" / "ccl" / "examples" / "mixed_pp_pipeline.yaml")
    sched = build_schedule(job, slices=2)
    assert check_against_demand(sched, job) == []
    acts = [m for m in sched.messages if m.phase == "activations"]
    by_id = {m.id: m for m in sched.messages}
    stage1 = [m for m in acts if m.src_host == "h4"]  # rank 1 forwards what rank 0 sent it
    assert stage1 and all(by_id[d].dst_host == "h4" for m in stage1 for d in m.deps)
    grads = [m for m in sched.messages if m.phase == "gradients"]
    assert grads[0].deps and all(by_id[d].phase == "activations" for d in grads[0].deps)


def test_busbw_factors_are_nccl_tests() -> None:
    assert busbw_factor("all-reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all-gather", 8) == pytest.approx(0.875)
    assert busbw_factor("send-recv", 2) == 1.0
    with pytest.raises(ValueError, match="no bus-bandwidth factor"):
        busbw_factor("broadcast", 4)
    with pytest.raises(ValueError, match="slices"):
        build_schedule(_job("all-to-all"), slices=0)


@pytest.mark.parametrize(
    ("collective", "algorithm"),
    [
        ("all-reduce", "ring"),
        ("all-reduce", "tree"),
        ("all-reduce", "halving-doubling"),
        ("all-to-all", None),
    ],
)
def test_every_dependency_is_an_arrival_at_the_sender(collective, algorithm) -> None:
    job = parse_job(
        {
            "name": "j",
            "hosts": ["h1", "h2", "h3", "h4"],
            "phases": [
                {
                    "name": "a",
                    "collective": collective,
                    "message_bytes": 4096,
                    **({"algorithm": algorithm} if algorithm else {}),
                },
                {"name": "b", "collective": "all-gather", "message_bytes": 4096},
            ],
        }
    )
    sched = build_schedule(job, slices=2)
    by_id = {m.id: m for m in sched.messages}
    assert all(by_id[d].dst_host == m.src_host for m in sched.messages for d in m.deps)


def test_per_host_executors_together_run_the_whole_schedule() -> None:
    job = load_job(ROOT / "control" / "ccl" / "examples" / "mixed_pp_pipeline.yaml")
    sched = build_schedule(job, slices=2)
    again = type(sched).from_dict(sched.to_dict())
    assert again == sched
    pending: list[int] = []
    hosts = sorted({m.src_host for m in sched.messages} | {m.dst_host for m in sched.messages})
    ex = {h: WorkloadExecutor(again, lambda m, t: pending.append(m.id), host=h) for h in hosts}
    for e in ex.values():
        e.start(0.0)
    t = 0.0
    while pending:
        t += 1.0
        mid = pending.pop(0)
        ex[sched.messages[mid].dst_host].on_message(mid, t)
    assert all(e.done for e in ex.values())
    assert sum(len(e.arrived_us) for e in ex.values()) == len(sched.messages)
    with pytest.raises(ValueError, match="schedule"):
        type(sched).from_dict({"job": "x"})
