"""Bad and huge input files (issue 11, items 9, 10, 11, 16, 17): every one gets a one-line
error naming the file and key with exit code 2 from icectl, never a traceback or a hang."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from _icectl import ROOT, run

from icefabric.control.ccl.job import MAX_RANKS, JobError, parse_job
from icefabric.control.controller import Controller
from icefabric.control.p4rt import PipelineConfig
from icefabric.topo.spec import SpecError, load_topology, parse_topology

EXAMPLE = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"
SPEC_DATA: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())


def topo_with(tmp_path: Path, edit: Any, name: str = "t.yaml") -> Path:
    data = json.loads(json.dumps(SPEC_DATA))
    edit(data)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if name.endswith(".yaml") else json.dumps(data))
    return p


def check_rejects(capsys: pytest.CaptureFixture[str], path: Path, *fragments: str) -> str:
    code, _, err = run(capsys, "topo", "check", str(path))
    assert code == 2, err
    assert str(path) in err and "Traceback" not in err
    for f in fragments:
        assert f in err, err
    return err


def job_data(**changes: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "j",
        "hosts": ["h1", "h3"],
        "phases": [{"name": "ar", "collective": "all-reduce", "message_bytes": "1MiB"}],
    }
    d.update(changes)
    return d


def job_error(data: Any) -> str:
    with pytest.raises(JobError) as err:
        parse_job(data, source="job.yaml")
    return str(err.value)


# ---------------------------------------------------------------- item 10: names


def rename_first_switch(name: str) -> Callable[[dict[str, Any]], None]:
    """A topology edit: the first switch renamed to ``name`` everywhere it is named."""

    def edit(d: dict[str, Any]) -> None:
        old = d["switches"][0]["name"]
        d["switches"][0]["name"] = name
        for h in d["hosts"]:
            if h["leaf"] == old:
                h["leaf"] = name
        for ln in d["links"]:
            for side in ("a", "b"):
                if ln[side]["node"] == old:
                    ln[side]["node"] = name

    return edit


def test_topo_check_rejects_a_300_character_switch_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    long = "s" * 300

    check_rejects(
        capsys, topo_with(tmp_path, rename_first_switch(long)), "switches[0].name", "300 characters"
    )


# ---------------------------------------------------------------- item 17: values


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda d: d["hosts"][0].update(port=255), "hosts[0].port", "CPU port"),
        (lambda d: d["links"][0]["a"].update(port=255), "links[0].a.port", "CPU port"),
        (lambda d: d["links"][0].update(rate_gbps=float("inf")), "links[0].rate_gbps", "finite"),
        (lambda d: d["links"][0].update(delay_us=float("nan")), "links[0].delay_us", "finite"),
        (
            lambda d: d.setdefault("defaults", {}).update(link_rate_gbps=float("inf")),
            "defaults",
            "finite",
        ),
        (lambda d: d["hosts"][0].update(ip="10.0.1.1/0"), "hosts[0].ip", "/8 .. /30"),
        (lambda d: d["hosts"][0].update(ip="10.0.1.0/24"), "hosts[0].ip", "network or broadcast"),
        (lambda d: d["hosts"][0].update(ip="10.0.1.255/24"), "hosts[0].ip", "network or broadcast"),
        (lambda d: d["hosts"][0].update(ip="224.0.0.1/8"), "hosts[0].ip", "unicast"),
        (lambda d: d["hosts"][0].update(ip="0.0.0.0/8"), "hosts[0].ip", ""),
        (lambda d: d["hosts"][0].update(mac="ff:ff:ff:ff:ff:ff"), "hosts[0].mac", "unicast"),
        (lambda d: d["hosts"][0].update(mac="01:00:5e:00:00:01"), "hosts[0].mac", "unicast"),
        (lambda d: d["hosts"][0].update(mac="00:00:00:00:00:00"), "hosts[0].mac", "00:00:00"),
        (lambda d: d["hosts"][0].update(mac="02:1c:e0:00:00:01"), "hosts[0].mac", "router"),
        (lambda d: d["switches"][0].update(switch_id=1 << 24), "switches[0].switch_id", "16777215"),
    ],
)
def test_topo_check_rejects_values_later_stages_cannot_use(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: Any, key: str, words: str
) -> None:
    path = topo_with(tmp_path, edit, "t.json")  # JSON: YAML cannot carry nan portably
    check_rejects(capsys, path, key, words)


def test_duplicate_yaml_keys_are_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = EXAMPLE.read_text().replace("name: ", "name: dup\nname: ", 1)
    p = tmp_path / "dup.yaml"
    p.write_text(text)
    check_rejects(capsys, p, "appears twice")
    j = tmp_path / "job.json"
    j.write_text('{"name": "a", "name": "b", "hosts": ["h1", "h3"], "phases": []}')
    code, _, err = run(capsys, "plan", "--topo", str(EXAMPLE), "--job", str(j))
    assert code == 2 and "appears twice" in err and str(j) in err


def test_tree_rank_must_be_an_integer() -> None:
    data = job_data(
        hosts=["h1", "h3", "h5"],
        phases=[
            {
                "name": "t",
                "collective": "all-reduce",
                "algorithm": "tree",
                "message_bytes": 1024,
                "trees": [{"0": -1, "1": 0, "2": 1.9}],
            }
        ],
    )
    assert "phases[0].trees[0]" in job_error(data)


@pytest.mark.parametrize(
    "size", [1e29, "1e29", "999999999999999999999999999999TiB", "9" * 5000, 2**80]
)
def test_huge_message_sizes_are_rejected(size: Any) -> None:
    msg = job_error(job_data(phases=[{"collective": "all-reduce", "message_bytes": size}]))
    assert "phases[0].message_bytes" in msg and len(msg) < 400


def test_control_characters_in_names_never_reach_the_terminal() -> None:
    msg = job_error(job_data(name="evil\x1b[2J\x07"))
    assert "\x1b" not in msg and "printable" in msg


# ---------------------------------------------------------------- item 11: empty jobs


def test_zero_message_bytes_is_rejected() -> None:
    msg = job_error(job_data(phases=[{"collective": "all-reduce", "message_bytes": 0}]))
    assert "phases[0].message_bytes" in msg


def test_job_without_network_flows_can_be_removed(pipeline: PipelineConfig, tmp_path: Path) -> None:
    ctl = Controller(load_topology(EXAMPLE), pipeline, state_file=tmp_path / "s.json")
    ctl.installer.holds_all(ctl.desired())
    res = ctl.add_job(job_data(name="local", hosts=["h1"], ranks_per_host=8))
    assert res["flows"] == 0  # eight ranks on one host talk over NVLink, not the network
    assert ctl.remove_job("local")["job"] == "local"
    assert ctl.jobs == {}


# ---------------------------------------------------------------- item 9: sizes


@pytest.mark.timeout(30)
def test_huge_ranks_per_host_is_rejected_before_building_ranks() -> None:
    msg = job_error(job_data(ranks_per_host=100_000_000))
    assert "ranks_per_host" in msg


@pytest.mark.timeout(30)
def test_too_many_ranks_are_rejected() -> None:
    msg = job_error(job_data(hosts=[f"h{i}" for i in range(MAX_RANKS // 8 + 1)], ranks_per_host=8))
    assert "exceeds the limit" in msg


@pytest.mark.timeout(30)
def test_all_to_all_flow_explosion_is_rejected() -> None:
    hosts = [f"h{i}" for i in range(4096)]
    msg = job_error(
        job_data(hosts=hosts, phases=[{"collective": "all-to-all", "message_bytes": 1 << 20}])
    )
    assert "network flows" in msg


@pytest.mark.timeout(60)
def test_too_many_hosts_are_rejected_quickly() -> None:
    data = json.loads(json.dumps(SPEC_DATA))
    data["hosts"] = [{"name": f"x{i}"} for i in range(200_000)]
    with pytest.raises(SpecError) as err:
        parse_topology(data, source="big.yaml")
    assert "hosts: expected at most" in str(err.value)


# ---------------------------------------------------------------- item 16: unreadable files


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("bin.yaml", b"\xff\xfe\x00\x01binary", "not UTF-8"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
        ("deep.yaml", b"a: " + b"[" * 100_000, "nests deeper"),
        ("bad.json", b'{"name": ', "not valid JSON"),
    ],
)
def test_unreadable_files_give_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: bytes, words: str
) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    for argv in (("topo", "check", str(p)), ("plan", "--topo", str(EXAMPLE), "--job", str(p))):
        code, _, err = run(capsys, *argv)
        assert code == 2, err
        assert words in err and str(p) in err and "Traceback" not in err
        assert len(err.strip().splitlines()) <= 2


def test_topo_check_warns_when_mininet_cannot_name_an_interface(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    long = "leafnumberone"  # 13 characters: leafnumberone-eth1 has 18

    code, out, err = run(
        capsys, "topo", "check", str(topo_with(tmp_path, rename_first_switch(long)))
    )
    assert code == 0 and "ok" in out
    assert "Mininet cannot bring this spec up" in err and f"{long}-eth" in err
