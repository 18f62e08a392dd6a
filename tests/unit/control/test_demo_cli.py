"""`make demo`'s command line: bad input is a one-line error with exit 2, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.experiment.demo import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--packets", "0"], "--packets: expected >= 1 and <= 10,000, got '0'"),
        (["--channels", "65"], "--channels: expected >= 1 and <= 64, got '65'"),
        (["--link-pps", "-1"], "--link-pps: expected >= 0, got '-1'"),
        (["--probe-interval", "0"], "--probe-interval: expected > 0 and <= 60000 ms, got '0'"),
        (["--probe-misses", "0"], "--probe-misses: expected >= 1, got '0'"),
    ],
)
def test_out_of_range_options_exit_two(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--no-timed"])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_topology_and_preset_are_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yaml"
    assert main(["--topo", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing}: cannot read" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x00\xff\xfe")
    assert main(["--topo", str(binary)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err
    assert main(["--preset", "no-such-preset"]) == 2
    err = capsys.readouterr().err
    assert "no preset 'no-such-preset'" in err and len(err.strip().splitlines()) == 1
