"""icectl ccl inspect, plan --nccl-log (no controller), host maps, HCCL rank tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from _icectl import EXAMPLE, run
from _nccl_loggen import Comm, layout, nccl_rings, nccl_trees, write_log

from icefabric.control.ccl.job import load_job

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture
def two_comm_log(tmp_path: Path) -> tuple[Path, list[list[int]]]:
    world = layout(4, 2)  # node00..node03, 2 GPUs each
    rings = nccl_rings(8, 2, 2, seed=3)
    sub = Comm([world[i] for i in (0, 2, 4, 6)], [[0, 2, 1, 3]], comm_id=0xB0B, ptr_base=0x7000)
    lines = write_log("2.19", [Comm(world, rings, nccl_trees(8, 2, 2), comm_id=0xA1), sub])
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return p, rings


def test_inspect_lists_every_communicator(
    capsys: pytest.CaptureFixture[str], two_comm_log: tuple[Path, list[list[int]]]
) -> None:
    path, rings = two_comm_log
    code, out, err = run(capsys, "ccl", "inspect", str(path))
    assert code == 0 and not err
    assert "2 communicator(s)" in out and "0xa1" in out and "0xb0b" in out
    assert "8/8" in out and "4/4" in out and "NCCL 2.19.3+cuda12.2" in out
    code, out, _ = run(capsys, "ccl", "inspect", str(path), "--json")
    rep = json.loads(out)
    world = next(c for c in rep["communicators"] if c["comm"] == "0xa1")
    assert world["rings"] == {str(c): r for c, r in enumerate(rings)}
    assert world["hosts"] == ["node00", "node01", "node02", "node03"]
    assert world["tree_format"] == "2.8+" and len(world["trees"]) == 2


def test_inspect_to_job_writes_a_job_file_that_loads_back(
    capsys: pytest.CaptureFixture[str],
    two_comm_log: tuple[Path, list[list[int]]],
    tmp_path: Path,
) -> None:
    path, rings = two_comm_log
    out_file = tmp_path / "job.yaml"
    code, _, err = run(
        capsys,
        "ccl",
        "inspect",
        str(path),
        "--to-job",
        str(out_file),
        "--host-pattern",
        r"node0(\d)=h\1",
        "--comm",
        "0xa1",
    )
    assert code == 0 and "wrote job 'train'" in err
    job = load_job(out_file)
    assert [p.rings for p in job.phases] == [tuple(tuple(r) for r in rings)]
    assert job.hosts == ("h0", "h1", "h2", "h3")
    all_file = tmp_path / "all.json"
    code, _, _ = run(capsys, "ccl", "inspect", str(path), "--to-job", str(all_file), "--all-comms")
    assert code == 0
    data = json.loads(all_file.read_text())
    assert [p["name"] for p in data["phases"]] == ["comm0", "comm1"]
    assert data["phases"][1]["ranks"] == [0, 2, 4, 6]


def test_plan_from_a_log_without_a_controller(
    capsys: pytest.CaptureFixture[str], two_comm_log: tuple[Path, list[list[int]]], tmp_path: Path
) -> None:
    path, _ = two_comm_log
    hm = tmp_path / "hosts.txt"
    hm.write_text("# log host  topology host\nnode00 h1\nnode01 h3\nnode02 h5\nnode03 h7\n")
    code, out, err = run(
        capsys,
        "plan",
        "--topo",
        EXAMPLE,
        "--nccl-log",
        str(path),
        "--host-map-file",
        str(hm),
        "--json",
    )
    assert code == 0, err
    rep = json.loads(out)
    assert rep["jobs"] == ["train"] and rep["flows"] > 0
    code, out, err = run(
        capsys,
        "plan",
        "--topo",
        EXAMPLE,
        "--nccl-log",
        str(path),
        "--host-pattern",
        "ordered",
        "--json",
    )
    assert code == 0, err
    assert {p["src"] for p in json.loads(out)["paths"]} <= {"h1", "h2", "h3", "h4"}
    code, _, err = run(capsys, "plan", "--topo", EXAMPLE, "--nccl-log", str(path))
    assert code == 2 and "no host 'node00'" in err


def test_option_errors_are_one_line_and_exit_two(
    capsys: pytest.CaptureFixture[str], two_comm_log: tuple[Path, list[list[int]]], tmp_path: Path
) -> None:
    path, _ = two_comm_log
    base = ("plan", "--topo", EXAMPLE, "--nccl-log", str(path))
    cases = [
        (("--collective", "allreduse"), "--collective: expected one of"),
        (("--collective", "all-to-all", "--algorithm", "ring"), "takes no algorithm"),
        (("--host-pattern", "(=x"), "not a regular expression"),
        (("--host-map-file", str(tmp_path / "nope.txt")), "nope.txt: cannot read"),
        (("--comm", "0xdead"), "no communicator matches '0xdead'"),
        (("--message-bytes", "lots"), "--message-bytes"),
    ]
    for extra, msg in cases:
        code, _, err = run(capsys, *base, *extra)
        assert code == 2 and msg in err, (extra, err)
        assert "Traceback" not in err
    code, _, err = run(
        capsys,
        "ccl",
        "inspect",
        "--host-pattern",
        "ordered",
        str(path),
        "--to-job",
        str(tmp_path / "j.yaml"),
    )
    assert code == 2 and "needs the topology" in err
    code, _, err = run(capsys, "plan", "--topo", EXAMPLE)
    assert code == 2 and "--nccl-log" in err


def test_unusable_log_ends_with_one_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    p = tmp_path / "empty.log"
    p.write_text("hello\nnode1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE\n")
    code, _, err = run(capsys, "ccl", "inspect", str(p))
    assert code == 2 and "no communicator found" in err
    code, _, err = run(capsys, "plan", "--topo", EXAMPLE, "--nccl-log", str(p))
    assert code == 2 and "no communicator found" in err and "NCCL_DEBUG=INFO" in err
    code, _, err = run(capsys, "ccl", "inspect", str(tmp_path / "missing.log"))
    assert code == 2 and "cannot read" in err


def test_warnings_name_file_and_line_and_single_host_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "ccl", "inspect", str(FIX / "nccl_2node_8rank_2ch.log"))
    assert code == 0
    assert "nccl_2node_8rank_2ch.log:50: rank 9 outside 0..7" in err
    lines = write_log("2.19", [Comm(layout(1, 4), [[0, 1, 2, 3]])])
    p = tmp_path / "one.log"
    p.write_text("\n".join(lines))
    code, _, err = run(
        capsys, "plan", "--topo", EXAMPLE, "--nccl-log", str(p), "--host-map", "node00=h1"
    )
    assert code == 0 and "all 4 ranks of job 'one' run on host h1" in err


def test_hccl_rank_table_as_job_ranks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = {
        "version": "1.0",
        "server_count": "2",
        "status": "completed",
        "server_list": [
            {
                "server_id": f"10.0.0.{s}",
                "device": [
                    {
                        "device_id": str(d),
                        "device_ip": f"192.168.{s}.{d}",
                        "rank_id": str(s * 2 + d),
                    }
                    for d in range(2)
                ],
            }
            for s in range(2)
        ],
    }
    p = tmp_path / "rank_table.json"
    p.write_text(json.dumps(table))
    code, out, _ = run(capsys, "ccl", "inspect", str(p))
    assert code == 0 and "HCCL rank table, 4 ranks on 2 server(s)" in out
    job_file = tmp_path / "hccl.yaml"
    code, _, err = run(
        capsys,
        "ccl",
        "inspect",
        str(p),
        "--to-job",
        str(job_file),
        "--host-map",
        "10.0.0.0=h1",
        "--host-map",
        "10.0.0.1=h5",
    )
    assert code == 0, err
    job = yaml.safe_load(job_file.read_text())
    assert [(r["host"], r["vendor"], r["device"]) for r in job["ranks"]] == [
        ("h1", "huawei", "npu0"),
        ("h1", "huawei", "npu1"),
        ("h5", "huawei", "npu0"),
        ("h5", "huawei", "npu1"),
    ]
    code, out, err = run(
        capsys,
        "plan",
        "--topo",
        EXAMPLE,
        "--hccl-rank-table",
        str(p),
        "--host-map",
        "10.0.0.0=h1",
        "--host-map",
        "10.0.0.1=h5",
        "--json",
    )
    assert code == 0 and json.loads(out)["flows"] > 0, err
    old = {
        "group_count": "1",
        "group_list": [
            {
                "group_name": "",
                "instance_count": "2",
                "instance_list": [
                    {
                        "rank_id": "1",
                        "server_id": "a",
                        "devices": [{"device_id": "3", "device_ip": "x"}],
                    },
                    {
                        "rank_id": "0",
                        "server_id": "b",
                        "devices": [{"device_id": "0", "device_ip": "y"}],
                    },
                ],
            }
        ],
    }
    p.write_text(json.dumps(old))
    code, out, _ = run(capsys, "ccl", "inspect", str(p), "--json")
    assert code == 0
    assert [(r["host"], r["device"]) for r in json.loads(out)["ranks"]] == [
        ("b", "npu0"),
        ("a", "npu3"),
    ]
    old["group_list"][0]["instance_list"][0]["rank_id"] = "0"  # type: ignore[index]
    p.write_text(json.dumps(old))
    code, _, err = run(capsys, "ccl", "inspect", str(p))
    assert code == 2 and "instance_list[1].rank_id: rank 0 appears twice" in err


def test_ordered_host_mapping_with_the_topology_in_inspect(
    capsys: pytest.CaptureFixture[str], two_comm_log: tuple[Path, list[list[int]]], tmp_path: Path
) -> None:
    path, _ = two_comm_log
    out_file = tmp_path / "ordered.yaml"
    code, _, err = run(
        capsys,
        "ccl",
        "inspect",
        str(path),
        "--to-job",
        str(out_file),
        "--host-pattern",
        "ordered",
        "--topo",
        EXAMPLE,
        "--host-map",
        "node03=h8",
    )
    assert code == 0, err
    assert load_job(out_file).hosts == ("h1", "h2", "h3", "h8")
