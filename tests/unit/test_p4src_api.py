"""The v1model and TNA programs expose one control-plane API, as p4src/README.md says they do.

Tool-free: both programs are read from source by ``icefabric.p4src.api`` (no p4c, no Tofino
headers); that reader is itself checked against the P4Info the embedded target's compiler builds
for the v1model program, so a table or parameter it missed would fail here too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from icefabric.p4src import ICE_P4, ICE_TNA_P4
from icefabric.p4src.api import Api, Table, read_api

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def v1model() -> Api:
    return read_api(ICE_P4)


def _compiled_api() -> Api:
    compiler = pytest.importorskip("icefabric.target.compiler")
    p4info = compiler.load_program(ICE_P4).p4info
    names = {a.preamble.id: a.preamble.name for a in p4info.actions}
    api = Api()
    for t in p4info.tables:
        keys = tuple((m.name, type(m).MatchType.Name(m.match_type).lower()) for m in t.match_fields)
        api.tables[t.preamble.name] = Table(keys, frozenset(names[r.id] for r in t.action_refs))
    for a in p4info.actions:
        if any(a.preamble.name in t.actions for t in api.tables.values()):
            api.actions[a.preamble.name] = tuple((p.name, p.bitwidth) for p in a.params)
    return api


def test_the_source_reader_agrees_with_the_compiled_p4info(v1model: Api) -> None:
    compiled = _compiled_api()
    assert v1model.tables == compiled.tables
    assert v1model.actions == compiled.actions
    assert len(compiled.tables) >= 16


@pytest.mark.parametrize("chip", ["1", "2"], ids=["tofino", "tofino2"])
def test_tna_program_has_the_v1model_tables_actions_and_parameters(v1model: Api, chip: str) -> None:
    tna = read_api(ICE_TNA_P4, {"__TARGET_TOFINO__": chip})
    assert sorted(tna.tables) == sorted(v1model.tables)
    for name, table in v1model.tables.items():
        assert tna.tables[name] == table, name
    assert tna.actions == v1model.actions


def test_a_renamed_parameter_is_caught(tmp_path: Path, v1model: Api) -> None:
    # The comparison above must fail when one tree drifts: copy the TNA tree with one parameter
    # of a shared-by-name TNA-only control renamed, and read it again.
    src = ROOT / "p4src"
    for f in src.rglob("*.p4"):
        dest = tmp_path / f.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f.read_text())
    ecn = tmp_path / "tna" / "control" / "ecn.p4"
    text = ecn.read_text()
    assert "bit<32> kmin" in text
    ecn.write_text(text.replace("bit<32> kmin", "bit<32> k_min"))
    drifted = read_api(tmp_path / "tna" / "ice.p4", {"__TARGET_TOFINO__": "1"})
    assert drifted.actions != v1model.actions


# A counter's declaration in either tree: v1model `counter<...>(...) name;`, TNA
# `Counter<...>(...) name;` (possibly on two lines), inside `control Name(`.
_CONTROL = re.compile(r"^control\s+(\w+)\s*\(", re.MULTILINE)
_COUNTER = re.compile(r"\b[cC]ounter\s*<[^;]*?>\s*\([^;]*?\)\s*(\w+)\s*;", re.DOTALL)


def _indexed_counters(tree: Path) -> set[tuple[str, str]]:
    """(control, counter) for every indexed counter declared under ``tree``."""
    found: set[tuple[str, str]] = set()
    for f in sorted(tree.rglob("*.p4")):
        text = f.read_text()
        starts = [(m.start(), m.group(1)) for m in _CONTROL.finditer(text)]
        for m in _COUNTER.finditer(text):
            owners = [name for pos, name in starts if pos < m.start()]
            if owners:
                found.add((owners[-1], m.group(1)))
    return found


def test_tna_program_has_the_v1model_counters() -> None:
    # The operator's counters (port rx/tx, drops, CNPs received, ECN marks) are read by the one
    # counters reader (control/telemetry/counters.py) by name: a counter the TNA port lacks
    # reads as 0 on Tofino.
    v1 = _indexed_counters(ROOT / "p4src" / "v1model")
    tna = _indexed_counters(ROOT / "p4src" / "tna")
    assert ("IceIngress", "cnp_rx_counter") in v1
    assert ("EcnMarker", "ecn_marked_counter") in v1
    assert v1 == tna


def test_the_counter_scan_sees_a_missing_counter(tmp_path: Path) -> None:
    src = ROOT / "p4src" / "tna"
    for f in src.rglob("*.p4"):
        dest = tmp_path / f.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f.read_text().replace("ecn_marked_counter", "marked"))
    assert ("EcnMarker", "ecn_marked_counter") not in _indexed_counters(tmp_path)
    assert ("EcnMarker", "marked") in _indexed_counters(tmp_path)
