"""The hostile tier for files (issue 26 items 2, 3, 8, 9, 10, 12): special files and endless
streams as inputs, symlinks planted at outputs, files the caller could not read named inside
an experiment, hostile results.json, simulator parameters past their bounds. Every case must
end with a one-line error naming the file or field, quickly, with nothing written through a
link and no content of an unreadable file quoted."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from icefabric.files import (
    DataFileError,
    UnsafeOutputError,
    caller,
    read_data_file,
    read_input,
    write_output,
)
from icefabric.icectl import main

ROOT = Path(__file__).resolve().parents[3]
TOPO = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"
JOB = ROOT / "control" / "ccl" / "examples" / "mixed_dp_allreduce.yaml"
SECRET = "root:$6$c2VjcmV0LXNhbHQ$TOP-SECRET-HASH-0123456789:19000:0:99999:7:::"
NOBODY = 65534


def icectl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, out: str, err: str, *needles: str) -> str:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    for n in needles:
        assert n in err, (n, err)
    return err


# --------------------------------------------------------------------------- special inputs


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused_before_a_byte_is_read(device: str, tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="is a character device; expected a regular file"):
        read_input(device)
    link = tmp_path / "topo.yaml"
    link.symlink_to(device)
    with pytest.raises(DataFileError, match="character device"):
        read_data_file(link)


def test_a_fifo_with_no_writer_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    with pytest.raises(DataFileError, match="FIFO or pipe; expected a regular file"):
        read_input(fifo)


def test_an_endless_stream_is_cut_by_bytes_and_by_time(tmp_path: Path) -> None:
    fifo = tmp_path / "nccl.log"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer() -> None:
        try:  # a FIFO, written until the reader leaves
            with open(fifo, "wb") as f:
                while not stop.is_set():
                    f.write(b"NCCL INFO endless line\n" * 64)
        except OSError:
            pass

    for limit, budget, match in (
        (64 * 1024, 30.0, "larger than the limit"),
        (1 << 30, 0.5, "giving up"),
    ):
        t = threading.Thread(target=writer, daemon=True)
        t.start()
        try:
            with pytest.raises(DataFileError, match=match):
                read_input(fifo, stream=True, limit=limit, budget_s=budget)
        finally:
            stop.set()
            t.join(timeout=10)
            stop.clear()


def test_ccl_inspect_refuses_devices_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Item 9: icectl ccl inspect /dev/zero and /dev/urandom ran past 60 s."""
    for device in ("/dev/zero", "/dev/urandom"):
        one_line_error(*icectl(capsys, "ccl", "inspect", device), device, "character device")


def test_an_experiment_naming_a_device_as_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: dev\ntopology: {{file: {TOPO}}}\n"
        "workload: {nccl_log: {file: /dev/zero, collective: all-reduce}}\n"
    )
    err = one_line_error(*icectl(capsys, "experiment", "run", str(exp), "--no-plot"))
    assert "workload.nccl_log.file" in err and "character device" in err


# --------------------------------------------------------------------------- results.json


def results_dir(tmp_path: Path, body: bytes | str) -> Path:
    d = tmp_path / "res"
    d.mkdir()
    (d / "results.json").write_bytes(body.encode() if isinstance(body, str) else body)
    return d


