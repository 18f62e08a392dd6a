"""Issue 26 items 4-5: the state file always says what the switches hold (written before a
change reaches them, the change rolled back when the write fails, tested on a really full
tmpfs), and ``icectl run --job`` is idempotent across restarts."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _jobs import ring_job

from icefabric import private
from icefabric.control.controller import Controller, StateWriteError
from icefabric.control.daemon.api import OperationFailed
from icefabric.control.daemon.service import api_handlers
from icefabric.control.fabric import entity_key
from icefabric.control.p4rt import PipelineConfig
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


J1 = ring_job("j1", ("h1", "h3", "h5", "h7"))
J2 = ring_job("j2", ("h2", "h4", "h6", "h8"))
J3 = ring_job("j3", ("h1", "h2", "h7", "h8"))


def primary(pipeline: PipelineConfig, state: Path) -> Controller:
    c = Controller(SPEC, pipeline, state_file=state)
    # as after a takeover: the switches hold base forwarding, the controller is active
    c.installer.holds_all(c.desired())
    c.active = True
    return c


def on_switches(c: Controller) -> dict[str, dict[Any, Any]]:
    """What the switches hold (what the controller wrote to them)."""
    return {sw: dict(ents) for sw, ents in c.installed.items()}


def per_state_file(pipeline: PipelineConfig, state: Path) -> dict[str, dict[Any, Any]]:
    """What a backup (or a restart) taking over from the state file would make them hold."""
    b = Controller(SPEC, pipeline, backup=True, state_file=state)
    b.statefile.load()
    assert b.state_errors == []
    return {sw: {entity_key(e): e for e in ents} for sw, ents in b.desired().items()}


def assert_consistent(c: Controller, pipeline: PipelineConfig) -> None:
    assert c.state_file is not None
    assert on_switches(c) == per_state_file(pipeline, c.state_file)


def every_change_fails_and_changes_nothing(c: Controller, pipeline: PipelineConfig) -> None:
    """With the state file unwritable: each kind of change is refused, and the switches, the
    controller and the file still agree."""
    held = on_switches(c)
    jobs = set(c.jobs)
    failed = c.topo.failed.copy()
    handlers = api_handlers(c)
    with pytest.raises(OperationFailed, match="No space left on device"):
        handlers["jobs.rm"]({"name": "j2"})  # the case: j2 must not come back
    with pytest.raises(StateWriteError, match="not applied"):
        c.add_job(J3)
    with pytest.raises(StateWriteError):
        c.fail_link("leaf2", "spine2")
    with pytest.raises(StateWriteError):
        c.fail_switch("spine1")
    assert set(c.jobs) == jobs and (c.topo.failed == failed).all() and not c.failed_switches
    assert on_switches(c) == held
    assert_consistent(c, pipeline)


def test_a_failed_state_write_changes_nothing(
    pipeline: PipelineConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = primary(pipeline, tmp_path / "state.json")
    c.add_job(J1)
    c.add_job(J2)
    assert_consistent(c, pipeline)

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("icefabric.control.store.filestore.write_private", full)
    every_change_fails_and_changes_nothing(c, pipeline)
    monkeypatch.undo()
    c.remove_job("j2")  # space again: the same change goes through
    c.fail_link("leaf2", "spine2")
    assert set(c.jobs) == {"j1"}
    assert_consistent(c, pipeline)


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(d: Path) -> Path:
    """Fill the file system of ``d`` to the last byte; the filler file."""
    filler = d / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 1):
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass
    return filler


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_tmpfs_leaves_the_switches_as_the_state_file_says(
    pipeline: PipelineConfig, tmp_path: Path
) -> None:
    with small_tmpfs(tmp_path / "run", "256k") as d:
        c = primary(pipeline, d / "state.json")
        c.add_job(J1)
        c.add_job(J2)
        before = (d / "state.json").read_bytes()
        filler = fill(d)
        every_change_fails_and_changes_nothing(c, pipeline)
        assert (d / "state.json").read_bytes() == before
        # no temp left (the event history beside the state file is the controller's own log)
        kept = sorted(p.name for p in d.iterdir() if not p.name.startswith("state.events.jsonl"))
        assert kept == ["filler", "state.json"]
        filler.unlink()
        c.remove_job("j2")
        assert set(c.jobs) == {"j1"}
        assert_consistent(c, pipeline)


def test_run_job_is_idempotent_across_a_restart(pipeline: PipelineConfig, tmp_path: Path) -> None:
    """Issue 26 item 5: the second start of ``icectl run --job J`` found J in the state file and
    failed with JobRejected (a crash loop under systemd)."""
    from icefabric.control.ccl.job import parse_job

    state = tmp_path / "state.json"
    first = primary(pipeline, state)
    assert first.ensure_job(parse_job(J1)) == "added"
    held = on_switches(first)
    # the restart: the same command line, the state file already holds j1
    again = primary(pipeline, state)
    again.statefile.load()
    again.installer.installed = held
    assert again.ensure_job(parse_job(J1)) == "unchanged"
    assert set(again.jobs) == {"j1"} and on_switches(again) == held
    changed = parse_job({**J1, "hosts": ["h2", "h4", "h6", "h8"]})
    assert again.ensure_job(changed) == "replaced"
    assert again.jobs["j1"].to_dict() == changed.to_dict()
    assert_consistent(again, pipeline)


def test_state_files_are_private_on_a_tmpfs_too(tmp_path: Path) -> None:
    """The writer the controller uses: 0600, never through a link (unchanged by the rollback)."""
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep")
    link = tmp_path / "state.json"
    link.symlink_to(target)
    private.write_private(link, b"{}")
    assert not link.is_symlink() and target.read_bytes() == b"keep"
    assert link.stat().st_mode & 0o777 == 0o600


def test_a_fifo_as_the_state_file_is_reported_not_waited_on(tmp_path: Path) -> None:
    """A takeover reading a FIFO planted at the state path hung in open()."""
    from icefabric.control.daemon.state import load_state

    fifo = tmp_path / "state.json"
    os.mkfifo(fifo, 0o600)
    state = load_state(fifo, "leaf-spine-2x4")
    assert state.jobs == [] and "not a regular file" in state.errors[0]
