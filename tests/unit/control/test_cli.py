"""icectl: behaviour, output and exit codes (0 ok, 1 runtime failure, 2 usage/validation)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _icectl import EXAMPLE, ROOT, run
from _jobs import ring_job

from icefabric.control.daemon.api import ApiServer, RequestError


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    p = tmp_path / "job.yaml"
    p.write_text(yaml.safe_dump(ring_job()))
    return p


def test_help_exits_zero_and_states_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "exit codes" in out
    for cmd in ("topo", "plan", "run", "jobs", "paths", "stats", "int", "shell"):
        assert cmd in out


def test_usage_errors_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "plan", "--topo", EXAMPLE)
    assert code == 2 and "--job" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "-", "--draws", "0"], "--draws: expected >= 1 and <= 1,000,000, got '0'"),
        (["plan", "-", "--draws", "10000000000"], "--draws: expected >= 1 and <= 1,000,000"),
        (["plan", "-", "--seed", "-1"], "--seed: expected >= 0, got '-1'"),
        (["sim", "run", "--iterations", "0"], "--iterations: expected >= 1 and <= 10,000, got '0'"),
        (["sim", "compare", "--seed", "-2"], "--seed: expected >= 0, got '-2'"),
        (["sim", "run", "--iterations", "x"], "--iterations: expected a whole number, got 'x'"),
    ],
)
def test_out_of_range_numbers_are_usage_errors(
    capsys: pytest.CaptureFixture[str], job_file: Path, argv: list[str], message: str
) -> None:
    # Before: a negative seed or zero iterations ended in "internal error" (exit 1), and a huge
    # --draws in a MemoryError.
    command = [a for a in argv[:2] if a != "-"]
    code, _, err = run(capsys, *command, "--topo", EXAMPLE, "--job", str(job_file), *argv[2:])
    assert code == 2 and message in err and "internal error" not in err


def test_topo_gen_check_show_roundtrip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "ls.yaml"
    code, _, err = run(
        capsys,
        "topo",
        "gen",
        "leaf-spine",
        "--leaves",
        "3",
        "--spines",
        "2",
        "--hosts-per-leaf",
        "2",
        "-o",
        str(out_file),
    )
    assert code == 0 and "6 hosts" in err and out_file.exists()
    code, out, _ = run(capsys, "topo", "check", str(out_file))
    assert code == 0 and "ok" in out and "2..2 candidate paths" in out
    code, out, _ = run(capsys, "topo", "show", str(out_file), "--json")
    data = json.loads(out)
    assert code == 0 and len(data["spec"]["switches"]) == 5 and data["summary"]["leaves"] == 3
    code, out, _ = run(capsys, "topo", "show", str(out_file))
    assert code == 0 and "leaf3" in out and "spine2" in out
    code, out, _ = run(capsys, "topo", "gen", "fat-tree", "--k", "4", "--format", "json")
    assert code == 0 and len(json.loads(out)["switches"]) == 20


def test_topo_check_names_file_and_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = yaml.safe_load(Path(EXAMPLE).read_text())
    data["links"][0]["b"]["node"] = "spine9"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    code, _, err = run(capsys, "topo", "check", str(bad))
    assert code == 2
    assert f"{bad}: links[0].b.node" in err and "spine9" in err
    code, out, _ = run(capsys, "topo", "check", str(bad), "--json")
    assert code == 2 and json.loads(out)["ok"] is False
    code, _, err = run(capsys, "topo", "show", str(tmp_path / "missing.yaml"))
    assert code == 2 and "missing.yaml" in err and "Traceback" not in err
    code, _, err = run(capsys, "topo", "gen", "fat-tree", "--k", "3")
    assert code == 2 and "fat_tree.k" in err


def test_plan_dry_run_json_and_table(capsys: pytest.CaptureFixture[str], job_file: Path) -> None:
    code, out, _ = run(capsys, "plan", "--topo", EXAMPLE, "--job", str(job_file), "--json")
    assert code == 0
    rep = json.loads(out)
    assert rep["flows"] == 8 and rep["jobs"] == ["ring"]
    assert all(isinstance(p["tag"], int) and p["tag"] > 0 for p in rep["paths"])
    fabric_links = [lk for lk in rep["links"] if lk["kind"] == "fabric"]
    assert fabric_links and all("ecmp_seconds" in lk for lk in fabric_links)
    assert rep["max_load_s"] >= rep["lower_bound_s"] * 0.999
    em = rep["ecmp"]
    assert em["model"].startswith("ice.p4 ECMP") and em["use_qp_in_hash"] is True
    assert em["keys"]["flows"] == 8 and em["keys"]["known_udp_sport"] == 0
    assert em["actual_keys"]["fabric_max_load_s"] == rep["ecmp_fabric_max_load_s"]
    rs = em["random_sports"]
    assert rs["n"] == 1000 and len(rs["max_load_s"]) == 1000 and rs["seed"] == 1
    assert rs["bound_s"] <= rs["median_s"] <= rs["p99_s"] <= rs["worst_s"]
    assert 0.0 <= rs["p_above_bound"] <= 1.0
    code, out2, _ = run(
        capsys, "plan", "--topo", EXAMPLE, "--job", str(job_file), "--json", "--draws", "50"
    )
    again = json.loads(out2)["ecmp"]["random_sports"]
    assert again["max_load_s"] == rs["max_load_s"][:50]  # seeded: the same first 50 draws
    code, out, _ = run(capsys, "plan", "--topo", EXAMPLE, "--job", str(job_file))
    assert code == 0 and "ring/ar/c0/r0->r1" in out
    assert "ECMP (model: ice.p4 ECMP" in out and "random UDP source-port draws" in out
    assert "expected" not in out
    code, _, err = run(capsys, "plan", "--topo", EXAMPLE, "--job", str(job_file), "--draws", "0")
    assert code == 2 and "--draws" in err


def test_plan_rejects_unknown_host_naming_the_job_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job_file: Path
) -> None:
    data = yaml.safe_load(job_file.read_text())
    data["hosts"][1] = "h99"
    bad = tmp_path / "bad_job.yaml"
    bad.write_text(yaml.safe_dump(data))
    code, _, err = run(capsys, "plan", "--topo", EXAMPLE, "--job", str(bad))
    assert code == 2 and "bad_job.yaml" in err and "h99" in err


def test_daemon_commands_without_daemon_exit_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sock = str(tmp_path / "none.sock")
    code, _, err = run(capsys, "--socket", sock, "jobs", "ls")
    assert code == 1 and "cannot reach the controller" in err and "none.sock" in err


def test_shell_command_line_from_topology(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "shell", "spine1", "--topo", EXAMPLE, "--print")
    assert code == 0
    assert (
        "-m icefabric.control.cli.p4shell --grpc-addr 127.0.0.1:9563 --device-id 5 "
        "--election-id 0,1" in out
    )
    assert "--config" not in out
    code, out, _ = run(
        capsys, "shell", "leaf1", "--topo", EXAMPLE, "--print", "--config", "a.txt,b.json"
    )
    assert code == 0 and "--config a.txt,b.json" in out
    code, _, err = run(capsys, "shell", "leaf9", "--topo", EXAMPLE, "--print")
    assert code == 2 and "leaf9" in err and "leaf1" in err


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[str]:
    """An API server with canned answers, as the real daemon gives them."""

    def jobs_rm(args: dict[str, Any]) -> Any:
        if args.get("name") != "ring":
            raise RequestError("no job 'x'")
        return {"job": "ring", "entries": 8, "install_ms": 1.5}

    def boom(args: dict[str, Any]) -> Any:
        raise RuntimeError("switch leaf1 refused the write")

    handlers = {
        "jobs.ls": lambda a: [
            {"name": "ring", "ranks": 4, "hosts": 4, "phases": 1, "flows": 8, "bytes": 1e9}
        ],
        "jobs.rm": jobs_rm,
        "paths": lambda a: (
            [
                {
                    "flow": "ring/ar/c0/r0->r1",
                    "job": "ring",
                    "src": "h1",
                    "dst": "h3",
                    "first_hop": "leaf1",
                    "tag": 1,
                    "path": ["h1", "leaf1", "spine1", "leaf2", "h3"],
                    "bytes": 1.0,
                    "key": None,
                }
            ]
            if a.get("flow") in (None, "ring/ar/c0/r0->r1")
            else []
        ),
        "int": lambda a: {"received": 0, "undecodable": 0, "reports": []},
        "mode": boom,
    }
    path = tmp_path / "ctl.sock"
    srv = ApiServer(path, handlers)
    srv.start()
    try:
        yield str(path)
    finally:
        srv.stop()


def test_daemon_read_commands_and_exit_codes(
    capsys: pytest.CaptureFixture[str], fake_daemon: str
) -> None:
    code, out, _ = run(capsys, "--socket", fake_daemon, "jobs", "ls", "--json")
    assert code == 0 and json.loads(out)[0]["name"] == "ring"
    code, out, _ = run(capsys, "--socket", fake_daemon, "jobs", "ls")
    assert code == 0 and "ring" in out and "1.00 GB" in out
    code, out, _ = run(capsys, "--socket", fake_daemon, "paths")
    assert code == 0 and "leaf1 > spine1" in out
    code, _, err = run(capsys, "--socket", fake_daemon, "paths", "nope")
    assert code == 2 and "no planned flow 'nope'" in err
    code, out, _ = run(capsys, "--socket", fake_daemon, "int", "--json")
    assert code == 0 and json.loads(out)["received"] == 0
    code, _, err = run(capsys, "--socket", fake_daemon, "jobs", "rm", "x")
    assert code == 2 and "no job 'x'" in err
    code, out, _ = run(capsys, "--socket", fake_daemon, "jobs", "rm", "ring")
    assert code == 0 and "8 entries deleted" in out
    code, _, err = run(capsys, "--socket", fake_daemon, "mode", "ecmp")
    assert code == 1 and "refused the write" in err
    code, _, err = run(capsys, "--socket", fake_daemon, "stats")
    assert code == 2 and "unknown op" in err


def test_jobs_add_from_an_nccl_log_maps_hosts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    got: list[dict[str, Any]] = []

    def jobs_add(args: dict[str, Any]) -> Any:
        got.append(args["job"])
        return {
            "job": args["job"]["name"],
            "flows": 4,
            "entries": 4,
            "install_ms": 1.0,
            "max_load": 0.1,
        }

    srv = ApiServer(tmp_path / "c.sock", {"jobs.add": jobs_add})
    srv.start()
    try:
        log = ROOT / "tests" / "unit" / "control" / "fixtures" / "nccl_2node_8rank_2ch.log"
        code, out, _ = run(
            capsys,
            "--socket",
            str(srv.path),
            "jobs",
            "add",
            "--nccl-log",
            str(log),
            "--host-map",
            "gpu-node-a=h1",
            "--host-map",
            "gpu-node-b=h3",
            "--message-bytes",
            "1GiB",
            "--name",
            "nccl-ar",
        )
        assert code == 0 and "job nccl-ar" in out
        (job,) = got
        assert {r["host"] for r in job["ranks"]} == {"h1", "h3"}
        assert job["phases"][0]["message_bytes"] == 1 << 30
        assert len(job["phases"][0]["rings"]) == 2
        code, _, err = run(
            capsys,
            "--socket",
            str(srv.path),
            "jobs",
            "add",
            "--nccl-log",
            str(log),
            "--host-map",
            "nope",
        )
        assert code == 2 and "LOGHOST=TOPOHOST" in err
        code, _, err = run(capsys, "--socket", str(srv.path), "jobs", "add")
        assert code == 2 and "JOB file or --nccl-log" in err
    finally:
        srv.stop()


def test_socket_option_works_after_the_subcommand_too(
    capsys: pytest.CaptureFixture[str], fake_daemon: str
) -> None:
    code, out, _ = run(capsys, "jobs", "ls", "--json", "--socket", fake_daemon)
    assert code == 0 and json.loads(out)[0]["name"] == "ring"
    code, _, err = run(capsys, "--socket", fake_daemon, "paths", "--socket", "/nonexistent.sock")
    assert code == 1 and "nonexistent.sock" in err


def test_run_validates_before_connecting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sock = str(tmp_path / "r.sock")
    code, _, err = run(capsys, "run", "--topo", EXAMPLE, "--target", "bmv2", "--socket", sock)
    assert code == 2 and "--bmv2-json" in err
    code, _, err = run(capsys, "run", "--topo", str(tmp_path / "nope.yaml"), "--socket", sock)
    assert code == 2 and "nope.yaml" in err
    code, _, err = run(
        capsys, "run", "--topo", EXAMPLE, "--p4", str(tmp_path / "x.p4"), "--socket", sock
    )
    assert code == 2 and "x.p4" in err


def test_int_follow_prints_only_new_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def rep(i: int) -> dict[str, Any]:
        return {
            "time": float(i),
            "switch": "leaf2",
            "flow": f"f{i}",
            "tag": i,
            "reason": "sampled",
            "hops": [{"switch_id": 1, "ingress_port": 1, "egress_port": 3, "qdepth": i}],
        }

    answers = [
        {"received": 1, "undecodable": 0, "reports": [rep(1)]},
        {"received": 3, "undecodable": 0, "reports": [rep(1), rep(2), rep(3)]},
    ]

    def telemetry(args: dict[str, Any]) -> Any:
        if not answers:
            raise RuntimeError("controller stopped")
        return answers.pop(0)

    srv = ApiServer(tmp_path / "f.sock", {"int": telemetry})
    srv.start()
    try:
        code, out, err = run(
            capsys, "int", "--follow", "--json", "--interval", "0.01", "--socket", str(srv.path)
        )
    finally:
        srv.stop()
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["flow"] for x in lines] == ["f2", "f3"]
    assert code == 1 and "controller stopped" in err


def test_run_target_tofino_validates_its_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sock = str(tmp_path / "r.sock")
    code, _, err = run(capsys, "run", "--topo", EXAMPLE, "--target", "tofino", "--socket", sock)
    assert code == 2 and "--tofino-out" in err
    missing = str(tmp_path / "no-such-out")
    code, _, err = run(
        capsys,
        "run",
        "--topo",
        EXAMPLE,
        "--target",
        "tofino",
        "--tofino-out",
        missing,
        "--socket",
        sock,
    )
    assert code == 2 and "no-such-out" in err
    code, _, err = run(capsys, "run", "--topo", EXAMPLE, "--cpu-port", "999", "--socket", sock)
    assert code == 2 and "--cpu-port" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--target", "bmv2"],
            "icectl: run --target bmv2 needs --bmv2-json and --p4info (make p4)",
        ),
        (["--target", "tofino"], "icectl: run --target tofino needs --tofino-out"),
        (["--probe-misses", "0"], "--probe-interval must be >= 0 ms and --probe-misses >= 1"),
        (["--switch-addr", "nosuch=127.0.0.1:1"], "--switch-addr 'nosuch=127.0.0.1:1': expected"),
        (["--switch-addr", "leaf1=127.0.0.1"], "expected NAME=HOST:PORT with NAME a switch"),
    ],
)
def test_run_refuses_bad_options_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    sock = str(tmp_path / "api.sock")
    code, _, err = run(capsys, "run", "--topo", EXAMPLE, "--socket", sock, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not Path(sock).exists()  # refused before anything started
