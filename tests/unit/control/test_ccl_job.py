"""Job descriptions: loading, shorthand, and errors that name file, key and expectation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from icefabric.control.ccl.job import JobError, load_job, parse_job, parse_size


def _job() -> dict[str, Any]:
    return {
        "name": "mixed",
        "ranks": [
            {"host": "h1", "vendor": "nvidia", "device": "A100"},
            {"host": "h2", "vendor": "biren", "device": "BR104"},
            {"host": "h3"},
            "h4",
        ],
        "phases": [
            {
                "name": "dp",
                "collective": "AllReduce",
                "algorithm": "Ring",
                "channels": 2,
                "message_bytes": "256MiB",
            },
            {"name": "pp", "collective": "pipeline", "message_bytes": 1024, "ranks": [0, 2]},
        ],
    }


def _errors(data: Any) -> list[str]:
    with pytest.raises(JobError) as ei:
        parse_job(data, source="jobs/j.yaml")
    return ei.value.errors


def test_load_yaml_file(tmp_path: Path) -> None:
    p = tmp_path / "j.yaml"
    p.write_text(yaml.safe_dump(_job()))
    j = load_job(p)
    assert [r.host for r in j.ranks] == ["h1", "h2", "h3", "h4"]
    assert j.ranks[1].vendor == "biren" and j.ranks[3].vendor == "nvidia"
    dp, pp = j.phases
    assert (dp.collective, dp.algorithm, dp.channels, dp.message_bytes) == (
        "all-reduce",
        "ring",
        2,
        256 << 20,
    )
    assert (pp.collective, pp.algorithm, pp.pairs) == ("send-recv", "", ((0, 2),))
    assert parse_job(j.to_dict()) == j


def test_hosts_shorthand() -> None:
    j = parse_job(
        {
            "name": "j",
            "hosts": ["a", "b"],
            "ranks_per_host": 4,
            "device": "H100",
            "phases": [{"collective": "all-gather", "message_bytes": "1G"}],
        }
    )
    assert len(j.ranks) == 8 and j.host_of(5) == "b" and j.ranks[5].device == "H100"
    assert j.phases[0].name == "phase0" and j.phases[0].message_bytes == 1 << 30
    assert j.hosts == ("a", "b")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4096, 4096),
        ("4KiB", 4096),
        ("4KB", 4000),
        ("2M", 2 << 20),
        ("1.5GiB", 3 << 29),
        ("1 GB", 10**9),
    ],
)
def test_parse_size(value: Any, expected: int) -> None:
    assert parse_size(value) == expected


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["phases"][0].update(collective="broadcast"),
            "jobs/j.yaml: phases[0].collective: expected one of all-reduce, all-gather, reduce-scatter, all-to-all, send-recv, got 'broadcast'",
        ),
        (
            lambda d: d["phases"][0].update(algorithm="halving-doubling", ranks=[0, 1, 2]),
            "jobs/j.yaml: phases[0].ranks: halving-doubling needs a power-of-two rank count, got 3",
        ),
        (
            lambda d: d["phases"][0].update(algorithm="tree", collective="all-gather"),
            "jobs/j.yaml: phases[0].algorithm: all-gather runs as ring, halving-doubling, got 'tree'",
        ),
        (
            lambda d: d["phases"][0].update(message_bytes="lots"),
            "jobs/j.yaml: phases[0].message_bytes: expected a size like 1048576, 256MiB or 1GB, got 'lots'",
        ),
        (
            lambda d: d["phases"][0].update(channels=0),
            "jobs/j.yaml: phases[0].channels: expected an integer 1..64, got 0",
        ),
        (
            lambda d: d["phases"][0].update(rings=[[0, 1, 2, 3]]),
            "jobs/j.yaml: phases[0].rings: expected one ring per channel (2), got [[0, 1, 2, 3]]",
        ),
        (
            lambda d: d["phases"][0].update(rings=[[0, 1, 2, 3], [0, 1, 2, 2]]),
            "jobs/j.yaml: phases[0].rings[1]: expected each rank once",
        ),
        (
            lambda d: d["phases"][0].update(ranks=[0, 9]),
            "jobs/j.yaml: phases[0].ranks[1]: expected a rank 0..3, got 9",
        ),
        (
            lambda d: d["phases"][1].update(name="dp"),
            "jobs/j.yaml: phases[1].name: name 'dp' is already used by phases[0]",
        ),
        (
            lambda d: d["phases"][1].update(pairs=[[0, 0]]),
            "jobs/j.yaml: phases[1].pairs[0]: expected two different ranks, got [0, 0]",
        ),
        (
            lambda d: d["phases"][1].update(algorithm="ring"),
            "jobs/j.yaml: phases[1].algorithm: send-recv takes no algorithm, got 'ring'",
        ),
        (
            lambda d: d["ranks"][1].pop("host"),
            "jobs/j.yaml: ranks[1].host: expected a host name, got None",
        ),
        (
            lambda d: d["ranks"][0].update(rank=3),
            "jobs/j.yaml: ranks[0].rank: ranks are listed in order: expected 0, got 3",
        ),
        (
            lambda d: d.update(priority=1),
            "jobs/j.yaml: priority: unknown key (expected one of device, hosts, name, phases, ranks, ranks_per_host, vendor)",
        ),
        (lambda d: d.update(phases=[]), "jobs/j.yaml: phases: expected a non-empty list of phases"),
        (
            lambda d: d.update(name="a/b"),
            "jobs/j.yaml: name: expected a non-empty string without '/', got 'a/b'",
        ),
        (
            lambda d: d["phases"][0].update(
                algorithm="tree", trees=[{0: -1, 1: 0, 2: 1, 3: 2}, {0: 1, 1: 0, 2: -1, 3: 2}]
            ),
            "jobs/j.yaml: phases[0].trees[1]: parent links form a cycle through rank 0",
        ),
        (
            lambda d: d["phases"][0].update(
                algorithm="tree", trees=[{0: -1, 1: 0, 2: 1}, {0: -1, 1: 0, 2: 1, 3: 2}]
            ),
            "jobs/j.yaml: phases[0].trees[0]: expected every rank of the phase once, missing [3]",
        ),
    ],
)
def test_job_errors(mutate: Any, expected: str) -> None:
    d = copy.deepcopy(_job())
    mutate(d)
    assert expected in _errors(d)


def test_not_a_mapping_and_bad_file(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"jobs/j.yaml: \(top level\): expected a mapping, got list"):
        parse_job([1], source="jobs/j.yaml")
    bad = tmp_path / "j.json"
    bad.write_text("{not json")
    with pytest.raises(JobError, match=r"j.json: not valid JSON"):
        load_job(bad)


def test_check_hosts_against_topology() -> None:
    from icefabric.control.ccl.job import check_hosts

    j = parse_job(_job())
    assert check_hosts(j, ["h1", "h2", "h3", "h4"]) == []
    assert check_hosts(j, ["h1", "h2", "h3"], topology="topology 'ls'") == [
        "job 'mixed': ranks[3].host: no host 'h4' in topology 'ls'"
    ]
