"""icectl run's store options: bad values are one-line usage errors before anything starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from icefabric.icectl import main

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = str(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        (["--store", "etcd://nohostport"], "HOST:PORT"),
        (["--store", "zk://a:1"], "scheme"),
        (["--store", "etcd://a:1", "--lease", "0"], "--lease"),
        (["--store", "etcd://a:1", "--etcd-cert", "{tmp}/c.pem"], "no such file"),
        (["--store", "etcd://a:1", "--etcd-password-file", "{tmp}/pw"], "--etcd-user"),
        (
            ["--store", "etcd://a:1", "--etcd-user", "u", "--etcd-password-file", "{tmp}/pw"],
            "others",
        ),
        (["--store", "etcd://a:1", "--etcd-prefix", "noslash"], "--etcd-prefix"),
        (["--switch-addr", "leaf9=1.2.3.4:1"], "--switch-addr"),
        (["--switch-addr", "leaf1=1.2.3.4"], "NAME=HOST:PORT"),
    ],
)
def test_bad_store_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], word: str
) -> None:
    pw = tmp_path / "pw"
    pw.write_text("secret\n")
    os.chmod(pw, 0o644)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    code, err = run(capsys, "run", "--topo", EXAMPLE, "--socket", str(tmp_path / "s.sock"), *argv)
    assert code == 2, err
    assert word in err and err.count("\n") == 1, err


def test_status_shows_the_store_term_and_every_replica(capsys: pytest.CaptureFixture[str]) -> None:
    from icefabric.control import render
    from icefabric.control.cli.daemon import _print_store

    store = {
        "kind": "etcd",
        "endpoints": ["http://10.0.0.1:2379", "http://10.0.0.2:2379"],
        "replica": "s1",
        "role": "primary",
        "term": 42,
        "leader": "s1",
        "leader_term": 42,
        "lease_s": 1,
        "lease_left_s": 0.71,
        "generation": 7,
        "fenced": "",
        "replicas": [
            {"name": "s1", "role": "primary", "term": 42, "host": "a", "api": "/run/x.sock",
             "agent": ["unix:/run/x-agents.sock"]},
            {"name": "s2", "role": "standby", "term": 0, "host": "b", "api": "/run/y.sock",
             "agent": ["tcp:10.0.0.2:7000"]},
        ],
        "members": [
            {"endpoint": "http://10.0.0.1:2379", "up": True, "leader": True},
            {"endpoint": "http://10.0.0.2:2379", "up": False, "leader": False},
        ],
    }  # fmt: skip
    _print_store(render.console(), store)
    out = capsys.readouterr().out
    for word in ("term 42", "s2", "standby", "tcp:10.0.0.2:7000", "1 of 2 answering", "down"):
        assert word in out, word
    _print_store(render.console(), {"kind": "file", "where": "/run/fab.state.json"})
    assert "store: file /run/fab.state.json" in capsys.readouterr().out
