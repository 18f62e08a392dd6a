"""target/bmv2.py: the one BMv2 build/tool module (compile into the cache, tool checks, the
real-time prefix, ``python -m icefabric.target.bmv2 build`` for ``make p4``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from icefabric.target import bmv2


def _fake_p4c(tmp_path: Path) -> Path:
    """A p4c-bm2-ss stand-in that writes its two outputs and logs every call."""
    fake = tmp_path / "bin" / bmv2.P4C
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo fake 1.0; exit 0; fi\n'
        'echo "$@" >> "${0%/*}/calls"\n'
        'while [ $# -gt 1 ]; do case "$1" in -o) echo {} > "$2";; '
        '--p4runtime-files) echo pkg_info {} > "$2";; esac; shift; done\n'
    )
    fake.chmod(0o755)
    return fake


def test_bmv2_realtime_prefix_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$ICE_BMV2_RT_PRIORITY=N puts ``chrt -f N`` before simple_switch_grpc; unset: nothing;
    a value outside 1..99 or a missing chrt is a usage error naming the variable."""
    from icefabric.target.bmv2 import RT_PRIORITY_ENV, Bmv2Unavailable, realtime_prefix

    chrt = tmp_path / "chrt"
    chrt.write_text("#!/bin/sh\n")
    chrt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert realtime_prefix({}) == []
    assert realtime_prefix({RT_PRIORITY_ENV: " "}) == []
    assert realtime_prefix({RT_PRIORITY_ENV: "10"}) == [str(chrt), "-f", "10"]
    assert realtime_prefix({RT_PRIORITY_ENV: "99"})[-1] == "99"
    for bad in ("0", "100", "-3", "high", "1.5"):
        with pytest.raises(Bmv2Unavailable, match=rf"^{RT_PRIORITY_ENV}='{re.escape(bad)}': "):
            realtime_prefix({RT_PRIORITY_ENV: bad})
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(Bmv2Unavailable, match="chrt is not on PATH"):
        realtime_prefix({RT_PRIORITY_ENV: "10"})


def test_bmv2_build_is_cached_and_rebuilt_when_the_program_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_pipeline compiles into the cache once, reuses it, and compiles again (removing the
    old build) when a source file changes; no p4c-bm2-ss: Bmv2Unavailable naming it."""
    prog = tmp_path / "src" / "t.p4"
    prog.parent.mkdir()
    prog.write_text("// v1\n")
    fake = _fake_p4c(tmp_path)
    monkeypatch.setenv("PATH", str(fake.parent))
    cache = tmp_path / "cache"
    j1, p1 = bmv2.build_pipeline(prog, cache)
    assert j1.read_text().strip() == "{}" and p1.parent == j1.parent
    j2, _ = bmv2.build_pipeline(prog, cache)
    calls = (fake.parent / "calls").read_text().splitlines()
    assert j2 == j1 and len(calls) == 1  # reused
    (prog.parent / "inc.p4").write_text("// new include\n")
    j3, _ = bmv2.build_pipeline(prog, cache)
    assert j3 != j1 and not j1.exists() and j3.is_file()
    assert len((fake.parent / "calls").read_text().splitlines()) == 2
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert shutil.which(bmv2.P4C) is None
    with pytest.raises(bmv2.Bmv2Unavailable, match="needs p4c-bm2-ss on PATH"):
        bmv2.build_pipeline(prog, cache)


def test_build_command_copies_the_cached_build_and_skips_without_p4c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """make p4's command: the build copied to --out; without p4c and --if-available a note and
    exit 0, without --if-available exit 1 naming the compiler; a missing program exit 2."""
    prog = tmp_path / "src" / "t.p4"
    prog.parent.mkdir()
    prog.write_text("// v1\n")
    fake = _fake_p4c(tmp_path)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setenv(bmv2.BUILD_DIR_ENV, str(tmp_path / "cache"))
    out = tmp_path / "build"
    assert bmv2.main(["build", str(prog), "--out", str(out)]) == 0
    assert (out / "t.json").read_text().strip() == "{}"
    assert (out / "t.p4info.txtpb").is_file()
    assert capsys.readouterr().out.split() == [str(out / "t.json"), str(out / "t.p4info.txtpb")]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert bmv2.main(["build", str(prog), "--if-available"]) == 0
    assert "not on PATH; skipping" in capsys.readouterr().out
    assert bmv2.main(["build", str(prog)]) == 1
    assert "needs p4c-bm2-ss on PATH" in capsys.readouterr().err
    assert bmv2.main(["build", str(tmp_path / "nope.p4")]) == 2
    assert "no such P4 program" in capsys.readouterr().err


def test_missing_tools_lists_what_is_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert bmv2.missing_tools(("ip",)) == [bmv2.P4C, bmv2.SWITCH, bmv2.CLI, "ip"]
    with pytest.raises(bmv2.Bmv2Unavailable, match=r"^ICE_TARGET=bmv2 needs p4c-bm2-ss, "):
        bmv2.check_tools("ICE_TARGET=bmv2")
