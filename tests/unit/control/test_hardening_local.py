"""Local users and files (issue 11, items 2, 3, 7, 13): the private runtime directory, state files
that cannot be planted or read by others, a socket squatter, a damaged state file, a burst of
connections."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from icefabric import private
from icefabric.control.ccl.job import parse_job
from icefabric.control.daemon import api as api_mod
from icefabric.control.daemon import paths
from icefabric.control.daemon.api import (
    ApiClient,
    ApiServer,
    ApiUnavailable,
    encode_frame,
    read_frame,
)
from icefabric.control.daemon.state import load_state, save_state

JOB = parse_job(
    {
        "name": "ring",
        "hosts": ["h1", "h3"],
        "phases": [{"name": "ar", "collective": "all-reduce", "message_bytes": "1MiB"}],
    }
)


# ---------------------------------------------------------------- item 2: files


def test_runtime_dir_is_private_and_not_tmp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(private.ENV_DIR, raising=False)
    assert private.runtime_dir() != Path("/tmp")
    assert paths.default_state_file("fab").parent == private.runtime_dir()
    assert paths.default_socket().parent == private.runtime_dir()
    monkeypatch.setenv(private.ENV_DIR, str(tmp_path / "rt"))
    d = private.ensure_private_dir()
    assert d == tmp_path / "rt" and stat.S_IMODE(os.lstat(d).st_mode) == 0o700


def test_private_dir_refuses_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "rt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(private.UnsafePathError, match="symlink"):
        private.ensure_private_dir(tmp_path / "rt")


def test_state_write_does_not_follow_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state.json"
    # the names the old code wrote through, planted by another user
    (tmp_path / "state.json.tmp").symlink_to(victim)
    save_state(state, "fab", [JOB])
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(os.lstat(state).st_mode) == 0o600
    assert not state.is_symlink()
    assert [j.name for j in load_state(state, "fab").jobs] == ["ring"]


def test_state_file_through_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    save_state(real, "fab", [JOB])
    link = tmp_path / "state.json"
    link.symlink_to(real)
    st = load_state(link, "fab")
    assert st.jobs == [] and "symlink" in st.errors[0]


def test_state_file_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.json"
    save_state(state, "fab", [JOB])
    real_uid = os.geteuid()
    monkeypatch.setattr(paths.os, "geteuid", lambda: real_uid + 4242)
    st = load_state(state, "fab")
    assert st.jobs == [] and "owned by uid" in st.errors[0]


def test_group_writable_state_file_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    save_state(state, "fab", [JOB])
    os.chmod(state, 0o666)
    st = load_state(state, "fab")
    assert st.jobs == [] and "writable by group or others" in st.errors[0]


# ---------------------------------------------------------------- item 7: damaged state


def test_truncated_state_file_is_reported_not_raised(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    save_state(state, "fab", [JOB])
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2])
    st = load_state(state, "fab")
    assert st.jobs == [] and len(st.errors) == 1
    assert str(state) in st.errors[0] and "JSON" in st.errors[0]


def test_state_with_one_bad_job_keeps_the_good_ones(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    save_state(state, "fab", [JOB])
    doc = json.loads(state.read_text())
    doc["jobs"].append({"name": "broken", "phases": "nope"})
    doc["failed_links"] = "x"
    state.write_text(json.dumps(doc))
    os.chmod(state, 0o600)
    st = load_state(state, "fab")
    assert [j.name for j in st.jobs] == ["ring"]
    assert len(st.errors) == 2
    assert any("jobs[1]" in e for e in st.errors) and any("failed_links" in e for e in st.errors)


# ---------------------------------------------------------------- item 3: squatters


def _fake_controller(sock: socket.socket, received: list[bytes]) -> None:
    """What a squatter does: accept, record what the client sent, reply success."""
    conn, _ = sock.accept()
    with conn:
        conn.settimeout(2)
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        received.append(data)
        if data:
            conn.sendall(encode_frame({"ok": True, "result": {"job": "fake"}}))


def test_client_refuses_a_peer_of_another_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "icectl.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    received: list[bytes] = []
    t = threading.Thread(target=_fake_controller, args=(srv, received), daemon=True)
    t.start()
    # The process at the other end appears to run as some other user.
    monkeypatch.setattr(paths, "peer_uid", lambda _s: 4242 if os.geteuid() != 4242 else 4243)
    with ApiClient(path, timeout=2) as c, pytest.raises(ApiUnavailable, match="uid 4242"):
        c.call("jobs.add", job={"name": "secret"})
    t.join(timeout=5)
    srv.close()
    assert received in ([], [b""])  # nothing was sent to the impostor


ROOT = Path(__file__).resolve().parents[3]
OTHER_UID = 65534


def interpreter_for_other_users() -> str:
    """A Python interpreter another uid can run whatever the checkout's parents allow: the real
    file behind the venv's ``python`` (a checkout made in a 0700 ``mktemp -d`` folder holds a
    .venv the other uid cannot reach: issue 26 item 14). Skips when there is none."""
    exe = Path(os.path.realpath(sys.executable))
    for p in [exe, *exe.parents]:
        mode = p.stat().st_mode
        if not mode & stat.S_IXOTH:
            pytest.skip(f"{p}: not reachable by uid {OTHER_UID} (mode {mode & 0o777:o})")
    return str(exe)


def run_as_other_user(script: str, *args: str) -> subprocess.Popen[str]:
    """``python -I -c script args`` as uid 65534, from ``/``: nothing of the checkout (its
    .venv, its folder, the user site) is needed, so the test holds wherever it sits."""
    return subprocess.Popen(
        [interpreter_for_other_users(), "-I", "-c", script, *args],
        user=OTHER_UID,
        cwd="/",
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_the_other_user_needs_nothing_from_the_checkout() -> None:
    """Item 14: the squatter ran the checkout's .venv/bin/python as uid 65534, which fails when
    the checkout sits under a 0700 folder."""
    exe = interpreter_for_other_users()
    assert not Path(exe).is_relative_to(ROOT)
    proc = run_as_other_user("import os,sys;print(os.getuid(), sys.flags.isolated)")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.split() == [str(OTHER_UID), "1"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a squatter as another user")
def test_real_squatter_of_another_uid_is_refused() -> None:
    d = Path(tempfile.mkdtemp(prefix="icectl-squat-"))
    try:
        os.chmod(d, 0o1777)
        path = d / "icectl.sock"
        script = (
            "import socket,struct,sys;s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1]);"
            "s.listen(1);print('ready',flush=True);c,_=s.accept();c.settimeout(3);"
            'd=c.recv(65536);b=b\'{"ok":true,"result":1}\';'
            "c.sendall(struct.pack('!I',len(b))+b) if d else None;print(len(d),flush=True)"
        )
        proc = run_as_other_user(script, str(path))
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            with ApiClient(path, timeout=2) as c, pytest.raises(ApiUnavailable, match="65534"):
                c.call("status")
            out, _ = proc.communicate(timeout=10)
            assert out.strip() == "0"  # the squatter got no request
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # and the real controller refuses to replace the other user's socket
        server = ApiServer(path, {"status": lambda _a: {}})
        with pytest.raises(ApiUnavailable, match="owned by uid 65534"):
            server.start()
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


def test_server_socket_is_0600_and_refuses_other_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "icectl.sock"
    calls: list[dict[str, Any]] = []
    server = ApiServer(path, {"status": lambda a: calls.append(a) or {"ok": 1}})
    server.start()
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with ApiClient(path, timeout=2) as c:
            assert c.call("status") == {"ok": 1}
        # a client of another uid: the server hangs up before reading a request
        monkeypatch.setattr(paths, "peer_uid", lambda _s: 4242 if os.geteuid() != 4242 else 4243)
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(2)
        raw.connect(str(path))
        try:
            raw.sendall(encode_frame({"op": "status", "args": {}}))
            assert read_frame(raw) is None
        except (ConnectionResetError, BrokenPipeError):
            pass  # hung up with the request unread
        raw.close()
    finally:
        server.stop()
    assert len(calls) == 1


# ---------------------------------------------------------------- item 13: bursts


def test_client_retries_while_the_backlog_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "busy.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(0)
    fillers = []
    while True:  # fill the listen backlog until a non-blocking connect says EAGAIN
        f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        f.setblocking(False)
        try:
            f.connect(str(path))
        except BlockingIOError:
            f.close()
            break
        fillers.append(f)
        assert len(fillers) < 64
    retrying = threading.Event()
    real_sleep = api_mod.time.sleep

    def sleep(s: float) -> None:
        retrying.set()
        real_sleep(s)

    monkeypatch.setattr(api_mod.time, "sleep", sleep)

    def drain() -> None:
        if not retrying.wait(10):
            return
        for _ in fillers:
            srv.accept()[0].close()
        conn, _ = srv.accept()
        with conn:
            req = read_frame(conn)
            conn.sendall(encode_frame({"ok": True, "result": req}))

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    try:
        with ApiClient(path, timeout=10) as c:
            assert c.call("status") == {"op": "status", "args": {}}
    finally:
        retrying.set()
        t.join(timeout=10)
        for f in fillers:
            f.close()
        srv.close()


def test_server_backlog_holds_a_burst() -> None:
    assert api_mod.BACKLOG >= 128


# ---------------------------------------------------------------- item 16: API frames


def test_deeply_nested_api_frame_gets_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "icectl.sock"
    server = ApiServer(path, {"status": lambda _a: {"up": True}})
    server.start()
    try:
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(5)
        raw.connect(str(path))
        body = b'{"op": "status", "args": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        raw.sendall(len(body).to_bytes(4, "big") + body)
        reply = read_frame(raw)
        assert reply is not None and reply["ok"] is False
        assert (
            reply["error"]["kind"] == "usage" and "nests JSON deeper" in reply["error"]["message"]
        )
        raw.close()
        with ApiClient(path, timeout=5) as c:  # the daemon is still there
            assert c.call("status") == {"up": True}
    finally:
        server.stop()


# ---------------------------------------------------------------- item 2: switch logs


def test_switch_logs_default_to_the_private_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(private.ENV_DIR, str(tmp_path / "rt"))
    d = private.default_log_dir()
    assert d == tmp_path / "rt" / "logs"
    assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(d.parent).st_mode) == 0o700


def test_log_is_never_written_through_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    log = tmp_path / "ice-leaf1.log"
    log.symlink_to(victim)
    with pytest.raises(private.UnsafePathError, match="symlink"):
        private.open_private_log(log)
    assert victim.read_text() == "precious\n"
    fresh = tmp_path / "ice-leaf2.log"
    with private.open_private_log(fresh) as f:
        f.write(b"started\n")
    assert stat.S_IMODE(os.lstat(fresh).st_mode) == 0o600
    with private.open_private_log(fresh) as f:  # truncated, as a new run's log
        f.write(b"again\n")
    assert fresh.read_bytes() == b"again\n"


def test_mininet_bring_up_has_no_tmp_default() -> None:
    import inspect

    mininet = pytest.importorskip("icefabric.topo.mininet", reason="Mininet is not installed")
    assert inspect.signature(mininet.build_network).parameters["log_dir"].default is None


def test_server_never_replaces_a_file_that_is_not_a_socket(tmp_path: Path) -> None:
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me\n")
    with pytest.raises(ApiUnavailable, match="not a socket"):
        ApiServer(precious, {}).start()
    assert precious.read_text() == "keep me\n"
