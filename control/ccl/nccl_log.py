"""Recover ranks, hosts, devices, rings and trees from ``NCCL_DEBUG=INFO`` output.

NCCL prints each line as ``host:pid:tid [cudaDev] NCCL INFO message``. The lines used here:

* init lines naming the rank of each process:
  ``comm 0x55a7 rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId 4e000 commId 0x996e - Init COMPLETE``
  (also ``ncclCommInitRank comm ...  - Init START`` and ``comm ... rank 1 nRanks 8 nNodes 1 ...``);
* ring order per channel: ``Channel 00/02 :    0   1   2   3`` (NCCL >= 2.4) or
  ``Ring 00 :    0   1   2   3`` / ``Ring 00 : 0 -> 1 -> 2 -> 3`` (older releases);
* ring connections, used when no order line is present:
  ``Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0`` or ``Ring 00 : 35 -> 34 [send] via NET/Socket/0``
  (only those printed before the process logs ``Connected all rings``; later ones are tree links);
* trees: ``Trees [0] 3/-1/-1->0->-1 [1] -1/-1/-1->0->3`` (children->rank->parent, NCCL >= 2.5) or
  ``Trees [0] 22->23->-1/-1/-1`` (parent->rank->children, NCCL 2.4).

Forks that keep NCCL's logger (RCCL, and vendor CCLs such as BCCL or MCCL) print the same lines
with their own library name in place of ``NCCL``; they are accepted the same way. A line that
names a CCL but cannot be understood becomes a warning with its line number; the rest of the log is
still used. Lines of other programs are skipped silently.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from icefabric.control.ccl.job import (
    JobSpec,
    Phase,
    Rank,
    canonical_algorithm,
    canonical_collective,
)

log = logging.getLogger(__name__)

_PREFIX = re.compile(
    r"(?P<host>[A-Za-z0-9_.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?P<lib>[A-Z][A-Za-z0-9]*CCL) INFO (?P<msg>.*?)\s*$"
)
_LOOKS_CCL = re.compile(r"\b[A-Z][A-Za-z0-9]*CCL INFO\b")
_INIT = re.compile(r"\brank (?P<rank>\d+) n[Rr]anks (?P<n>\d+)\b")
_KV = {
    "comm": re.compile(r"\bcomm (0x[0-9a-fA-F]+)"),
    "cudaDev": re.compile(r"\bcudaDev (\d+)"),
    "nvmlDev": re.compile(r"\bnvmlDev (\d+)"),
    "busId": re.compile(r"\bbusId ([0-9a-fA-F]+)"),
    "commId": re.compile(r"\bcommId (0x[0-9a-fA-F]+)"),
}
_ORDER = re.compile(
    r"^(?:Channel (?P<c1>\d+)/(?P<n>\d+)|Ring (?P<c2>\d+)) :(?P<ranks>(?:\s+\d+)+)$"
)
_CHAIN = re.compile(r"^Ring (?P<c>\d+) :\s*(?P<chain>\d+(?:\s*->\s*\d+)+)$")
_EDGE = re.compile(
    r"^(?:Channel|Ring) (?P<c>\d+)(?:/\d+)? : (?P<src>\d+)(?:\[[^\]]*\])? -> (?P<dst>\d+)(?:\[[^\]]*\])?"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S+)"
)
_TREES = re.compile(r"^Trees(?P<body>(?:\s+\[\d+\]\s+\S+)+)$")
_TREE_ITEM = re.compile(r"\[(\d+)\]\s+(\S+)")
_VENDOR_OF_LIB = {
    "NCCL": "nvidia",
    "RCCL": "amd",
    "BCCL": "baidu",
    "MCCL": "metax",
    "IXCCL": "iluvatar",
}


@dataclass(slots=True, frozen=True)
class ParseWarning:
    """A line that named a CCL but could not be used."""

    line: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.text[:160]}"


@dataclass(slots=True, frozen=True, kw_only=True)
class RankInfo:
    """Where one rank runs, as its init line says."""

    rank: int
    host: str
    pid: int
    cuda_dev: int
    bus_id: str = ""
    nvml_dev: int | None = None
    comm: str = ""
    comm_id: str = ""
    library: str = "NCCL"


@dataclass(slots=True, kw_only=True)
class NcclLog:
    """What a CCL debug log says about one communicator."""

    source: str
    nranks: int | None = None
    ranks: dict[int, RankInfo] = field(default_factory=dict)
    rings: dict[int, tuple[int, ...]] = field(default_factory=dict)  # channel -> ring order
    trees: dict[int, dict[int, int]] = field(default_factory=dict)  # channel -> {rank: parent}
    n_channels: int | None = None  # the channel count the Channel NN/MM lines announce
    warnings: list[ParseWarning] = field(default_factory=list)
    lines_read: int = 0
    lines_used: int = 0

    def hosts(self) -> dict[int, str]:
        """Rank -> host name."""
        return {r: info.host for r, info in sorted(self.ranks.items())}


def load_nccl_log(path: str | Path, *, comm_id: str | None = None) -> NcclLog:
    """Parse a CCL debug log file (see :func:`parse_nccl_log`)."""
    p = Path(path)
    with p.open(encoding="utf-8", errors="replace") as f:
        return parse_nccl_log(f, source=str(path), comm_id=comm_id)


def parse_nccl_log(
    lines: Iterable[str], *, source: str = "<log>", comm_id: str | None = None
) -> NcclLog:
    """Parse CCL ``INFO`` lines; bad lines become warnings, good ones are all kept.

    With ``comm_id`` only init lines of that communicator are used: lines naming another commId
    are ignored, and so are later lines of the same ``comm 0x...`` handle that omit the commId.
    """
    out = NcclLog(source=source)
    edges: dict[int, dict[int, tuple[int, int]]] = {}  # channel -> src -> (dst, line)
    rings_done: set[tuple[str, int, int]] = set()
    foreign: set[tuple[str, int, str]] = set()  # (host, pid, comm handle) of other communicators
    for lineno, raw in enumerate(lines, start=1):
        out.lines_read += 1
        text = raw.rstrip("\n")
        m = _PREFIX.search(text)
        if m is None:
            if _LOOKS_CCL.search(text):
                out.warnings.append(ParseWarning(lineno, "malformed CCL line prefix", text))
            continue
        msg = m.group("msg")
        proc = (m.group("host"), int(m.group("pid")), int(m.group("dev")))
        try:
            used = _dispatch(out, msg, m, lineno, edges, rings_done, proc, (comm_id, foreign))
        except _Bad as e:
            out.warnings.append(ParseWarning(lineno, str(e), text))
            continue
        if used:
            out.lines_used += 1
    _rings_from_edges(out, edges)
    _check(out)
    for w in out.warnings:
        log.debug("%s: %s", source, w)
    return out


class _Bad(Exception):
    """A line that matched a known shape but carries values that make no sense."""


def _dispatch(
    out: NcclLog,
    msg: str,
    m: re.Match[str],
    lineno: int,
    edges: dict[int, dict[int, tuple[int, int]]],
    rings_done: set[tuple[str, int, int]],
    proc: tuple[str, int, int],
    comm_filter: tuple[str | None, set[tuple[str, int, str]]],
) -> bool:
    if msg.startswith("Connected all rings"):
        rings_done.add(proc)
        return True
    im = _INIT.search(msg)
    if im is not None and ("comm " in msg or "cudaDev" in msg):
        return _init_line(out, msg, im, m, lineno, comm_filter)
    if msg.startswith("Trees"):
        _trees_line(out, msg, lineno)
        return True
    if msg.startswith(("Channel ", "Ring ")):
        om = _ORDER.match(msg)
        if om is not None:
            ch = int(om.group("c1") or om.group("c2"))
            ring = tuple(int(x) for x in om.group("ranks").split())
            if om.group("n") is not None:
                n_ch = int(om.group("n"))
                if ch >= n_ch:
                    raise _Bad(f"channel {ch} out of range 0..{n_ch - 1}")
                out.n_channels = n_ch
            _add_ring(out, ch, ring, lineno)
            return True
        cm = _CHAIN.match(msg)
        if cm is not None:
            ring = tuple(int(x) for x in re.split(r"\s*->\s*", cm.group("chain")))
            if ring[0] == ring[-1] and len(ring) > 2:
                ring = ring[:-1]
            _add_ring(out, int(cm.group("c")), ring, lineno)
            return True
        em = _EDGE.match(msg)
        if em is not None:
            if proc in rings_done:
                return False  # tree connections, printed after the rings
            ch, src, dst = int(em.group("c")), int(em.group("src")), int(em.group("dst"))
            prev = edges.setdefault(ch, {}).get(src)
            if prev is not None and prev[0] != dst:
                raise _Bad(f"channel {ch}: rank {src} already sends to {prev[0]} (line {prev[1]})")
            edges[ch][src] = (dst, lineno)
            return True
        if re.match(r"^Channel \d+/\d+ :", msg) or re.match(r"^Ring \d+ :", msg):
            raise _Bad("channel line with no rank list")
    return False


def _init_line(
    out: NcclLog,
    msg: str,
    im: re.Match[str],
    m: re.Match[str],
    lineno: int,
    comm_filter: tuple[str | None, set[tuple[str, int, str]]],
) -> bool:
    rank, n = int(im.group("rank")), int(im.group("n"))
    kv: dict[str, str] = {}
    for k, rx in _KV.items():
        found = rx.search(msg)
        kv[k] = found.group(1) if found else ""
    comm_id, foreign = comm_filter
    handle = (m.group("host"), int(m.group("pid")), kv["comm"])
    if comm_id is not None:
        if kv["commId"] and kv["commId"].lower() != comm_id.lower():
            foreign.add(handle)
            return False
        if handle in foreign:
            return False
    if n < 1 or rank >= n:
        raise _Bad(f"rank {rank} outside 0..{n - 1}")
    if out.nranks is None:
        out.nranks = n
    elif out.nranks != n:
        raise _Bad(f"nranks {n} differs from {out.nranks} seen before (another communicator?)")
    info = RankInfo(
        rank=rank,
        host=m.group("host"),
        pid=int(m.group("pid")),
        cuda_dev=int(kv["cudaDev"]) if kv["cudaDev"] else int(m.group("dev")),
        bus_id=kv["busId"],
        nvml_dev=int(kv["nvmlDev"]) if kv["nvmlDev"] else None,
        comm=kv["comm"],
        comm_id=kv["commId"],
        library=m.group("lib"),
    )
    old = out.ranks.get(rank)
    if old is not None and (old.host, old.pid) != (info.host, info.pid):
        raise _Bad(f"rank {rank} already on {old.host} pid {old.pid}")
    if old is None or (not old.bus_id and info.bus_id) or (not old.comm_id and info.comm_id):
        out.ranks[rank] = info
    return True


def _add_ring(out: NcclLog, ch: int, ring: tuple[int, ...], lineno: int) -> None:
    if len(set(ring)) != len(ring):
        raise _Bad(f"channel {ch}: ring repeats a rank")
    if out.nranks is not None and (len(ring) != out.nranks or max(ring) >= out.nranks):
        raise _Bad(
            f"channel {ch}: ring of {len(ring)} ranks, expected a permutation of 0..{out.nranks - 1}"
        )
    old = out.rings.get(ch)
    if old is not None and not _same_cycle(old, ring):
        raise _Bad(f"channel {ch}: ring differs from the one seen before")
    if old is None:
        out.rings[ch] = ring


def _same_cycle(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    if len(a) != len(b) or set(a) != set(b):
        return False
    i = b.index(a[0])
    return a == b[i:] + b[:i]


def _trees_line(out: NcclLog, msg: str, lineno: int) -> None:
    tm = _TREES.match(msg)
    if tm is None:
        raise _Bad("Trees line without [channel] entries")
    parsed: list[tuple[int, int, int]] = []
    for ch_s, tok in _TREE_ITEM.findall(tm.group("body")):
        parts = tok.split("->")
        if len(parts) != 3:
            raise _Bad(f"tree entry {tok!r}: expected children->rank->parent")
        try:
            if "/" in parts[2] and "/" not in parts[0]:  # NCCL 2.4: parent->rank->children
                parent, rank = int(parts[0]), int(parts[1])
            else:
                rank, parent = int(parts[1]), int(parts[2])
                [int(x) for x in parts[0].split("/")]
        except ValueError:
            raise _Bad(f"tree entry {tok!r}: expected integers") from None
        if rank < 0 or parent < -1 or rank == parent:
            raise _Bad(f"tree entry {tok!r}: bad rank or parent")
        parsed.append((int(ch_s), rank, parent))
    for ch, rank, parent in parsed:
        tree = out.trees.setdefault(ch, {})
        if tree.get(rank, parent) != parent:
            raise _Bad(f"channel {ch}: rank {rank} parent {parent} differs from {tree[rank]}")
        tree[rank] = parent


def _rings_from_edges(out: NcclLog, edges: dict[int, dict[int, tuple[int, int]]]) -> None:
    for ch, succ in sorted(edges.items()):
        if ch in out.rings:
            continue
        start = min(succ)
        ring = [start]
        x = succ[start][0]
        while x != start and x in succ and len(ring) <= len(succ):
            ring.append(x)
            x = succ[x][0]
        n = out.nranks if out.nranks is not None else len(succ)
        if x != start or len(ring) != n or len(succ) != n:
            first_line = min(v[1] for v in succ.values())
            out.warnings.append(
                ParseWarning(
                    first_line,
                    f"channel {ch}: ring connections do not form one ring of {n}",
                    f"{len(succ)} connection lines",
                )
            )
            continue
        out.rings[ch] = tuple(ring)


def _check(out: NcclLog) -> None:
    n = out.nranks
    if n is None:
        if out.rings or out.trees:
            out.warnings.append(ParseWarning(0, "no init line names rank -> host", out.source))
        return
    for ch, ring in list(out.rings.items()):
        if len(ring) != n or max(ring) >= n:
            out.warnings.append(
                ParseWarning(
                    0,
                    f"channel {ch}: ring of {len(ring)} ranks, expected a permutation of 0..{n - 1}",
                    out.source,
                )
            )
            del out.rings[ch]
    missing = sorted(set(range(n)) - set(out.ranks))
    if missing:
        out.warnings.append(ParseWarning(0, f"no init line for ranks {missing[:16]}", out.source))
    for ch, tree in list(out.trees.items()):
        if len(tree) != n:
            continue  # only some ranks printed this tree; kept as a partial tree
        roots = [r for r, p in tree.items() if p == -1]
        if len(roots) != 1 or any(p != -1 and p not in tree for p in tree.values()):
            out.warnings.append(
                ParseWarning(0, f"channel {ch}: tree has no single root", out.source)
            )
            del out.trees[ch]


def to_job(
    parsed: NcclLog,
    *,
    name: str,
    collective: str,
    message_bytes: int,
    algorithm: str | None = None,
    host_map: Mapping[str, str] | None = None,
    phase: str = "main",
) -> JobSpec:
    """Turn a parsed log into a job with the log's exact rings or trees per channel.

    ``host_map`` renames log hosts to topology hosts (``{"node01": "h1"}``).
    """
    n = parsed.nranks
    if n is None or len(parsed.ranks) != n:
        raise ValueError(f"{parsed.source}: the log does not name the host of every rank")
    hm = dict(host_map or {})
    ranks = tuple(
        Rank(
            rank=r,
            host=hm.get(parsed.ranks[r].host, parsed.ranks[r].host),
            vendor=_VENDOR_OF_LIB.get(parsed.ranks[r].library, parsed.ranks[r].library.lower()),
            device=f"dev{parsed.ranks[r].cuda_dev}"
            + (f"@{parsed.ranks[r].bus_id}" if parsed.ranks[r].bus_id else ""),
        )
        for r in range(n)
    )
    coll = canonical_collective(collective)
    alg = canonical_algorithm(algorithm) if algorithm else ("ring" if parsed.rings else "tree")
    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[dict[int, int], ...] = ()
    if alg == "ring":
        if not parsed.rings:
            raise ValueError(
                f"{parsed.source}: no ring order in the log (Channel NN/MM : ... lines)"
            )
        rings = tuple(parsed.rings[c] for c in sorted(parsed.rings))
        channels = len(rings)
    elif alg == "tree":
        full = [c for c in sorted(parsed.trees) if len(parsed.trees[c]) == n]
        if not full:
            raise ValueError(
                f"{parsed.source}: no complete tree in the log (Trees lines of every rank)"
            )
        trees = tuple(parsed.trees[c] for c in full)
        channels = len(trees)
    else:
        channels = max(len(parsed.rings), 1)
    ph = Phase(
        name=phase,
        collective=coll,
        algorithm=alg if coll not in ("all-to-all", "send-recv") else "",
        channels=channels,
        message_bytes=message_bytes,
        ranks=tuple(range(n)),
        rings=rings,
        trees=trees,
        pairs=tuple(zip(range(n - 1), range(1, n), strict=True)) if coll == "send-recv" else (),
    )
    return JobSpec(name=name, ranks=ranks, phases=(ph,))