GOOD = {"schema": "icefabric.experiment/1", "experiment": {"name": "x"}, "modes": []}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[" * 100_000 + "]" * 100_000, "nests deeper than 64 levels"),
        (json.dumps({**GOOD, "comparison": None}), "comparison: expected an object, got null"),
        (json.dumps({**GOOD, "experiment": None}), "experiment: expected an object, got null"),
        (json.dumps({**GOOD, "modes": [None]}), "modes: expected a list of mode objects"),
        ('{"schema": ' + "7" * 5000 + "}", "a number of 5000 digits"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_experiment_show_on_hostile_results(
    body: str | bytes, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 12: RecursionError, AttributeError and an error without the file's name."""
    d = results_dir(tmp_path, body)
    err = one_line_error(*icectl(capsys, "experiment", "show", str(d)), needle)
    assert "results.json" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_experiment_show_on_special_results(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 8: results.json -> /dev/zero read to MemoryError; a FIFO hung."""
    d = tmp_path / "res"
    d.mkdir()
    if kind == "zero":
        (d / "results.json").symlink_to("/dev/zero")
    else:
        os.mkfifo(d / "results.json")
    one_line_error(*icectl(capsys, "experiment", "show", str(d)), "expected a regular file")


# --------------------------------------------------------------------------- outputs


def test_write_output_never_follows_or_clobbers(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted = tmp_path / "out.json"
    planted.symlink_to(victim)
    with pytest.raises(UnsafeOutputError, match="is a symlink"):
        write_output(planted, "{}")
    assert victim.read_text() == "precious" and planted.is_symlink()
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(UnsafeOutputError, match="is a symlink"):
        write_output(dangling, "{}")
    assert not (tmp_path / "would-be-created").exists()
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(UnsafeOutputError, match="FIFO"):
        write_output(tmp_path / "fifo.json", "{}")
    mine = tmp_path / "mine.json"
    write_output(mine, "1")
    write_output(mine, "2")  # the caller's own regular file is replaced
    assert mine.read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a file as another user")
def test_write_output_leaves_another_users_file(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.json"
    theirs.write_text("theirs")
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(UnsafeOutputError, match="belongs to uid 65534"):
        write_output(theirs, "mine")
    assert theirs.read_text() == "theirs"


def test_sim_run_out_does_not_write_through_a_planted_symlink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 2: another user planted DIR/ecmp+dcqcn.json -> a root-owned file; the run wrote it."""
    victim = tmp_path / "shadow"
    victim.write_text("root:x:0:0\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "ecmp+dcqcn.json").symlink_to(victim)
    code, _, err = icectl(
        capsys,
        "sim",
        "run",
        "--topo",
        str(TOPO),
        "--job",
        str(JOB),
        "--no-progress",
        "--max-time-ms",
        "1",
        "--out",
        str(out),
    )
    assert code == 1 and "is a symlink; refusing to write through it" in err, err
    assert victim.read_text() == "root:x:0:0\n"


def test_every_user_named_writer_goes_through_write_output() -> None:
    """No writer of the project opens a user-named path by itself (write_text, open 'w',
    savefig to a path): each goes through icefabric.files.write_output."""
    offenders = []
    for folder in ("control", "sim", "topo", "traffic", "target", "icefabric"):
        for py in (ROOT / folder).rglob("*.py"):
            text = py.read_text(encoding="utf-8")
            for i, line in enumerate(text.splitlines(), 1):
                code = line.split("#", 1)[0]
                if ".write_text(" in code or ".write_bytes(" in code or "savefig(path" in code:
                    offenders.append(f"{py.relative_to(ROOT)}:{i}: {line.strip()}")
    allowed = {  # generated sources and README tables written by developer tools in the tree
        "control/p4rt/names.py",
        "sim/scale.py",
        "target/compiler/__main__.py",
        "experiment/mininet.py",  # files inside the run's own mkdtemp folder
    }
    left = [o for o in offenders if o.split(":", 1)[0] not in allowed]
    assert left == []


def test_every_reader_of_a_user_named_file_goes_through_the_loader() -> None:
    """No module reads a file by itself (read_text, read_bytes, open): each goes through
    icefabric.files (bounded by bytes read and time, devices and FIFOs refused)."""
    allowed = {  # files of the package itself, the runtime dir, /sys, or a run's own mkdtemp
        "icefabric/private.py",  # read_private: the state file, O_NOFOLLOW, owner-checked, bounded
        "control/p4rt/names.py",  # the generated names module of the package
        "topo/switches.py",  # the tail of a switch log in the private runtime dir
        "traffic/hostconfig.py",  # /sys/class/net/IFACE/address
        "sim/scale.py",  # the README table it regenerates
        "target/p4/preprocess.py",  # core.p4/v1model.p4 of the package (includes: bounded)
        "experiment/mininet.py",  # the hosts' logs and stats in the run's own mkdtemp folder
        "target/bmv2.py",  # hashes the package's P4 sources for its build cache
        "p4src/api.py",  # the package's own P4 sources
        "icefabric/files.py",
        "experiment/netns.py",  # /var/run/netns/NAME opened for setns, not read; socket open()
        "experiment/bmv2_wire.py",  # NetnsSockets.open(iface): a socket on a veth end
    }
    offenders = []
    for folder in ("control", "sim", "topo", "traffic", "target", "experiment", "icefabric"):
        for py in (ROOT / folder).rglob("*.py"):
            rel = str(py.relative_to(ROOT))
            if rel in allowed:
                continue
            for i, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if any(t in code for t in (".read_text(", ".read_bytes(", " open(", ".open(")):
                    if "os.open(" in code or ".popen(" in code or "urlopen(" in code:
                        continue
                    offenders.append(f"{rel}:{i}: {line.strip()}")
    assert offenders == []


def test_every_json_decoder_and_http_server_is_the_bounded_one() -> None:
    """JSON is decoded only by icefabric.files.parse_json (nesting and integer length bounded
    before Python's RecursionError / 4300-digit ValueError), and HTTP is served only by
    icefabric.httpserve (a worker pool and timeouts, not a thread per connection)."""
    rules = {
        "json.loads(": "icefabric/files.py",
        "json.load(": "icefabric/files.py",
        "ThreadingWSGIServer": "icefabric/httpserve.py",
        "ThreadingHTTPServer": "icefabric/httpserve.py",
        "ThreadingMixIn": "icefabric/httpserve.py",
        "start_http_server(": "icefabric/httpserve.py",
        "start_wsgi_server(": "icefabric/httpserve.py",
    }
    offenders = []
    for folder in (
        "control",
        "sim",
        "topo",
        "traffic",
        "target",
        "experiment",
        "icefabric",
        "p4src",
    ):
        for py in (ROOT / folder).rglob("*.py"):
            rel = str(py.relative_to(ROOT))
            for i, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                offenders += [
                    f"{rel}:{i}: {needle}"
                    for needle, home in rules.items()
                    if needle in code and rel != home
                ]
    assert offenders == []


@pytest.mark.parametrize(
    "argv",
    [
        ["topo", "show", "/dev/zero"],
        ["plan", "--topo", str(TOPO), "--job", "/dev/urandom"],
        ["sim", "run", "--topo", "/dev/zero", "--job", str(JOB)],
        ["experiment", "run", "/dev/zero"],
    ],
)
def test_icectl_refuses_devices_as_inputs(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code, out, err = icectl(capsys, *argv)
    except SystemExit as exc:
        code, (out, err) = int(exc.code or 0), capsys.readouterr()
    one_line_error(code, out, err, "/dev/")


def test_p4_programs_and_pipelines_are_read_bounded(tmp_path: Path) -> None:
    from icefabric.control.p4rt import PipelineConfig
    from icefabric.control.p4rt.pipeline import PipelineConfigError
    from icefabric.target.compiler import load_program
    from icefabric.target.p4.errors import P4CompileError

    with pytest.raises(P4CompileError, match="character device"):
        load_program("/dev/zero")
    with pytest.raises(PipelineConfigError, match="character device"):
        PipelineConfig.for_bmv2("/dev/zero", tmp_path / "x.txtpb")


# --------------------------------------------------------------------------- whose rights


@pytest.fixture
def root_only_secret(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root to own a private file another user names")
    secret = tmp_path / "shadow"
    secret.write_text("\n".join([SECRET] * 5) + "\n")
    secret.chmod(0o600)
    tmp_path.chmod(0o755)
    return secret


def nobodys_experiment(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "nobody"
    d.mkdir(mode=0o755)
    exp = d / "exp.yaml"
    exp.write_text(body)
    os.chown(exp, NOBODY, NOBODY)
    return exp


@pytest.mark.parametrize("field", ["job", "topology"])
def test_root_never_quotes_a_file_the_experiments_owner_cannot_read(
    field: str, root_only_secret: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 3: workload.job: /etc/shadow printed each line as an unknown key; topology.file
    pointing at a private key printed its first 40 characters."""
    if field == "job":
        body = f"name: e\ntopology: {{file: {TOPO}}}\nworkload: {{job: {root_only_secret}}}\n"
    else:
        body = f"name: e\ntopology: {{file: {root_only_secret}}}\nworkload: {{job: {JOB}}}\n"
    exp = nobodys_experiment(tmp_path, body)
    code, out, err = icectl(capsys, "experiment", "run", str(exp), "--no-plot")
    assert code == 2
    assert "not readable by uid 65534" in err
    assert "TOP-SECRET" not in err + out and "c2VjcmV0" not in err + out


def test_sudo_reads_with_the_invoking_users_rights(
    root_only_secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUDO_UID", str(NOBODY))
    assert caller().uid == NOBODY
    with pytest.raises(DataFileError) as info:
        read_data_file(root_only_secret)
    assert "not readable by uid 65534" in str(info.value) and "TOP-SECRET" not in str(info.value)
    monkeypatch.delenv("SUDO_UID")
    try:  # root itself may read its own file (what it says about it is root's to see)
        read_data_file(root_only_secret)
    except DataFileError as exc:
        assert "not readable" not in str(exc)


# --------------------------------------------------------------------------- simulator bounds


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--iterations", "1000000000000"], "--iterations"),
        (["--dt-us", "1e-9"], "dt_us: expected 0.01..10000 microseconds"),
        (["--max-time-ms", "1e12"], "max_time_us: expected > 0 and at most"),
        (["--dt-us", "0.01", "--max-time-ms", "10000"], "max_time_us / dt_us: 1e+09 steps"),
    ],
)
def test_sim_parameters_are_bounded_before_a_run(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 10: 1e12 iterations grew past 3 GB; dt 1e-9 asked for 666 GiB."""
    try:
        code, out, err = icectl(
            capsys, "sim", "run", "--topo", str(TOPO), "--job", str(JOB), "--no-progress", *argv
        )
    except SystemExit as exc:  # argparse's own range check
        code, (out, err) = int(exc.code or 0), capsys.readouterr()
    one_line_error(code, out, err, needle)


def test_sim_memory_is_checked_before_anything_is_allocated() -> None:
    from icefabric.sim.config import SimConfigError, check_run_size

    with pytest.raises(SimConfigError, match=r"dt_us: .* GiB of state, at most 4 GiB"):
        check_run_size(dt_us=0.01, max_time_us=1e3, delay_steps=10**8, links=100, flows=10, hops=4)
