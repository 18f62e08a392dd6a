"""BMv2, the one place that builds for it and finds its tools: ``p4src/ice.p4`` (or any v1model
program) compiled by p4c-bm2-ss on demand into a build cache, the tools' check, and the real-time
priority the switches start under. ``make p4``, the Mininet engine (``--target bmv2``), Mininet
bring-up and the BMv2 test tiers all use it (``python -m icefabric.target.bmv2 build``).

The cache is ``$ICE_BUILD_DIR`` when set, else ``build/bmv2/`` of the source checkout the
program comes from (ignored by git), else ``$XDG_CACHE_HOME/icefabric/bmv2`` (``~/.cache``).
Each build lives in ``ice-<key>/`` (``ice.json`` + ``ice.p4info.txtpb``), where the key hashes
every ``.p4`` file under ``p4src/`` and ``p4c-bm2-ss --version``: an edited program or another
compiler makes a new build, and older ones are removed once it succeeded.

Scheduling: BMv2 hands every packet through several threads (receive, ingress, an egress
worker, transmit), each a wake-up that waits its turn for a CPU.  On a host whose cores are
busy (other work, the Python hosts), a switch then forwards nothing for tens of milliseconds
while packets keep arriving: latency INT does not show, and a backlog that enters the egress
queue at once (a queue peak, ECN marks).  ``$ICE_BMV2_RT_PRIORITY=N`` (1..99) starts every
``simple_switch_grpc`` under ``chrt -f N`` (SCHED_FIFO, threads inherit it), so switches
forward as soon as a packet is there, like hardware (experiment/README.md, "The real-time engine": measured).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

P4C = "p4c-bm2-ss"
SWITCH = "simple_switch_grpc"
CLI = "simple_switch_CLI"
BUILD_DIR_ENV = "ICE_BUILD_DIR"
RT_PRIORITY_ENV = "ICE_BMV2_RT_PRIORITY"
RT_PRIORITY_MAX = 99  # SCHED_FIFO priorities are 1..99


class Bmv2Unavailable(RuntimeError):
    """The BMv2 target cannot run here (a tool missing, the program does not compile)."""


def missing_tools(extra: tuple[str, ...] = ()) -> list[str]:
    """The BMv2 tools (p4c-bm2-ss, simple_switch_grpc, simple_switch_CLI, then ``extra``) that
    are not on PATH."""
    return [t for t in (P4C, SWITCH, CLI, *extra) if shutil.which(t) is None]


def check_tools(purpose: str = "--target bmv2") -> None:
    """Bmv2Unavailable naming every BMv2 tool missing from PATH (or a bad
    ``$ICE_BMV2_RT_PRIORITY``); ``purpose`` starts the message."""
    missing = missing_tools()
    if missing:
        raise Bmv2Unavailable(
            f"{purpose} needs {', '.join(missing)} on PATH (install BMv2 and p4c)"
        )
    realtime_prefix()


def realtime_prefix(environ: Mapping[str, str] | None = None) -> list[str]:
    """``[chrt, -f, N]`` to put before ``simple_switch_grpc`` when ``$ICE_BMV2_RT_PRIORITY`` is
    N (1..99); ``[]`` when it is unset or empty (see the module docstring).

    Bmv2Unavailable naming the variable for any other value, or when ``chrt`` is missing.
    """
    env = os.environ if environ is None else environ
    raw = env.get(RT_PRIORITY_ENV, "").strip()
    if not raw:
        return []
    try:
        prio = int(raw)
    except ValueError:
        prio = 0
    if not 1 <= prio <= RT_PRIORITY_MAX:
        raise Bmv2Unavailable(
            f"{RT_PRIORITY_ENV}={raw!r}: expected a SCHED_FIFO priority 1..{RT_PRIORITY_MAX} "
            "(or unset)"
        )
    chrt = shutil.which("chrt")
    if chrt is None:
        raise Bmv2Unavailable(f"{RT_PRIORITY_ENV} is set but chrt is not on PATH (util-linux)")
    return [chrt, "-f", str(prio)]


def default_build_dir(program: Path) -> Path:
    """Where builds of ``program`` are cached (see the module docstring)."""
    env = os.environ.get(BUILD_DIR_ENV)
    if env:
        return Path(env)
    checkout = program.resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / "build" / "bmv2"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "icefabric" / "bmv2"


def _p4c_version(p4c: str) -> str:
    proc = subprocess.run([p4c, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or proc.stderr.strip()


def build_key(program: Path, p4c: str) -> str:
    """Hash of every .p4 file beside ``program`` (recursively) and the compiler's version."""
    h = hashlib.sha256()
    h.update(_p4c_version(p4c).encode())
    root = program.resolve().parent
    for f in sorted(root.rglob("*.p4")):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    h.update(str(program.resolve().relative_to(root)).encode())
    return h.hexdigest()[:16]


