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

import contextlib
import io
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from icefabric.control.ccl.nccl.formats import MAX_CHANNELS, MAX_RANKS
from icefabric.control.ccl.nccl.hostmap import HostMap, HostMapError
from icefabric.control.ccl.nccl.model import CommLog, NcclLog, ParseWarning, RankInfo
from icefabric.control.ccl.nccl.parse import parse_records
from icefabric.control.ccl.nccl.records import MAX_LINE_CHARS, clean_hosts, read_lines
from icefabric.control.ccl.nccl.tojob import check_collective, single_host_note, to_job
from icefabric.files import caller, open_text_input, owner_of

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


MAX_LOG_BYTES = 1 << 30  # one CCL debug log (a file or a pipe)
LOG_BUDGET_S = 300.0  # wall clock to read it


def load_nccl_log(path: str | Path, *, referenced_from: str | Path | None = None) -> NcclLog:
    """Parse a CCL debug log file or pipe (undecodable bytes become U+FFFD).

    Reading is bounded by :data:`MAX_LOG_BYTES` read and :data:`LOG_BUDGET_S` seconds; a
    device, socket or directory is refused (DataFileError, a ValueError naming the file).
    ``referenced_from``: the file that named this log (read only if its owner may read it).
    A regular file is read twice: first for the host names that begin lines (to split lines
    where processes interleaved), then for everything else; a pipe is read once.
    """
    readers = [caller()]
    if referenced_from is not None:
        with contextlib.suppress(OSError):
            readers.append(owner_of(referenced_from))

    def opened() -> TextIO:
        return open_text_input(
            path,
            limit=MAX_LOG_BYTES,
            what="a CCL debug log",
            stream=True,
            budget_s=LOG_BUDGET_S,
            for_readers=readers,
        )

    with opened() as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return parse_nccl_log(f.read(), source=str(path))
        hosts = clean_hosts(text for _, text, _ in read_lines(f))
    with opened() as f:
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
