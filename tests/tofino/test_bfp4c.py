"""The Tofino tier: bf-p4c compiles p4src/tna/ice.p4 for Tofino 1 and 2, and what it wrote drives
the controller.

Needs ``bf-p4c`` (p4c's Tofino back end, built by hand outside the project: p4src/README.md,
"Tofino") on PATH; skips with the reason otherwise.  Each chip is compiled once per session into
a temporary folder (a few minutes each).  Checked against the compiler's real output: it fits
(no error, stages within the chip), the P4Info it wrote names the v1model program's tables,
actions and parameters, and ``icectl run --target tofino``'s device config (PipelineConfig.
for_tofino) carries bf-p4c's bfrt.json, context.json and tofino.bin byte for byte.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from icefabric.control.p4rt import PipelineConfig
from icefabric.control.p4rt.tofino import decode_bf_pipeline_config, decode_legacy
from icefabric.p4src import ICE_P4, ICE_TNA_P4
from icefabric.p4src.api import read_api
from icefabric.p4src.tofino_resources import read_resources

pytestmark = pytest.mark.tofino

CHIPS = {"tofino": ("tna", 12, "tofino.bin"), "tofino2": ("t2na", 20, "tofino2.bin")}
# The flags `make p4-tna` passes (Makefile BF_P4C_FLAGS): P4Runtime's standard externs, as
# Stratum wants them; for Tofino 2 also BF_P4C_TOFINO2_FLAGS (a bf-p4c bug, see the Makefile).
BF_P4C_FLAGS = ["--std", "p4-16", "--p4runtime-force-std-externs", "--verbose", "1"]
CHIP_FLAGS = {"tofino": [], "tofino2": ["-Xp4c=--disable-dark-allocation"]}


def _bf_p4c() -> str:
    exe = shutil.which("bf-p4c")
    if exe is None:
        pytest.skip("bf-p4c is not on PATH (p4c's Tofino back end, built by hand: p4src/README.md)")
    return exe


@dataclass(frozen=True)
class Compiled:
    chip: str
    out: Path


@pytest.fixture(
    scope="session",
    params=["tofino", "tofino2"],
)
def compiled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """bf-p4c's output folder for one chip; the test fails with the compiler's output if it
    does not compile."""
    exe = _bf_p4c()
    chip = str(request.param)
    arch = CHIPS[chip][0]
    out = tmp_path_factory.mktemp(f"bfp4c-{chip}")
    cmd = [exe, *BF_P4C_FLAGS, *CHIP_FLAGS[chip], "--target", chip, "--arch", arch, "-o", str(out)]
    cmd += ["--p4runtime-files", str(out / "p4info.txt"), str(ICE_TNA_P4)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    text = (res.stdout + res.stderr).strip()
    assert res.returncode == 0, f"{' '.join(cmd)}\n{text[-6000:]}"
    # bf-p4c ends with "N errors, M warnings generated."; any error line fails.
    assert re.search(r"\berror:", text, re.IGNORECASE) is None, text[-6000:]
    assert "0 errors" in text, text[-6000:]
    return Compiled(chip, out)


def test_it_fits_the_chip(compiled: Compiled) -> None:
    r = read_resources(compiled.out)
    assert r.stages == CHIPS[compiled.chip][1]
    assert 1 <= r.stages_used <= r.stages
    assert 0 < r.phv_containers_used <= r.phv_containers
    assert 0 < r.srams_used <= r.srams and 0 <= r.tcams_used <= r.tcams


def _p4info(out: Path) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txt").read_text(), info)
    return info


def test_the_p4info_names_the_v1model_programs_tables_actions_and_parameters(
    compiled: Compiled,
) -> None:
    # The README's promise (p4src/README.md, Tofino): one controller code path for both programs.
    info = _p4info(compiled.out)
    v1 = read_api(ICE_P4)
    actions = {a.preamble.id: a for a in info.actions}
    tables = {t.preamble.name: t for t in info.tables}
    assert sorted(tables) == sorted(v1.tables)
    for name, want in v1.tables.items():
        t = tables[name]
        keys = tuple(
            (m.name, p4info_pb2.MatchField.MatchType.Name(m.match_type).lower())
            for m in t.match_fields
        )
        assert keys == want.keys, name
        got_actions = {actions[r.id].preamble.name for r in t.action_refs}
        assert got_actions == set(want.actions), name
    for name, params in v1.actions.items():
        a = next(a for a in info.actions if a.preamble.name == name)
        assert tuple((p.name, p.bitwidth) for p in a.params) == params, name


def test_every_register_and_counter_of_the_v1model_program_survives_the_fit(
    compiled: Compiled,
) -> None:
    # p4src/README.md's promise: fitting the chip cut no feature silently.  bf-p4c drops what
    # nothing uses; what it kept is in its P4Info.  The v1model program's own P4Info (the
    # embedded target's compiler) names the registers and counters the controller reads.
    compiler = pytest.importorskip("icefabric.target.compiler")
    v1 = compiler.load_program(ICE_P4).p4info
    info = _p4info(compiled.out)
    for kind in ("registers", "counters", "direct_counters"):
        want = {e.preamble.name for e in getattr(v1, kind)}
        got = {e.preamble.name for e in getattr(info, kind)}
        assert want, kind
        assert want <= got, f"{compiled.chip}: {kind} missing: {sorted(want - got)}"


def test_icectl_runs_tofino_with_bf_p4cs_own_files(compiled: Compiled) -> None:
    # What `icectl run --target tofino --tofino-out DIR` pushes (control/daemon/service.py calls
    # PipelineConfig.for_tofino): bf-p4c's files, named and sized as it wrote them.
    out = compiled.out
    binary = out / "pipe" / CHIPS[compiled.chip][2]
    context = out / "pipe" / "context.json"
    bfrt = out / "bfrt.json"
    for f in (binary, context, bfrt):
        assert f.is_file() and f.stat().st_size > 0, f
    cfg = PipelineConfig.from_target("tofino", tofino_out=out)
    assert cfg.kind == "tofino"
    assert {t.preamble.name for t in cfg.p4info.tables} == {
        t.preamble.name for t in _p4info(out).tables
    }
    prog = decode_bf_pipeline_config(cfg.device_config)
    assert prog.name == "ice"
    assert prog.bfrt == bfrt.read_bytes()
    assert [p.name for p in prog.profiles] == ["pipe"]
    assert len(prog.profiles[0].binary) == binary.stat().st_size
    assert prog.profiles[0].binary == binary.read_bytes()
    assert prog.profiles[0].context == context.read_bytes()
    legacy = PipelineConfig.from_target("tofino", tofino_out=out, tofino_format="legacy")
    assert decode_legacy(legacy.device_config) == ("ice", binary.read_bytes(), context.read_bytes())
