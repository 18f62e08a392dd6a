"""The matrix's layout (channels, placement: sim/scenarios.py ``Layout``) and the matrix swept
over one parameter (sim/matrix_sweep.py, ``icectl experiment matrix --sweep``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icefabric.sim.matrix import _task_key, run_matrix
from icefabric.sim.matrix_sweep import parse_sweep, run_sweep, sweep_markdown
from icefabric.sim.scenarios import DEFAULT_LAYOUT, SCENARIOS, Layout, build

GPUS = 32
MSG = 4 << 20


def _hosts(case) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.src_host for f in case.workload.flows if f.channel == 0 and f.job != "background"]


def test_placements_put_the_ranks_where_they_say() -> None:
    spec = build("collisions", GPUS, 1, MSG).spec
    leaf = {h.name: h.leaf for h in spec.hosts}
    packed = build("collisions", GPUS, 1, MSG, Layout(placement="packed"))
    inter = build("collisions", GPUS, 1, MSG, Layout(placement="interleaved"))
    scattered = build("collisions", GPUS, 1, MSG)

    # packed: ring neighbours share a leaf but at the leaf boundaries; interleaved: never
    def crossing(case) -> int:  # type: ignore[no-untyped-def]
        return sum(leaf[f.src_host] != leaf[f.dst_host] for f in case.workload.flows)

    flows = len(packed.workload.flows)
    assert crossing(inter) == flows
    assert crossing(packed) < flows // 4 < crossing(scattered)
    # the same seed draws the same failing link in every placement
    notes = [
        build("failure", GPUS, 3, MSG, Layout(placement=p)).notes for p in ("scattered", "packed")
    ]
    assert notes[0] == notes[1]
    # packed, the hosts the job leaves are whole leaves: background runs among them only
    bg = build("background", 128, 3, MSG, Layout(placement="packed"))
    leaf = {h.name: h.leaf for h in bg.spec.hosts}
    job_leaves = {leaf[f.src_host] for f in bg.workload.flows if f.job != "background"}
    storage = [f for f in bg.workload.flows if f.job == "background"]
    assert storage and not {leaf[f.src_host] for f in storage} & job_leaves


def test_channels_set_the_flows_of_every_ring_and_layout_checks_its_fields() -> None:
    for sc in ("collisions", "two-jobs", "failure", "oversubscribed", "mixed-nics"):
        two = build(sc, GPUS, 1, MSG, Layout(channels=2)).workload
        eight = build(sc, GPUS, 1, MSG).workload
        assert len(eight.flows) == 4 * len(two.flows), sc
    # incast's all-to-all keeps one flow per rank pair
    assert len(build("incast", GPUS, 1, MSG, Layout(channels=2)).workload.flows) == len(
        build("incast", GPUS, 1, MSG).workload.flows
    )
    with pytest.raises(ValueError, match=r"channels: expected 1\.\.64"):
        Layout(channels=0)
    with pytest.raises(ValueError, match="placement: expected one of scattered"):
        Layout(placement="rail")
    assert set(SCENARIOS) >= {"collisions", "failure"}


def test_default_layout_keeps_the_task_key_of_earlier_matrices() -> None:
    # task files written before there was a layout (the 128- and 1,024-GPU matrices) still match
    old = ("collisions", 1, ("ice",), 128, 32 << 20, None)
    assert _task_key(old) == _task_key((*old, DEFAULT_LAYOUT))
    assert "channels" not in _task_key((*old, DEFAULT_LAYOUT))
    assert _task_key((*old, Layout(channels=4)))["channels"] == 4
    assert _task_key((*old, Layout(placement="packed")))["placement"] == "packed"


def test_parse_sweep_names_what_is_wrong() -> None:
    assert parse_sweep("message-mib=4,32,1024") == ("message-mib", [4, 32, 1024])
    assert parse_sweep("placement=packed,scattered") == ("placement", ["packed", "scattered"])
    for text, says in (
        ("gpus=1,2", "PARAM one of message-mib, channels, placement"),
        ("channels", "PARAM one of"),
        ("channels=2,2", "distinct values"),
        ("channels=0", "integers 1..64"),
        ("channels=x", "integers 1..64"),
        ("message-mib=5000", "integers 1..4096"),
        ("placement=rail", "expected values from scattered, packed, interleaved"),
        ("channels=" + ",".join(str(i) for i in range(1, 14)), "1..12 distinct"),
    ):
        with pytest.raises(ValueError, match=says):
            parse_sweep(text)


def test_sweep_runs_one_matrix_per_value_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kw = {"scenarios": ("collisions",), "schemes": ("ecmp+dcqcn", "ice"), "seeds": 1}
    doc = run_sweep("channels", [2, 4], out=tmp_path, gpus=GPUS, message=MSG, **kw)
    assert doc["over"] == "channels" and doc["values"] == ["2", "4"]
    for v in ("2", "4"):
        m = json.loads((tmp_path / f"channels-{v}" / "matrix.json").read_text())
        assert m["channels"] == int(v) and m["placement"] == "scattered"
        cell = doc["cells"][v]["scenarios"]["collisions"]
        assert (
            cell["ice"]
            == m["scenarios"]["collisions"]["schemes"]["ice"]["busbw_over_bound"]["median"]
        )
        assert cell["best_peer"] == "ecmp+dcqcn" and cell["ice_over_best_peer"]["median"] > 0
    # the matrix of one value is the plain matrix with that layout
    alone = run_matrix(gpus=GPUS, message=MSG, layout=Layout(channels=4), **kw)
    assert (
        alone["scenarios"]
        == json.loads((tmp_path / "channels-4" / "matrix.json").read_text())["scenarios"]
    )
    # resumed: every task from its folder (none run again), the same document
    import icefabric.sim.matrix as sm

    ran: list[object] = []
    real = sm.run_seed
    monkeypatch.setattr(sm, "run_seed", lambda *t: ran.append(t) or real(*t))
    again = run_sweep("channels", [2, 4], out=tmp_path, gpus=GPUS, message=MSG, resume=True, **kw)
    assert again["cells"] == doc["cells"] and ran == []
    run_sweep("channels", [2, 8], out=tmp_path, gpus=GPUS, message=MSG, resume=True, **kw)
    assert len(ran) == 1  # only the new value's task
    table = sweep_markdown(doc)
    assert table.splitlines()[0] == "| channels | collisions | ICE ÷ ECMP+DCQCN (medians) |"
    assert table.splitlines()[2].startswith("| 2 (ring-step cap 0.66) | 1.00 ")
    assert len(table.splitlines()) == 4


def test_cli_sweep_refuses_the_packet_level_and_bad_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from icefabric.icectl import main

    base = ["experiment", "matrix", "--out", str(tmp_path / "x")]
    for extra, says in (
        (["--engine", "virtual", "--sweep", "channels=2"], "--sweep: the packet-level matrix"),
        (["--engine", "virtual", "--placement", "packed"], "--placement: the packet-level"),
        (["--sweep", "gpus=1"], "--sweep: expected PARAM=V1,V2"),
        (["--placement", "rail"], "placement: expected one of scattered"),
        (["--channels", "99"], "channels: expected 1..64"),
    ):
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
    assert not (tmp_path / "x" / "sweep.json").exists()
