"""results.json: one object per mode plus the config that produced them.

Schema ``icefabric.experiment/1`` (traffic/README.md, "results.json", documents every field)::

    {"schema": "icefabric.experiment/1",
     "experiment": {...the normalised experiment: topology, job, modes, seed, rates ...},
     "modes": [{"mode": "ecmp+dcqcn", "ok": true, "busbw_gbps": ..., ...}, ...],
     "comparison": {"baseline": "ecmp+dcqcn", "speedup": {"ice": 1.8}, "of_bound": {...}},
     "run": {"started": ISO time, "wall_s": {mode: seconds}, "engine": "virtual"}}

Everything outside ``run`` is a function of the experiment alone in virtual time: two runs of
the same experiment give byte-identical files once ``run`` is removed (:func:`comparable`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from icefabric.files import (
    DataFileError,
    JsonError,
    parse_json,
    printable,
    read_input,
    write_output,
)

SCHEMA = "icefabric.experiment/1"
BASELINE = "ecmp+dcqcn"


def comparison(modes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every mode's busbw over the baseline's (or the first mode's) and over its bound."""
    by = {m["mode"]: m for m in modes}
    base = BASELINE if BASELINE in by else (modes[0]["mode"] if modes else None)
    b = by[base]["busbw_gbps"] if base is not None else None
    speed = {
        m["mode"]: (round(m["busbw_gbps"] / b, 6) if m["busbw_gbps"] and b else None) for m in modes
    }
    return {
        "baseline": base,
        "speedup": speed,
        "of_bound": {m["mode"]: m["busbw_over_bound"] for m in modes},
        "all_ok": all(m["ok"] for m in modes),
    }


def mode_paths(mode: Mapping[str, Any]) -> tuple[dict[str, list[str]], str]:
    """The switches each flow of a mode crossed, and where that came from.

    INT names them when the mode carries INT; a DCQCN mode carries none, and then the ECMP
    model's prediction for the agents' keys stands in: the run checked it against every fabric
    link's bytes (``engine.ecmp_model``: ``links_checked``, ``links_off``).
    """
    paths = mode.get("paths") or {}
    if paths:
        return dict(paths), "INT reports"
    model = mode.get("engine", {}).get("ecmp_model", {})
    predicted = model.get("predicted_paths") or {}
    if predicted:
        off = len(model.get("links_off") or [])
        checked = model.get("links_checked", 0)
        return dict(predicted), f"ECMP model, {checked - off}/{checked} fabric links as predicted"
    return {}, "none recorded"


def build(
    experiment: Mapping[str, Any],
    modes: Sequence[Mapping[str, Any]],
    *,
    wall_s: Mapping[str, float],
    started: float,
) -> dict[str, Any]:
    """The whole results.json document."""
    return {
        "schema": SCHEMA,
        "experiment": dict(experiment),
        "modes": list(modes),
        "comparison": comparison(modes),
        "run": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_s": {k: round(v, 3) for k, v in wall_s.items()},
            "engine": experiment.get("engine", "virtual"),
        },
    }


def comparable(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document without what legitimately differs between runs (``run``: timestamps)."""
    return {k: v for k, v in doc.items() if k != "run"}


def results_dir(base: Path, name: str, started: float) -> Path:
    """A fresh ``base/<name>-<UTC timestamp>`` directory (suffixed -2, -3 ... when taken)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    base.mkdir(parents=True, exist_ok=True)
    for i in range(1, 1000):
        p = base / (f"{name}-{stamp}" + (f"-{i}" if i > 1 else ""))
        try:
            p.mkdir(mode=0o755)
            return p
        except FileExistsError:
            continue
    raise OSError(f"{base}: no free results directory for {name}-{stamp}")


def write(doc: Mapping[str, Any], directory: Path) -> Path:
    """Write results.json into ``directory`` (atomically, never through a link:
    :func:`icefabric.files.write_output`)."""
    path = directory / "results.json"
    write_output(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return path


MAX_RESULTS_BYTES = 64 * 1024 * 1024


def load(directory_or_file: str | Path) -> dict[str, Any]:
    """Read a results directory's results.json (ValueError naming the file if it is not one).

    Read through :func:`icefabric.files.read_input`: at most ``MAX_RESULTS_BYTES`` bytes
    actually read, a regular file only (a device or a FIFO planted as results.json is refused
    before a byte is read), JSON of bounded nesting and integer length."""
    p = Path(directory_or_file)
    if p.is_dir():
        p = p / "results.json"
    try:
        raw = read_input(p, limit=MAX_RESULTS_BYTES, what="a results.json")
        doc = parse_json(raw)
    except DataFileError as e:
        raise ValueError(str(e).splitlines()[0]) from None
    except JsonError as e:
        raise ValueError(printable(f"{p}: not valid JSON: {e}")) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(printable(f"{p}: schema: expected {SCHEMA!r}, got {got!r}"))
    modes = doc.get("modes")
    if not isinstance(modes, list) or not all(
        isinstance(m, dict) and isinstance(m.get("mode"), str) for m in modes
    ):
        raise ValueError(f"{p}: modes: expected a list of mode objects, each with a 'mode' name")
    for key, required in (("experiment", True), ("comparison", False), ("run", False)):
        if (required or key in doc) and not isinstance(doc.get(key), dict):
            got = type(doc.get(key)).__name__ if doc.get(key) is not None else "null"
            raise ValueError(f"{p}: {key}: expected an object, got {got}")
    return doc
