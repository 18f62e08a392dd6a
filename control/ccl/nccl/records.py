"""Split a CCL debug log into messages: one per ``host:pid:tid [dev] NCCL INFO`` prefix.

Several processes write to one stream, so one physical line can hold the start of one process's
message and then a whole message of another (``...Channel 00/02 :  0  1node2:7:7 [1] NCCL INFO
comm ...``). Every embedded prefix starts a new message; a message cut short by another one is
marked ``cut`` so that no field of the second process is read as the first one's.

Whatever wraps the prefix is ignored: ``pdsh`` (``node01: ``), Open MPI's ``--tag-output``
(``[1,0]<stdout>:``), Slurm's ``srun --label`` (``0: ``), timestamps, container names.

Parsing is linear in the input: the library tag (``[dev] NCCL INFO``) is found with a pattern
that starts with a literal ``[`` and has only bounded repeats, and the ``host:pid:tid `` in front
of it is read backwards a bounded number of characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

MAX_LINE_CHARS = 1 << 20  # longer physical lines are cut here (with a warning)
MAX_HOST_CHARS = 255
# "[dev] NCCL INFO", "[dev] file.cc:123 NCCL WARN", "[dev] 12.345 file.cc:123 NCCL TRACE"
_TAG = re.compile(
    r"\[(\d{1,6})\] (?:\d{1,12}\.\d{1,12} )?(?:[\w./-]{1,200}:\d{1,7} )?"
    r"([A-Z][A-Za-z0-9]{0,11}CCL) (INFO|WARN|TRACE|ABORT)\b ?"
)
# What launchers put in front of a line: Open MPI's tag, srun --label, a timestamp.
_WRAP = (
    r"(?:\[\d{1,7},\d{1,7}\]<std(?:out|err)>:|\d{1,7}: |\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d"
    r"(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]? )"
)
_WRAP_TAIL = re.compile(_WRAP + r"$")
_WRAP_HEAD = re.compile(_WRAP)
_HOST_STR = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_HOST_CHARS = frozenset(_HOST_STR)


@dataclass(slots=True, frozen=True)
class Record:
    """One CCL message: who printed it and what it says."""

    line: int
    host: str
    pid: int
    tid: int
    dev: int
    lib: str
    level: str
    msg: str
    cut: bool = False  # another process's message followed on the same physical line

    @property
    def stream(self) -> tuple[str, int, int]:
        """The process and device that printed it: NCCL logs one device per thread of init."""
        return (self.host, self.pid, self.dev)


@dataclass(slots=True, frozen=True)
class BadPrefix:
    """A CCL tag without a readable ``host:pid:tid`` in front of it."""

    line: int
    text: str


def read_lines(f: TextIO, *, max_chars: int = MAX_LINE_CHARS) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, was cut) for every physical line, each at most ``max_chars`` long."""
    lineno = 0
    while True:
        chunk = f.readline(max_chars)
        if not chunk:
            return
        lineno += 1
        if chunk.endswith("\n") or len(chunk) < max_chars:
            yield lineno, chunk.rstrip("\r\n"), False
            continue
        yield lineno, chunk, True
        while True:  # skip the rest of the over-long line without holding it
            rest = f.readline(max_chars)
            if not rest or rest.endswith("\n"):
                break


def _prefix_before(text: str, end: int) -> tuple[int, str, int, int] | None:
    """(start, host, pid, tid) of ``host:pid:tid `` ending right before ``end``.

    Reads at most ``MAX_HOST_CHARS + 22`` characters back (C-speed string methods only).
    """
    if end < 1 or text[end - 1] != " ":
        return None
    window = text[max(0, end - 1 - MAX_HOST_CHARS - 22) : end - 1]
    parts = window.rsplit(":", 2)
    if len(parts) != 3:
        return None
    before, pid, tid = parts
    for num in (pid, tid):
        if not (num.isascii() and num.isdigit()) or len(num) > 10:
            return None
    host = before[len(before.rstrip(_HOST_STR)) :][-MAX_HOST_CHARS:]
    if not host:
        return None
    start = end - 1 - len(tid) - 1 - len(pid) - 1 - len(host)
    return start, host, int(pid), int(tid)


