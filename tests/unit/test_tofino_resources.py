"""icefabric.p4src.tofino_resources: bf-p4c's resources.json / metrics.json summed into stages,
PHV, SRAM and TCAM, on a small folder laid out as bf-p4c's schemas describe it (the real
compiler's output is checked in tests/tofino when bf-p4c is installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icefabric.p4src.tofino_resources import TofinoResourcesError, main, read_resources


def _stage(n: int, *, tables: int, srams: int, tcams: int) -> dict[str, object]:
    return {
        "stage_number": n,
        "logical_tables": {"size": 16, "ids": [{"id": i} for i in range(tables)]},
        "rams": {
            "nRows": 8,
            "nColumns": 10,
            "srams": [{"row": 0, "column": c} for c in range(srams)],
        },
        "tcams": {
            "nRows": 12,
            "nColumns": 2,
            "tcams": [{"row": r, "column": 0} for r in range(tcams)],
        },
    }


def _out(tmp: Path) -> Path:
    logs = tmp / "out" / "pipe" / "logs"
    logs.mkdir(parents=True)
    resources = {
        "resources": {
            "mau": {
                "nStages": 12,
                "mau_stages": [
                    _stage(0, tables=3, srams=5, tcams=2),
                    _stage(1, tables=1, srams=1, tcams=0),
                ]
                + [_stage(n, tables=0, srams=0, tcams=0) for n in range(2, 12)],
            },
            "phv_containers": {
                "normal": [
                    {"width": 8, "units": 64, "addresses": []},
                    {"width": 16, "units": 96, "addresses": []},
                    {"width": 32, "units": 64, "addresses": []},
                ],
                "tagalong": [{"width": 32, "units": 32, "addresses": []}],
            },
        }
    }
    metrics = {
        "phv": {
            "normal": [
                {"bit_width": 8, "containers_occupied": 10, "bits_occupied": 70},
                {"bit_width": 32, "containers_occupied": 4, "bits_occupied": 100},
            ],
            "tagalong": [{"bit_width": 32, "containers_occupied": 1, "bits_occupied": 32}],
        }
    }
    (logs / "resources.json").write_text(json.dumps(resources))
    (logs / "metrics.json").write_text(json.dumps(metrics))
    return tmp / "out"


def test_stages_memories_and_phv_are_summed_over_the_chip(tmp_path: Path) -> None:
    r = read_resources(_out(tmp_path))
    assert (r.stages, r.stages_used) == (12, 2)
    assert (r.srams_used, r.srams) == (6, 12 * 80)
    assert (r.tcams_used, r.tcams) == (2, 12 * 24)
    assert (r.phv_containers_used, r.phv_containers) == (15, 64 + 96 + 64 + 32)
    assert (r.phv_bits_used, r.phv_bits) == (202, 8 * 64 + 16 * 96 + 32 * 64 + 32 * 32)
    assert "stages 2/12" in r.line() and "SRAM 6/960 (0.6 %)" in r.line()


def test_the_cli_prints_a_line_or_json_and_names_a_missing_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _out(tmp_path)
    assert main([str(out)]) == 0
    assert "stages 2/12" in capsys.readouterr().out
    assert main([str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tcams_used"] == 2
    (out / "pipe" / "logs" / "metrics.json").unlink()
    assert main([str(out)]) == 1
    assert "metrics.json" in capsys.readouterr().err
    with pytest.raises(TofinoResourcesError, match="not a folder"):
        read_resources(tmp_path / "none")


def test_stages_bf_p4c_did_not_list_count_with_the_same_memories(tmp_path: Path) -> None:
    # bf-p4c lists only the stages a program reaches (19 of Tofino 2's 20 for ice.p4).
    out = _out(tmp_path)
    path = out / "pipe" / "logs" / "resources.json"
    doc = json.loads(path.read_text())
    del doc["resources"]["mau"]["mau_stages"][4:]
    path.write_text(json.dumps(doc))
    r = read_resources(out)
    assert (r.stages, r.stages_used) == (12, 2)
    assert (r.srams_used, r.srams) == (6, 12 * 80)
    assert (r.tcams_used, r.tcams) == (2, 12 * 24)


def test_a_log_without_the_expected_fields_is_a_one_line_error(tmp_path: Path) -> None:
    out = _out(tmp_path)
    (out / "pipe" / "logs" / "resources.json").write_text('{"resources": {"phv_containers": {}}}')
    with pytest.raises(TofinoResourcesError, match=r"resources.json: no mau "):
        read_resources(out)
