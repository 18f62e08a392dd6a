"""Rename the hosts a log or rank table names to the topology's host names.

Three ways, tried in this order for each log host: an exact mapping (``--host-map A=B``, or a
file of them), patterns (``--host-pattern 'gpu-(\\d+)=h\\1'``: a regular expression that must
match the whole name, and a template in Python's ``re`` syntax), and ``ordered`` (the log's hosts,
ordered by their lowest rank, become the topology's hosts in the order the topology lists them).
A host none of them maps keeps its name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefabric.files import DataFileError, parse_data_text, read_text

MAX_MAP_FILE_BYTES = 16 << 20


class HostMapError(ValueError):
    """A mapping option or file that cannot be used."""


@dataclass(slots=True, frozen=True)
class HostMap:
    """How log host names become topology host names."""

    exact: dict[str, str] = field(default_factory=dict)
    patterns: tuple[tuple[re.Pattern[str], str], ...] = ()
    ordered: tuple[str, ...] | None = None  # the topology's hosts, when mapping in order

    def resolve(self, hosts_by_rank: Sequence[str]) -> dict[str, str]:
        """Log host -> topology host for every distinct host of ``hosts_by_rank``."""
        distinct = list(dict.fromkeys(hosts_by_rank))
        out: dict[str, str] = {}
        rest: list[str] = []
        for h in distinct:
            if h in self.exact:
                out[h] = self.exact[h]
                continue
            for rx, template in self.patterns:
                m = rx.fullmatch(h)
                if m is not None:
                    try:
                        out[h] = m.expand(template)
                    except (re.error, IndexError) as e:
                        raise HostMapError(f"--host-pattern {rx.pattern!r}: {e}") from None
                    break
            else:
                rest.append(h)
        if self.ordered is not None and rest:
            free = [t for t in self.ordered if t not in out.values()]
            if len(free) < len(rest):
                raise HostMapError(
                    f"--host-pattern ordered: the log has {len(rest)} unmapped hosts but the "
                    f"topology has only {len(free)} hosts left"
                )
            out.update(zip(rest, free, strict=False))
        for h in distinct:
            out.setdefault(h, h)
        return out


def parse_items(items: Iterable[str]) -> dict[str, str]:
    """``LOGHOST=TOPOHOST`` options."""
    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k or not v:
            raise HostMapError(f"--host-map: expected LOGHOST=TOPOHOST, got {item!r}")
        out[k] = v
    return out


def parse_patterns(items: Iterable[str]) -> tuple[tuple[tuple[re.Pattern[str], str], ...], bool]:
    """``REGEX=TEMPLATE`` options (and whether ``ordered`` was given)."""
    pats: list[tuple[re.Pattern[str], str]] = []
    ordered = False
    for item in items:
        if item == "ordered":
            ordered = True
            continue
        rx, sep, template = item.rpartition("=")
        if not sep or not rx:
            raise HostMapError(f"--host-pattern: expected REGEX=TEMPLATE or ordered, got {item!r}")
        try:
            pats.append((re.compile(rx), template))
        except re.error as e:
            raise HostMapError(f"--host-pattern {rx!r}: not a regular expression: {e}") from None
    return tuple(pats), ordered


def load_file(path: str | Path) -> dict[str, str]:
    """A mapping file: YAML/JSON ``{loghost: topohost}``, or lines ``loghost topohost``."""
    p = Path(path)
    try:
        text = read_text(p, limit=MAX_MAP_FILE_BYTES, what="a host map")
    except DataFileError as e:
        raise HostMapError(str(e).splitlines()[0]) from None
    if p.suffix.lower() in (".yaml", ".yml", ".json"):
        try:
            data = parse_data_text(text, str(path), json_file=p.suffix.lower() == ".json")
        except DataFileError as e:
            raise HostMapError("; ".join(e.errors)) from None
        return _mapping(data, str(path))
    out: dict[str, str] = {}
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace("=", " ").split()
        if len(parts) != 2:
            raise HostMapError(f"{path}:{i}: expected 'LOGHOST TOPOHOST', got {raw.strip()!r}")
        if parts[0] in out:
            raise HostMapError(f"{path}:{i}: {parts[0]!r} is mapped twice")
        out[parts[0]] = parts[1]
    return out


def _mapping(data: Any, source: str) -> dict[str, str]:
    if not isinstance(data, dict):
        raise HostMapError(f"{source}: expected a mapping of log host: topology host")
    out: dict[str, str] = {}
    for k, v in data.items():
        if not isinstance(k, str) or not isinstance(v, str) or not k or not v:
            raise HostMapError(f"{source}: {k!r}: expected host name strings, got {v!r}")
        out[k] = v
    return out


def build(
    items: Iterable[str] = (),
    files: Iterable[str] = (),
    patterns: Iterable[str] = (),
    topology_hosts: Sequence[str] | None = None,
) -> HostMap:
    """A HostMap from the command-line options (``ordered`` needs ``topology_hosts``)."""
    exact: dict[str, str] = {}
    for f in files:
        exact.update(load_file(f))
    exact.update(parse_items(items))
    pats, ordered = parse_patterns(patterns)
    if ordered and topology_hosts is None:
        raise HostMapError("--host-pattern ordered needs the topology (--topo)")
    hosts = tuple(topology_hosts) if ordered and topology_hosts is not None else None
    return HostMap(exact, pats, hosts)
