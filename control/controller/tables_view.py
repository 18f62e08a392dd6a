"""Table entries as people read them (``icectl tables``): dotted IPv4 addresses and MACs where
the field holds one, match kinds spelt out, actions and parameters by name.

A field is shown as an address by its width and name: 32 bits named ``*addr*``/``*ip*`` as
dotted IPv4, 48 bits named ``*addr*``/``*mac*`` as a MAC; every other value as a decimal
integer (hex for masks).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from icefabric.control.p4rt import P4InfoIndex, TableEntry
from icefabric.control.p4rt.match import LPM, Exact, Optional, Range, Ternary


def _int(v: Any) -> int:
    if isinstance(v, bytes):
        return int.from_bytes(v, "big")
    return int(v)


def value_text(name: str, bitwidth: int, value: Any) -> str:
    """One field or parameter value as text (address when its width and name say so)."""
    n = _int(value)
    low = name.lower().rsplit(".", 1)[-1]
    if bitwidth == 32 and ("addr" in low or "ip" in low):
        return str(ipaddress.IPv4Address(n & 0xFFFFFFFF))
    if bitwidth == 48 and ("addr" in low or "mac" in low):
        return ":".join(f"{(n >> s) & 0xFF:02x}" for s in range(40, -8, -8))
    return str(n)


def match_text(name: str, bitwidth: int, value: Any) -> str:
    """A match value: ``10.0.2.0/24``, ``5 &&& 0xff``, ``3..7`` or the value."""
    if isinstance(value, LPM):
        return f"{value_text(name, bitwidth, value.value)}/{value.prefix_len}"
    if isinstance(value, Ternary):
        return f"{value_text(name, bitwidth, value.value)} &&& {_int(value.mask):#x}"
    if isinstance(value, Range):
        return f"{value_text(name, bitwidth, value.low)}..{value_text(name, bitwidth, value.high)}"
    if isinstance(value, Exact | Optional):
        return value_text(name, bitwidth, value.value)
    return value_text(name, bitwidth, value)


def short(name: str) -> str:
    """``IceIngress.fwd.set_path`` -> ``fwd.set_path`` (the control's name dropped)."""
    parts = name.split(".")
    return ".".join(parts[1:]) if len(parts) > 1 else name


def decode_entries(p4info: P4InfoIndex, entries: Iterable[TableEntry]) -> list[dict[str, Any]]:
    """Rows for icectl tables: table, match (name -> text), action, params (name -> text)."""
    rows: list[dict[str, Any]] = []
    for e in entries:
        t = p4info.table(e.table)
        widths = {f.name: f.bitwidth for f in t.match_fields}
        match = {k: match_text(k, widths.get(k, 0), v) for k, v in e.match.items()}
        params: dict[str, str] = {}
        action = ""
        if e.action:
            a = p4info.action(e.action)
            pw = {p.name: p.bitwidth for p in a.params}
            params = {k: value_text(k, pw.get(k, 0), v) for k, v in e.params.items()}
            action = short(a.name)
        elif e.group_id is not None:
            action = f"group {e.group_id}"
        elif e.member_id is not None:
            action = f"member {e.member_id}"
        rows.append(
            {
                "table": short(t.name),
                "match": match,
                "action": action,
                "params": params,
                "priority": e.priority,
                "default": e.is_default_action,
            }
        )
    rows.sort(key=lambda r: (r["table"], sorted(r["match"].items())))
    return rows


def table_names(p4info: P4InfoIndex) -> list[str]:
    """Every table, short names (what ``icectl tables SWITCH TABLE`` takes)."""
    return sorted(short(t.name) for t in p4info.tables)


def resolve_table(p4info: P4InfoIndex, name: str) -> str:
    """The full name of a table given by full name, alias or short name (KeyError listing
    the tables otherwise)."""
    for t in p4info.tables:
        if name in (t.name, t.alias, short(t.name)):
            return t.name
    raise KeyError(f"no table {name!r} (tables: {', '.join(table_names(p4info))})")
