"""The peers matrix over one parameter: ``icectl experiment matrix --engine sim --sweep
PARAM=V1,V2,...``.

One matrix (``sim/matrix.py`` :func:`run_matrix`) per value of the swept parameter: the message
size (``message-mib``), the rings' channels (``channels``, :class:`scenarios.Layout`) or the ranks'
placement (``placement``: scattered, packed, interleaved), everything else as the command gives
it. Each value has its own folder ``DIR/PARAM-VALUE/`` (``matrix.json``, ``matrix.png`` and
``tasks/``, so ``--resume`` goes on where a stopped sweep stopped), and ``DIR/sweep.json`` holds
per value and scenario the best peer, ICE ÷ best peer and ICE ÷ ECMP + DCQCN (median, p10,
p90 over the seeds), ICE's and the ceiling's median busbw ÷ bound, and the value's ring-step
cap (below 1 the rings are latency-bound at that size: every scheme scores at most it).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from icefabric.files import write_output
from icefabric.sim.matrix import Progress, run_matrix, write_matrix
from icefabric.sim.scenarios import DEFAULT_LAYOUT, PLACEMENTS, Layout

SWEEPABLE = ("message-mib", "channels", "placement")
MAX_VALUES = 12
MAX_MESSAGE_MIB = 4096


def parse_sweep(text: str) -> tuple[str, list[int | str]]:
    """``PARAM=V1,V2,...`` as (param, values); ValueError naming what is wrong."""
    param, sep, rest = text.partition("=")
    param = param.strip()
    if not sep or param not in SWEEPABLE:
        raise ValueError(
            f"--sweep: expected PARAM=V1,V2,... with PARAM one of {', '.join(SWEEPABLE)}, "
            f"got {text!r}"
        )
    raw = [v.strip() for v in rest.split(",") if v.strip()]
    if not 1 <= len(raw) <= MAX_VALUES or len(set(raw)) != len(raw):
        raise ValueError(f"--sweep: expected 1..{MAX_VALUES} distinct values, got {rest!r}")
    if param == "placement":
        bad = [v for v in raw if v not in PLACEMENTS]
        if bad:
            raise ValueError(
                f"--sweep placement: expected values from {', '.join(PLACEMENTS)}, got {bad[0]!r}"
            )
        return param, list(raw)
    hi = MAX_MESSAGE_MIB if param == "message-mib" else 64
    values: list[int | str] = []
    for v in raw:
        if not v.isdigit() or not 1 <= int(v) <= hi:
            raise ValueError(f"--sweep {param}: expected integers 1..{hi}, got {v!r}")
        values.append(int(v))
    return param, values


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sc, cell in doc["scenarios"].items():
        ice = cell["schemes"].get("ice", {}).get("busbw_over_bound")
        out[sc] = {
            "best_peer": cell.get("best_peer"),
            "ice_over_best_peer": cell.get("ice_over_best_peer_dist"),
            "ice_over_ecmp_dcqcn": cell.get("ice_over_ecmp_dcqcn"),
            "ice": ice["median"] if ice else None,
            "ceiling": cell["ceiling"]["median"],
        }
    return out


def run_sweep(
    param: str,
    values: list[int | str],
    *,
    out: Path,
    gpus: int,
    message: int,
    layout: Layout = DEFAULT_LAYOUT,
    progress: Progress | None = None,
    **common: Any,
) -> dict[str, Any]:
    """One matrix per value (``common``: :func:`run_matrix`'s scenarios, schemes, seeds,
    workers, cluster, resume); writes each value's matrix under ``out/PARAM-VALUE/``; the
    sweep.json doc (the caller writes it: :func:`write_sweep`)."""
    cells: dict[str, Any] = {}
    cpu = 0.0
    doc: dict[str, Any] = {}
    for v in values:
        msg, lay = message, layout
        if param == "message-mib":
            msg = int(v) << 20
        elif param == "channels":
            lay = replace(layout, channels=int(v))
        else:
            lay = replace(layout, placement=str(v))
        sub = out / f"{param}-{v}"

        def hook(done: int, total: int, what: str, v: int | str = v) -> None:
            if progress is not None:
                progress(done, total, f"{param} {v}: {what}")

        doc = run_matrix(
            gpus=gpus, message=msg, layout=lay, tasks_dir=sub / "tasks", progress=hook, **common
        )
        write_matrix(doc, sub)
        cpu += doc["cpu_s"]
        cells[str(v)] = {"ring_step_cap": doc["ring_step_cap"], "scenarios": _summary(doc)}
    return {
        "engine": "sim",
        "over": param,
        "values": [str(v) for v in values],
        "gpus": gpus,
        "message_bytes": message,
        "channels": layout.channels,
        "placement": layout.placement,
        "seeds": doc.get("seeds", []),
        "schemes_order": doc.get("schemes_order", []),
        "cpu_s": round(cpu, 1),
        "cells": cells,
    }


def write_sweep(doc: dict[str, Any], out: Path) -> None:
    """``out/sweep.json`` (``write_output``: never through a link)."""
    out.mkdir(parents=True, exist_ok=True)
    write_output(out / "sweep.json", json.dumps(doc, indent=1) + "\n")


def sweep_markdown(doc: dict[str, Any]) -> str:
    """One row per value, one column per scenario: ICE ÷ best peer median [p10, p90] and the
    best peer; then ICE ÷ ECMP + DCQCN's medians; the ring-step cap where it is below 1."""
    values = doc["values"]
    scs = list(doc["cells"][values[0]]["scenarios"]) if values else []
    head = [doc["over"], *scs, "ICE ÷ ECMP+DCQCN (medians)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in values:
        cell = doc["cells"][v]
        row = [
            v
            + (f" (ring-step cap {cell['ring_step_cap']:.2f})" if cell["ring_step_cap"] < 1 else "")
        ]
        for sc in scs:
            c = cell["scenarios"][sc]
            d = c["ice_over_best_peer"]
            row.append(
                f"{d['median']:.2f} [{d['p10']:.2f}, {d['p90']:.2f}] ({c['best_peer']})"
                if d
                else "-"
            )
        row.append(
            " / ".join(
                f"{cell['scenarios'][sc]['ice_over_ecmp_dcqcn']['median']:.2f}"
                if cell["scenarios"][sc]["ice_over_ecmp_dcqcn"]
                else "-"
                for sc in scs
            )
        )
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