MAX_KNOWN_HOSTS = 1 << 16


def _clean_start(text: str, start: int, first: bool) -> bool:
    """Whether a prefix at ``start`` begins the line (after nothing but a launcher's prefix)."""
    if not first:
        return False
    if start == 0:
        return True
    lead = text[:start]
    m = _WRAP_HEAD.match(lead)
    rest = lead[m.end() :] if m else lead
    return rest == "" or (rest.endswith(": ") and set(rest[:-2]) <= _HOST_CHARS)


def _known_suffix(host: str, hosts: set[str]) -> str:
    """The longest name of ``hosts`` that ``host`` ends with (another message glued in front)."""
    if host in hosts or not hosts:
        return host
    for i in range(1, len(host)):
        if host[i:] in hosts:
            return host[i:]
    return host


def clean_hosts(lines: Iterable[str]) -> set[str]:
    """Host names of prefixes that begin a line: the names glued text is matched against."""
    hosts: set[str] = set()
    for text in lines:
        m = _TAG.search(text, 0, 4096)
        if m is None:
            continue
        pre = _prefix_before(text, m.start())
        if pre is not None and _clean_start(text, pre[0], True):
            hosts.add(pre[1])
            if len(hosts) >= MAX_KNOWN_HOSTS:
                break
    return hosts


def split_line(
    lineno: int, text: str, hosts: set[str] | None = None
) -> tuple[list[Record], list[BadPrefix]]:
    """The CCL messages of one physical line (usually one; more when processes interleaved).

    When another message is glued in front of a prefix (``...rank 29 nrnode02:1201:1201 [1]``)
    the host is the longest name of ``hosts`` (names seen at the start of lines) it ends with.
    """
    found: list[tuple[int, int, tuple[str, int, int] | None, re.Match[str]]] = []
    for m in _TAG.finditer(text):
        pre = _prefix_before(text, m.start())
        if pre is None:
            found.append((m.start(), m.end(), None, m))
            continue
        start, host = pre[0], pre[1]
        if hosts is not None:
            if _clean_start(text, start, not found):
                if len(hosts) < MAX_KNOWN_HOSTS:
                    hosts.add(host)
            else:
                fixed = _known_suffix(host, hosts)
                start += len(host) - len(fixed)
                host = fixed
        found.append((start, m.end(), (host, pre[2], pre[3]), m))
    recs: list[Record] = []
    bad: list[BadPrefix] = []
    for k, (start, body, who, m) in enumerate(found):
        stop = found[k + 1][0] if k + 1 < len(found) else len(text)
        if who is None:
            bad.append(BadPrefix(lineno, text[max(0, start - 40) : stop]))
            continue
        msg = text[body:stop]
        if k + 1 < len(found):  # drop the next message's launcher prefix from this one
            nxt = found[k + 1][2]
            msg = strip_wrapper_tail(msg, nxt[0] if nxt is not None else "")
        recs.append(
            Record(
                line=lineno,
                host=who[0],
                pid=who[1],
                tid=who[2],
                dev=int(m.group(1)),
                lib=m.group(2),
                level=m.group(3),
                msg=msg.lstrip() if k + 1 < len(found) else msg.strip(),
                cut=k + 1 < len(found),
            )
        )
    return recs, bad


def strip_wrapper_tail(msg: str, next_host: str) -> str:
    """``msg`` without a launcher prefix (of the message that follows it) at its end."""
    if next_host and msg.endswith(f"{next_host}: "):
        return msg[: -len(next_host) - 2]
    m = _WRAP_TAIL.search(msg, max(0, len(msg) - 64))
    return msg[: m.start()] if m else msg


def strip_wrapper_head(text: str, host: str) -> str:
    """``text`` (the rest of a cut message) without the launcher prefix at its start."""
    if text.startswith(f"{host}: "):
        return text[len(host) + 2 :]
    m = _WRAP_HEAD.match(text)
    return text[m.end() :] if m else text
