"""The Mininet bring-up's process and log handling, without a network: switch processes in
sessions of their own (Ctrl-C at mininet> cannot reach them), a dead switch reported at once,
logs kept across starts, Mininet's lines printed once, another network's interfaces refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("mininet.net")

from icefabric.topo import mininet as bringup
from icefabric.topo import switches
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


def _switch(tmp_path: Path) -> switches.ICESwitch:
    sw = switches.ICESwitch.__new__(switches.ICESwitch)  # no Mininet node: only the process side
    sw.name = "leaf1"
    sw.log_path = tmp_path / "ice-leaf1.log"
    return sw


def test_a_switch_process_runs_in_a_session_of_its_own(tmp_path: Path) -> None:
    """Ctrl-C at mininet> signals the CLI's process group: a switch in it would die."""
    sw = _switch(tmp_path)
    with (tmp_path / "out").open("wb") as out:
        proc = sw._spawn([sys.executable, "-c", "import time; time.sleep(30)"], out)
    try:
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
        assert os.getpgid(proc.pid) != os.getpgid(0)
    finally:
        proc.kill()
        proc.wait()


def test_a_switch_that_dies_is_reported_once_with_its_log(tmp_path: Path) -> None:
    sw = _switch(tmp_path)
    with (tmp_path / "out").open("wb") as out:
        sw.proc = sw._spawn([sys.executable, "-c", "import time; time.sleep(30)"], out)
    alive = SimpleNamespace(name="leaf2", proc=None, log_path=tmp_path / "x")
    watch = bringup.SwitchWatch([sw, alive])
    assert watch.check() == []
    sw.proc.kill()
    sw.proc.wait()
    (line,) = watch.check()
    assert line.startswith("*** switch leaf1 is DOWN: its process ")
    assert "killed by signal 9" in line and str(sw.log_path) in line
    assert watch.check() == []  # once


def test_switch_logs_are_kept_across_starts(tmp_path: Path) -> None:
    log = tmp_path / "ice-leaf1.log"
    for i in range(5):
        switches.rotate_log(log)
        log.write_text(f"start {i}\n")
    assert log.read_text() == "start 4\n"
    assert [(tmp_path / f"ice-leaf1.log.{k}").read_text() for k in (1, 2, 3)] == [
        "start 3\n",
        "start 2\n",
        "start 1\n",
    ]
    assert not (tmp_path / "ice-leaf1.log.4").exists()


def test_mininet_lines_and_ours_are_printed_once() -> None:
    """Mininet's logger propagates to the root logger (a root handler printed every CLI line
    again as `Level 25 mininet: ...`), and mininet.log makes later loggers MininetLoggers with
    a console handler each (every line of ours twice)."""
    script = (
        "from icefabric.topo.mininet import setup_logging\n"
        "setup_logging()\n"
        "from mininet.log import lg, output\n"
        "lg.setLogLevel('output')\n"
        "output('pingall-line\\n')\n"
        "import logging\n"
        "logging.getLogger('icefabric.control.someone').warning('own-line')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    text = res.stdout + res.stderr
    assert text.count("pingall-line") == 1 and "Level 25" not in text
    assert text.count("own-line") == 1


def test_another_networks_interfaces_are_named_in_one_line(tmp_path: Path) -> None:
    names = bringup.interface_names(SPEC)
    assert "leaf1-eth1" in names and all("-eth" in n for n in names)
    assert bringup.busy_interfaces(SPEC, tmp_path) == []
    (tmp_path / names[0]).mkdir()
    busy = bringup.busy_interfaces(SPEC, tmp_path)
    assert busy == [names[0]]
    msg = bringup.busy_message(SPEC, busy)
    assert names[0] in msg and "mn -c" in msg and "\n" not in msg


def test_experiment_refuses_with_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from icefabric.icectl import main

    monkeypatch.setattr(bringup, "busy_interfaces", lambda spec: ["leaf1-eth1", "leaf1-eth2"])
    out = tmp_path / "results"
    argv = ["experiment", "run", "--preset", "mininet-small", "--engine", "mininet"]
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "another Mininet network holds" in err
    assert "leaf1-eth1" in err and not out.exists()


def test_a_switch_outside_the_cli_process_group_survives_sigint_to_it(tmp_path: Path) -> None:
    """What Mininet's CLI does on Ctrl-C: SIGINT to its own process group."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from icefabric.topo import switches as b\n"
        "sw = b.ICESwitch.__new__(b.ICESwitch); sw.name = 's'\n"
        f"p = sw._spawn([sys.executable, '-c', 'import time; time.sleep(60)'], open({str(tmp_path / 'o')!r}, 'wb'))\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        os.killpg(parent.pid, 2)  # Ctrl-C at the terminal: SIGINT to the foreground group
        parent.wait(timeout=30)
        os.kill(child, 0)  # still there
    finally:
        os.kill(child, 9)
