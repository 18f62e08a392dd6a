"""Output for icectl: rich tables for people, JSON for scripts, one place for both."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table


def console(stream: TextIO | None = None) -> Console:
    """A console on stdout (or the given stream) that does not wrap tables in a narrow pipe."""
    out = stream if stream is not None else sys.stdout
    width = None if out.isatty() else 160
    return Console(file=out, width=width, highlight=False, soft_wrap=False)


def emit_json(data: Any, stream: TextIO | None = None) -> None:
    """Write data as indented JSON followed by a newline."""
    out = stream if stream is not None else sys.stdout
    json.dump(data, out, indent=2, sort_keys=False, default=_json_default)
    out.write("\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    justify: Mapping[str, str] | None = None,
) -> Table:
    """Build a rich table; numbers right-aligned unless told otherwise."""
    t = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
    rows = [list(r) for r in rows]
    for i, col in enumerate(columns):
        just = (justify or {}).get(col)
        if just is None:
            numeric = bool(rows) and all(
                isinstance(r[i], (int, float)) or r[i] in ("", "-") for r in rows
            )
            just = "right" if numeric else "left"
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*(fmt(v) for v in r))
    return t


def fmt(value: Any) -> str:
    """Format one cell: floats to 3 significant places, None as '-', lists joined."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return " > ".join(str(v) for v in value)
    return str(value)


def human_bytes(n: float) -> str:
    """Bytes with a binary-free SI suffix (B, kB, MB, GB, TB)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} TB"


def load_ms(seconds: float | None) -> str:
    """A link load (the busiest link's planned bytes / its rate, in seconds) as ``37.6 ms``."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3g} ms"
