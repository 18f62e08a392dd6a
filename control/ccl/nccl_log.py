"""Recover communicators, ranks, hosts, rings and trees from ``NCCL_DEBUG=INFO`` output.

The importer lives in :mod:`icefabric.control.ccl.nccl` (one module per concern); this module is
its public face. The formats understood, per NCCL version, are listed in ``control/README.md``.

A log may hold several communicators (sub-communicators, two runs, tensor- and data-parallel
groups): :func:`parse_nccl_log` returns all of them, :meth:`NcclLog.select` picks one, and
:func:`to_job` turns one (or several, as phases) into a job. Lines that name a CCL but cannot
be used become warnings naming the file and line; the rest of the log is still used. Lines of
other programs are skipped. Every size read from the log is bounded (``MAX_RANKS``,
``MAX_CHANNELS``, ``MAX_LINE_CHARS``) and parsing is linear in the input.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from icefabric.control.ccl.nccl.formats import MAX_CHANNELS, MAX_RANKS
from icefabric.control.ccl.nccl.hostmap import HostMap, HostMapError
from icefabric.control.ccl.nccl.model import CommLog, NcclLog, ParseWarning, RankInfo
from icefabric.control.ccl.nccl.parse import parse_records
from icefabric.control.ccl.nccl.records import MAX_LINE_CHARS, clean_hosts, read_lines
from icefabric.control.ccl.nccl.tojob import check_collective, single_host_note, to_job

__all__ = [
    "MAX_CHANNELS",
    "MAX_LINE_CHARS",
    "MAX_RANKS",
    "CommLog",
    "HostMap",
    "HostMapError",
    "NcclLog",
    "ParseWarning",
    "RankInfo",
    "check_collective",
    "load_nccl_log",
    "parse_nccl_log",
    "single_host_note",
    "to_job",
]


def load_nccl_log(path: str | Path) -> NcclLog:
    """Parse a CCL debug log file (undecodable bytes become U+FFFD; OSError if unreadable).

    The file is read twice: first for the host names that begin lines (to split lines where
    processes interleaved), then for everything else.
    """
    with Path(path).open(encoding="utf-8", errors="replace", newline="") as f:
        hosts = clean_hosts(text for _, text, _ in read_lines(f))
    with Path(path).open(encoding="utf-8", errors="replace", newline="") as f:
        return parse_records(read_lines(f), str(path), hosts)


def parse_nccl_log(lines: Iterable[str] | str, *, source: str = "<log>") -> NcclLog:
    """Parse log text (a string, a sequence of lines, or any iterable of lines read once)."""
    if isinstance(lines, str):
        hosts = clean_hosts(text for _, text, _ in read_lines(io.StringIO(lines)))
        return parse_records(read_lines(io.StringIO(lines)), source, hosts)
    if isinstance(lines, Sequence):
        hosts = clean_hosts(text for _, text, _ in _numbered(lines))
        return parse_records(_numbered(lines), source, hosts)
    return parse_records(_numbered(lines), source)


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    for i, raw in enumerate(lines, start=1):
        text = raw.rstrip("\r\n")
        if len(text) > MAX_LINE_CHARS:
            yield i, text[:MAX_LINE_CHARS], True
        else:
            yield i, text, False
