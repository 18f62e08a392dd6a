"""What bf-p4c fitted a program into: MAU stages, PHV, SRAM and TCAM, read from its output.

bf-p4c writes, per pipeline, ``<out>/<pipe>/logs/resources.json`` (what every MAU stage uses and
has: RAMs, TCAMs, logical tables; the PHV containers the chip has) and ``metrics.json`` (the PHV
containers the allocation occupied); bf-p4c writes both only when asked for logs (``--verbose 1``
or more, as ``make p4-tna`` does).  ``make p4-tna`` prints one line per compiled chip::

    python -m icefabric.p4src.tofino_resources build/tna/tofino build/tna/tofino2 [--json]

A stage counts as used when it holds at least one logical table (ingress or egress).  SRAM and
TCAM shares are units used over units present in all stages; PHV over the containers of every
kind the chip has (normal, and on Tofino 2 mocha and dark).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from icefabric.files import DataFileError, JsonError, parse_json, read_input

# bf-p4c's logs for a program of this size are a few MB; refuse anything absurd.
MAX_LOG_BYTES = 256 * 1024 * 1024
PHV_KINDS = ("normal", "mocha", "dark", "tagalong")


class TofinoResourcesError(ValueError):
    """A bf-p4c output folder without readable resource logs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TofinoResources:
    """One compiled pipeline's resource use (counts, not percentages)."""

    source: str
    stages: int
    stages_used: int
    srams: int
    srams_used: int
    tcams: int
    tcams_used: int
    phv_containers: int
    phv_containers_used: int
    phv_bits: int
    phv_bits_used: int

    def line(self) -> str:
        """One readable line: used / available and the share."""

        def share(used: int, total: int) -> str:
            return f"{used}/{total} ({100.0 * used / total:.1f} %)" if total else f"{used}/0"

        return (
            f"{self.source}: stages {self.stages_used}/{self.stages}, "
            f"PHV containers {share(self.phv_containers_used, self.phv_containers)}, "
            f"PHV bits {share(self.phv_bits_used, self.phv_bits)}, "
            f"SRAM {share(self.srams_used, self.srams)}, "
            f"TCAM {share(self.tcams_used, self.tcams)}"
        )


def _load(path: Path) -> Any:
    try:
        return parse_json(read_input(path, limit=MAX_LOG_BYTES, what="a bf-p4c log"))
    except (DataFileError, JsonError) as exc:
        raise TofinoResourcesError(f"{path}: {str(exc).splitlines()[0]}") from None


def _find(out_dir: Path, name: str) -> Path:
    found = sorted(out_dir.glob(f"*/logs/{name}")) or sorted(out_dir.glob(f"logs/{name}"))
    if not found:
        raise TofinoResourcesError(
            f"{out_dir}: no <pipe>/logs/{name} (is this a bf-p4c output folder of a compile "
            "that succeeded?)"
        )
    return found[0]


def _get(doc: Any, *keys: str, where: Path) -> Any:
    for key in keys:
        if not isinstance(doc, dict) or key not in doc:
            raise TofinoResourcesError(f"{where}: no {'.'.join(keys)} (a bf-p4c schema change?)")
        doc = doc[key]
    return doc


def read_resources(out_dir: str | Path) -> TofinoResources:
    """The resource use bf-p4c logged for the (first) pipeline in ``out_dir``."""
    root = Path(out_dir)
    if not root.is_dir():
        raise TofinoResourcesError(f"{root}: not a folder (expected bf-p4c's output folder)")
    res_path = _find(root, "resources.json")
    met_path = _find(root, "metrics.json")
    res = _get(_load(res_path), "resources", where=res_path)
    metrics = _load(met_path)

    mau = _get(res, "mau", where=res_path)
    stages = int(_get(mau, "nStages", where=res_path))
    stages_used = srams = srams_used = tcams = tcams_used = 0
    listed = _get(mau, "mau_stages", where=res_path)
    for stage in listed:
        if _get(stage, "logical_tables", "ids", where=res_path):
            stages_used += 1
        rams = _get(stage, "rams", where=res_path)
        srams += int(rams["nRows"]) * int(rams["nColumns"])
        srams_used += len(rams["srams"])
        tc = _get(stage, "tcams", where=res_path)
        tcams += int(tc["nRows"]) * int(tc["nColumns"])
        tcams_used += len(tc["tcams"])
    # bf-p4c lists only the stages the program reaches; the others have the same memories.
    if listed and len(listed) < stages:
        srams += (stages - len(listed)) * (srams // len(listed))
        tcams += (stages - len(listed)) * (tcams // len(listed))

    phv_have = _get(res, "phv_containers", where=res_path)
    containers = bits = 0
    for kind in PHV_KINDS:
        for group in phv_have.get(kind, ()):
            containers += int(group["units"])
            bits += int(group["units"]) * int(group["width"])
    phv_used = _get(metrics, "phv", where=met_path)
    containers_used = bits_used = 0
    for kind in PHV_KINDS:
        for group in phv_used.get(kind, ()):
            containers_used += int(group["containers_occupied"])
            bits_used += int(group["bits_occupied"])
    return TofinoResources(
        source=str(root),
        stages=stages,
        stages_used=stages_used,
        srams=srams,
        srams_used=srams_used,
        tcams=tcams,
        tcams_used=tcams_used,
        phv_containers=containers,
        phv_containers_used=containers_used,
        phv_bits=bits,
        phv_bits_used=bits_used,
    )


def main(argv: list[str] | None = None) -> int:
    """Print the resource summary of each bf-p4c output folder given."""
    p = argparse.ArgumentParser(
        prog="python -m icefabric.p4src.tofino_resources",
        description="MAU stages, PHV, SRAM and TCAM that bf-p4c used, from its output folders.",
    )
    p.add_argument("out", nargs="+", help="bf-p4c output folder (-o), e.g. build/tna/tofino")
    p.add_argument("--json", action="store_true", help="one JSON object per folder")
    args = p.parse_args(argv)
    code = 0
    for out in args.out:
        try:
            r = read_resources(out)
        except TofinoResourcesError as exc:
            print(f"tofino_resources: {exc}", file=sys.stderr)
            code = 1
            continue
        print(json.dumps(asdict(r), sort_keys=True) if args.json else r.line())
    return code


if __name__ == "__main__":
    raise SystemExit(main())