def build_pipeline(
    program: Path, build_dir: Path | None = None, *, purpose: str = "--target bmv2"
) -> tuple[Path, Path]:
    """``(ice.json, ice.p4info.txtpb)`` of ``program`` for BMv2: the cached build when it is
    current, else compiled now with p4c-bm2-ss (Bmv2Unavailable: no compiler, or it failed)."""
    p4c = shutil.which(P4C)
    if p4c is None:
        raise Bmv2Unavailable(f"{purpose} needs {P4C} on PATH to compile {program.name}")
    cache = build_dir if build_dir is not None else default_build_dir(program)
    key = build_key(program, p4c)
    stem = program.stem
    final = cache / f"{stem}-{key}"
    json_path, p4info = final / f"{stem}.json", final / f"{stem}.p4info.txtpb"
    if json_path.is_file() and p4info.is_file():
        return json_path, p4info
    try:
        cache.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{stem}-", dir=cache))
    except OSError as e:
        raise Bmv2Unavailable(f"{cache}: cannot create the BMv2 build cache: {e.strerror}") from e
    try:
        log.info("compiling %s with %s into %s", program, P4C, final)
        cmd = [p4c, "--arch", "v1model", "--std", "p4-16", "-o", str(work / json_path.name)]
        cmd += ["--p4runtime-files", str(work / p4info.name), str(program)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
            raise Bmv2Unavailable(f"{P4C} failed on {program} ({proc.returncode}): {first}")
        try:
            work.rename(final)
        except OSError:  # another run built the same key meanwhile: keep theirs
            if not json_path.is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in cache.glob(f"{stem}-*"):  # builds of older sources or compilers
        if old != final and old.is_dir():
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
    return json_path, p4info


def main(argv: list[str] | None = None) -> int:
    """``python -m icefabric.target.bmv2 build PROGRAM [--out DIR] [--if-available]``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(
        prog="python -m icefabric.target.bmv2",
        description="Compile a v1model program for BMv2 with p4c-bm2-ss into the build cache.",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile (or take the current cached build) and print it")
    b.add_argument("program", type=Path, help="the v1model program, e.g. p4src/ice.p4")
    b.add_argument(
        "--out", type=Path, default=None, help="also copy NAME.json and NAME.p4info.txtpb here"
    )
    b.add_argument(
        "--if-available",
        action="store_true",
        help=f"exit 0 with a note when {P4C} is not on PATH (make p4)",
    )
    args = ap.parse_args(argv)
    if not args.program.is_file():
        print(f"{args.program}: no such P4 program", file=sys.stderr)
        return 2
    if args.if_available and shutil.which(P4C) is None:
        print(f"p4: {P4C} not on PATH; skipping (the embedded target runs p4src/ from source)")
        return 0
    try:
        json_path, p4info = build_pipeline(args.program, purpose="building for BMv2")
    except Bmv2Unavailable as exc:
        print(f"{args.program}: {exc}", file=sys.stderr)
        return 1
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            for f in (json_path, p4info):
                shutil.copyfile(f, args.out / f.name)
        except OSError as e:
            print(f"{args.out}: cannot write the build: {e.strerror}", file=sys.stderr)
            return 1
        json_path, p4info = args.out / json_path.name, args.out / p4info.name
    print(f"{json_path}\n{p4info}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
