"""The message formats NCCL (and forks printing its format) use for ranks, rings and trees.

Each ``parse_*`` function takes one message (the text after ``NCCL INFO``) and returns a typed
event, ``None`` when the message is not of its kind, or raises :class:`BadLine` when it is of its
kind but its values make no sense. Formats per NCCL version are listed in ``control/README.md``;
the source lines they come from are ``src/init.cc`` (init, Trees), ``src/graph/rings.cc`` (ring
order), ``src/graph/connect.cc`` and ``src/init.cc`` (GRAPH triples), ``src/transport/*.cc``
(connections) and ``src/transport/generic.cc`` (the ``Connected all ...`` markers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_RANKS = 1 << 20  # the largest communicator accepted from a log (NCCL's own limit is lower)
MAX_CHANNELS = 1024  # NCCL has at most 64 channels (128 tree indices in GRAPH lines)
# NCCL's dumpLine: up to 2.22 a fixed 20-rank field (MAXWIDTH), from 2.23 a 128-byte buffer
# that ends in "..." when cut. Trees lines live in a 1024-byte buffer.
ORDER_LINE_LIMIT = 127
MAXWIDTH = 20
TREES_LINE_LIMIT = 1023


class BadLine(Exception):
    """A message of a known kind whose values make no sense."""


@dataclass(slots=True, frozen=True)
class Init:
    """A line naming a communicator and one of its ranks (init start/complete, summary, end)."""

    kind: str  # "start" | "complete" | "info" | "end"
    comm: str  # the process-local comm pointer ("" when not printed)
    rank: int
    nranks: int
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str = ""
    comm_id: str = ""  # hash of the unique id: the same for every rank of one communicator
    parent: str = ""  # ncclCommSplit: the parent's comm pointer
    color: int | None = None
    child: int | None = None


@dataclass(slots=True, frozen=True)
class Order:
    """``Channel NN/MM :   0   1   2`` (rank 0's ring order); ``partial`` when cut."""

    channel: int
    n_channels: int | None
    ranks: tuple[int, ...]
    partial: bool


@dataclass(slots=True, frozen=True)
class Edge:
    """``Channel NN/C : 3[..] -> 4[..] [send] via NET/IB/0``: one transport connection."""

    channel: int
    src: int
    dst: int
    receive: bool  # printed by the receiving side ([receive]); else by the sender
    via: str
    comm: str = ""  # RCCL appends the comm pointer
    conn_index: int | None = None  # NCCL >= 2.12: 0 for rings and trees, 1 for send/recv
    src_dev: str = ""  # what NCCL prints in brackets: cudaDev (2.4), busId, nvmlDev (2.19+)
    dst_dev: str = ""


@dataclass(slots=True, frozen=True)
class Triple:
    """GRAPH subsystem: ``Ring 00 : 1 -> 2 -> 3`` (prev -> rank -> next)."""

    channel: int
    prev: int
    rank: int
    next: int


@dataclass(slots=True, frozen=True)
class TreeEntry:
    """One rank's place in one channel's tree."""

    channel: int
    rank: int
    parent: int
    children: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class Trees:
    """A ``Trees [0] ... [1] ...`` line, or a GRAPH ``Tree 0 : up -> rank -> d0/d1/d2`` line."""

    entries: tuple[TreeEntry, ...]
    era: str  # "2.4" | "2.5-2.7" | "2.8+" | "graph"
    partial: bool  # the last entry was cut (1023-byte buffer or interleaved output)
    notes: tuple[str, ...] = ()
    comm: str = ""


@dataclass(slots=True, frozen=True)
class Marker:
    """``Connected all rings`` / ``Connected all trees`` / other connection phase ends."""

    what: str  # "rings" | "trees" | "other"
    comm: str = ""


@dataclass(slots=True, frozen=True)
class Version:
    """``NCCL version 2.18.3+cuda12.2`` (printed by rank 0)."""

    text: str


@dataclass(slots=True, frozen=True)
class Pattern:
    """GRAPH search result: ``Pattern 4, crossNic 0, nChannels 2, ...``."""

    pattern: int
    n_channels: int


Event = Init | Order | Edge | Triple | Trees | Marker | Version | Pattern

_INIT = re.compile(r"\bcomm (0x[0-9a-fA-F]{1,16}|\(nil\)) rank (\d{1,12}) n[Rr]anks (\d{1,12})\b")
_INIT_BARE = re.compile(r"^rank (\d{1,12}) nranks (\d{1,12})$")  # NCCL 2.3 ncclCommInitAll
_KV = re.compile(
    r"\b(cudaDev|nvmlDev|busId|commId|parent|color|childCount) "
    r"(0x[0-9a-fA-F]{1,16}|-?[0-9a-fA-F]{1,16}|\(nil\))"
)
_ORDER_HEAD = re.compile(r"^(?:Channel (\d{1,5})(?:/(\d{1,5}))?|Ring (\d{1,5})) :")
_EDGE = re.compile(
    r"^(?:Channel|Ring) (\d{1,5})(?:/(\d{1,5}))? : (\d{1,12})(?:\[([0-9a-fA-Fx]{0,20})\])? -> "
    r"(\d{1,12})(?:\[([0-9a-fA-Fx]{0,20})\])?(?: \[(send|receive)\])? via (\S{1,200})"
)
_TRIPLE = re.compile(r"^Ring (\d{1,5}) : (-?\d{1,12}) -> (-?\d{1,12}) -> (-?\d{1,12})$")
_GRAPH_TREE = re.compile(
    r"^Tree (\d{1,5}) : (-?\d{1,12}) -> (\d{1,12}) -> (-?\d{1,12})/(-?\d{1,12})/(-?\d{1,12})$"
)
_COMM_TAIL = re.compile(r"\bcomm (0x[0-9a-fA-F]{1,16}) nRanks \d{1,12}")
_VERSION = re.compile(r"^(?:[A-Z][A-Za-z0-9]{0,11}CCL) version ([\x21-\x7e]{1,80})")
_PATTERN = re.compile(r"^Pattern (\d{1,4}), crossNic \d{1,4}, nChannels (\d{1,5})\b")
_TREE_TOKEN = re.compile(r"^\[(\d{1,5})\]$")


def _int(s: str, what: str, lo: int, hi: int) -> int:
    v = int(s)
    if not lo <= v <= hi:
        raise BadLine(f"{what} {v} outside {lo}..{hi}")
    return v


def parse_init(msg: str, *, cut: bool = False) -> Init | None:
    """Init START/COMPLETE, the ``comm .. rank .. nRanks .. nNodes`` summary, Destroy/Abort.

    A ``cut`` message is used only up to its last complete field.
    """
    m = _INIT.search(msg)
    if m is not None and cut and m.end() >= len(msg):
        return None  # "nranks 1" may be the start of "nranks 16"
    if m is None:
        if cut:
            return None
        b = _INIT_BARE.match(msg)
        if b is None:
            return None
        n = _int(b.group(2), "nranks", 1, MAX_RANKS)
        return Init(kind="info", comm="", rank=_int(b.group(1), "rank", 0, n - 1), nranks=n)
    if "Revoke" in msg or "bootstrapSplit" in msg:
        return None
    n = _int(m.group(3), "nranks", 1, MAX_RANKS)
    rank = _int(m.group(2), "rank", 0, n - 1)
    kv: dict[str, str] = {}
    for km in _KV.finditer(msg, m.end()):
        if cut and km.end() >= len(msg):
            break
        kv.setdefault(km.group(1), km.group(2))
    if "Destroy COMPLETE" in msg or "Abort" in msg:
        kind = "end"
    elif "Init START" in msg:
        kind = "start"
    elif msg.endswith("COMPLETE"):
        kind = "complete"
    else:
        kind = "info"
    comm_id = kv.get("commId", "").lower()
    if comm_id in ("0x0", "0"):
        comm_id = ""  # split communicators print commId 0
    try:
        return Init(
            kind=kind,
            comm="" if m.group(1) == "(nil)" else m.group(1).lower(),
            rank=rank,
            nranks=n,
            cuda_dev=int(kv["cudaDev"]) if "cudaDev" in kv else None,
            nvml_dev=int(kv["nvmlDev"]) if "nvmlDev" in kv else None,
            bus_id=kv.get("busId", "").lower(),
            comm_id=comm_id,
            parent=kv.get("parent", "").lower() if kv.get("parent") != "(nil)" else "",
            color=int(kv["color"]) if "color" in kv else None,
            child=int(kv["childCount"]) if "childCount" in kv else None,
        )
    except ValueError:
        raise BadLine("expected decimal cudaDev/nvmlDev/color/childCount values") from None


def parse_order(msg: str, *, cut: bool) -> Order | None:
    """Rank 0's ring order of one channel; ``None`` for connection and GRAPH lines."""
    h = _ORDER_HEAD.match(msg)
    if h is None or " via " in msg:
        return None
    if "->" in msg:
        return _chain(msg, h)
    tokens = msg[h.end() :].split()
    partial = cut
    if tokens and tokens[-1].endswith("..."):  # NCCL >= 2.23 marks a cut line; the last
        tokens.pop()  # number may be cut too
        partial = True
    elif len(msg) >= ORDER_LINE_LIMIT and tokens:
        tokens.pop()  # a full 128-byte buffer: the last number may be cut
        partial = True
    elif cut and tokens:
        tokens.pop()
    if not tokens and not partial:
        raise BadLine("channel line with no rank list")
    ranks: list[int] = []
    for t in tokens:
        if not t.isdigit() or len(t) > 12:
            if cut:
                return None  # a cut line of another kind
            raise BadLine(f"expected rank numbers after the channel, got {t[:20]!r}")
        ranks.append(_int(t, "rank", 0, MAX_RANKS - 1))
    ch = int(h.group(1) or h.group(3))
    n_ch = int(h.group(2)) if h.group(2) is not None else None
    if n_ch is not None and not ch < n_ch <= MAX_CHANNELS:
        raise BadLine(f"channel {ch} out of range 0..{n_ch - 1}")
    if ch >= MAX_CHANNELS:
        raise BadLine(f"channel {ch} above the limit {MAX_CHANNELS - 1}")
    if len(set(ranks)) != len(ranks):
        raise BadLine(f"channel {ch}: ring order repeats a rank")
    return Order(channel=ch, n_channels=n_ch, ranks=tuple(ranks), partial=partial)


def _chain(msg: str, h: re.Match[str]) -> Order | None:
    """``Ring 00 : 0 -> 2 -> 1 -> 0``: a closed chain of at least three ranks (vendor forks)."""
    parts = [p.strip() for p in msg[h.end() :].split("->")]
    if len(parts) < 4 or not all(p.isdigit() and len(p) <= 12 for p in parts):
        return None
    ranks = [_int(p, "rank", 0, MAX_RANKS - 1) for p in parts]
    if ranks[0] != ranks[-1] or len(set(ranks[:-1])) != len(ranks) - 1:
        raise BadLine("a ring chain must end at its first rank and list each rank once")
    ch = _int(h.group(1) or h.group(3), "channel", 0, MAX_CHANNELS - 1)
    return Order(channel=ch, n_channels=None, ranks=tuple(ranks[:-1]), partial=False)


def parse_edge(msg: str) -> Edge | None:
    """A transport connection line (send side, or ``[receive]`` side for NET)."""
    m = _EDGE.match(msg)
    if m is None:
        return None
    ch = _int(m.group(1), "channel", 0, MAX_CHANNELS - 1)
    src = _int(m.group(3), "rank", 0, MAX_RANKS - 1)
    dst = _int(m.group(5), "rank", 0, MAX_RANKS - 1)
    if src == dst:
        raise BadLine(f"channel {ch}: a connection from rank {src} to itself")
    tail = _COMM_TAIL.search(msg, m.end())
    return Edge(
        channel=ch,
        src=src,
        dst=dst,
        # NCCL 2.3 printed NET connections on the receiving side only, without a [tag]
        receive=m.group(7) == "receive" or (m.group(7) is None and m.group(8).startswith("NET/")),
        via=m.group(8),
        src_dev=(m.group(4) or "").lower(),
        dst_dev=(m.group(6) or "").lower(),
        conn_index=int(m.group(2)) if m.group(2) is not None else None,
        comm=tail.group(1).lower() if tail else "",
    )


def parse_triple(msg: str, *, cut: bool = False) -> Triple | None:
    """GRAPH ``Ring NN : prev -> rank -> next`` (NCCL >= 2.12 at INFO, TRACE before)."""
    m = None if cut else _TRIPLE.match(msg)
    if m is None:
        return None
    ch = _int(m.group(1), "channel", 0, MAX_CHANNELS - 1)
    prev, rank, nxt = (_int(m.group(i), "rank", 0, MAX_RANKS - 1) for i in (2, 3, 4))
    return Triple(channel=ch, prev=prev, rank=rank, next=nxt)


def _ints(part: str, tok: str) -> list[int]:
    try:
        vals = [int(x) for x in part.split("/")]
    except ValueError:
        raise BadLine(f"tree entry {tok!r}: expected integers") from None
    for v in vals:
        if not -1 <= v < MAX_RANKS:
            raise BadLine(f"tree entry {tok!r}: rank {v} outside -1..{MAX_RANKS - 1}")
    return vals


def _tree_entry(ch: int, tok: str) -> tuple[TreeEntry, str, str]:
    """(entry, era, note) of one ``[c]`` token of a Trees line."""
    note = ""
    if "|" in tok:  # 2.5-2.7: treeUp "d0/d1/d2->rank->up" | treeDn "up->rank->d0/d1/d2"
        up_s, _, dn_s = tok.partition("|")
        up_p, dn_p = up_s.split("->"), dn_s.split("->")
        if len(up_p) != 3 or len(dn_p) != 3:
            raise BadLine(f"tree entry {tok!r}: expected d/d/d->rank->up|up->rank->d/d/d")
        kids, (rank,), (parent,) = _ints(up_p[0], tok), _ints(up_p[1], tok), _ints(up_p[2], tok)
        dn_parent, dn_rank = _ints(dn_p[0], tok), _ints(dn_p[1], tok)
        if dn_rank != [rank] or len(dn_parent) != 1:
            raise BadLine(f"tree entry {tok!r}: up and down halves name different ranks")
        if dn_parent[0] != parent:
            note = f"channel {ch}: rank {rank}'s down tree parent {dn_parent[0]} differs from "
            note += f"its up tree parent {parent}; the up tree is used"
        era = "2.5-2.7"
    else:
        parts = tok.split("->")
        if len(parts) != 3:
            raise BadLine(f"tree entry {tok!r}: expected children->rank->parent")
        first, mid, last = _ints(parts[0], tok), _ints(parts[1], tok), _ints(parts[2], tok)
        if len(mid) != 1:
            raise BadLine(f"tree entry {tok!r}: expected one rank in the middle")
        rank = mid[0]
        if len(first) == 1 and len(last) > 1:  # 2.4: up->rank->d0/d1/d2
            parent, kids, era = first[0], last, "2.4"
        elif len(last) == 1:  # 2.8+: d0/d1/d2->rank->up
            kids, parent, era = first, last[0], "2.8+"
        else:
            raise BadLine(f"tree entry {tok!r}: expected d0/d1/d2->rank->up")
    if rank < 0 or rank == parent or rank in kids:
        raise BadLine(f"tree entry {tok!r}: a rank is its own parent or child")
    return TreeEntry(ch, rank, parent, tuple(k for k in kids if k >= 0)), era, note


def parse_trees(msg: str, *, cut: bool) -> Trees | None:
    """``Trees [0] ... [1] ...`` in the 2.4, 2.5-2.7 and 2.8+ forms, or a GRAPH ``Tree`` line."""
    g = None if cut else _GRAPH_TREE.match(msg)
    if g is not None:
        ch = _int(g.group(1), "channel", 0, MAX_CHANNELS - 1)
        up, rank = int(g.group(2)), int(g.group(3))
        kids = tuple(int(g.group(i)) for i in (4, 5, 6) if int(g.group(i)) >= 0)
        if not -1 <= up < MAX_RANKS or rank >= MAX_RANKS or rank == up or rank in kids:
            raise BadLine(f"tree {ch}: bad rank or parent")
        return Trees((TreeEntry(ch, rank, up, kids),), "graph", False)
    if msg != "Trees" and not msg.startswith("Trees "):
        return None
    tokens = msg[5:].split()
    entries: list[TreeEntry] = []
    eras: set[str] = set()
    notes: list[str] = []
    partial = cut or len(msg) >= TREES_LINE_LIMIT
    comm = ""
    i = 0
    while i < len(tokens):
        tm = _TREE_TOKEN.match(tokens[i])
        if tm is None:
            tail = _COMM_TAIL.search(" ".join(tokens[i : i + 4]))
            if tail is not None:  # RCCL: "... comm 0x.. nRanks 08 busId .."
                comm = tail.group(1).lower()
                break
            if partial and i >= len(tokens) - 1:
                break
            raise BadLine(f"Trees line: expected [channel] entries, got {tokens[i][:20]!r}")
        if i + 1 >= len(tokens):
            if partial:
                break
            raise BadLine(f"Trees line: channel [{tm.group(1)}] without an entry")
        last = i + 2 >= len(tokens) or _TREE_TOKEN.match(tokens[i + 2]) is None
        if partial and last:
            break  # the last entry of a cut line may itself be cut ("->1" of "->11")
        try:
            entry, era, note = _tree_entry(
                _int(tm.group(1), "channel", 0, MAX_CHANNELS - 1), tokens[i + 1]
            )
        except BadLine:
            if partial and last:
                break  # the cut last entry
            raise
        entries.append(entry)
        eras.add(era)
        if note:
            notes.append(note)
        i += 2
    if not entries:
        if partial:
            return Trees((), "?", True)
        raise BadLine("Trees line without [channel] entries")
    if len(eras) > 1:
        raise BadLine(f"Trees line mixes the formats of NCCL {' and '.join(sorted(eras))}")
    era = eras.pop()
    return Trees(tuple(entries), era, partial, tuple(notes), comm)


def parse_marker(msg: str) -> Marker | None:
    """``Connected all rings`` and the other end-of-connection-phase lines."""
    if not msg.startswith("Connected "):
        return None
    tail = _COMM_TAIL.search(msg)
    comm = tail.group(1).lower() if tail else ""
    if msg.startswith("Connected all rings"):
        return Marker("rings", comm)
    if msg.startswith(("Connected all trees", "Connected binomial trees")):
        return Marker("trees", comm)
    if msg.startswith(
        ("Connected NVLS", "Connected collnet", "Connected Collnet", "Connected all")
    ):
        return Marker("other", comm)
    return None


def parse_version(msg: str) -> Version | None:
    """The library version line."""
    m = _VERSION.match(msg)
    return Version(m.group(1)) if m else None


def parse_pattern(msg: str) -> Pattern | None:
    """A GRAPH search result line."""
    m = _PATTERN.match(msg)
    return Pattern(int(m.group(1)), int(m.group(2))) if m else None


def parse_message(msg: str, *, cut: bool = False) -> Event | None:
    """The event one message carries, ``None`` for the many messages not used here."""
    if msg.startswith(("Channel ", "Ring ")):
        return parse_edge(msg) or parse_triple(msg, cut=cut) or parse_order(msg, cut=cut)
    if msg.startswith("Tree"):
        return parse_trees(msg, cut=cut)
    if msg.startswith("Connected "):
        return parse_marker(msg)
    if msg.startswith("Pattern "):
        return parse_pattern(msg)
    if "version " in msg[:20]:
        return parse_version(msg)
    if "rank " in msg:
        return parse_init(msg, cut=cut)
    return None
