"""One communicator while a log is read: rings rebuilt, trees checked, instances merged.

Communicators without a commId (NCCL < 2.18) are first one instance per process; ``merge_anon``
joins them (see its docstring). ``finish_comm`` turns what was collected into rings (the order
line, else the connection lines and GRAPH triples) and drops trees that do not form one tree.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from icefabric.control.ccl.nccl.formats import Order
from icefabric.control.ccl.nccl.model import CommLog, NcclLog, ranges

Stream = tuple[str, int, int]  # host, pid, device


@dataclass(slots=True)
class CommWork:
    """What is known about one communicator (or one process's instance of it) while parsing."""

    log: CommLog
    orders: dict[int, tuple[Order, int]] = field(default_factory=dict)
    succ: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)  # ch->src->(dst,l)
    tree_lines: dict[tuple[int, int], int] = field(default_factory=dict)
    edge_kinds: dict[int, set[str]] = field(default_factory=dict)  # channel -> where from
    streams: set[Stream] = field(default_factory=set)
    id_kind: str = "anon"
    idents: set[str] = field(default_factory=set)  # cudaDev, nvmlDev, busId of its ranks
    peers: list[tuple[int, str, bool]] = field(default_factory=list)  # (rank, dev, any host)


def add_edge(
    out: NcclLog, work: CommWork, ch: int, src: int, dst: int, line: int, kind: str = ""
) -> None:
    """Record ``src -> dst`` on channel ``ch``; a second, different successor is a warning."""
    work.edge_kinds.setdefault(ch, set()).add(kind or "connection lines")
    succ = work.succ.setdefault(ch, {})
    prev = succ.get(src)
    if prev is not None and prev[0] != dst:
        out.warn(
            line,
            f"channel {ch}: rank {src} sends to {dst} but line {prev[1]} says {prev[0]}",
        )
        return
    if prev is None:
        succ[src] = (dst, line)


def merge_anon(comms: dict[str, CommWork], out: NcclLog) -> None:
    """Join per-process instances into communicators.

    Evidence first: a connection line of one instance names its peer's rank and device
    (cudaDev, busId or nvmlDev, on the same host for P2P/SHM); a unique instance matching
    them is in the same communicator. Instances left over join, in log order, the first
    group of the same size whose ranks and processes they do not repeat.
    """
    keys = [k for k, w in comms.items() if w.id_kind == "anon"]
    if not keys:
        return
    by_rank: dict[tuple[int, int], list[str]] = {}
    for k in keys:
        w = comms[k]
        for r in w.log.ranks:
            by_rank.setdefault((w.log.nranks, r), []).append(k)
    root = {k: k for k in keys}

    def find(k: str) -> str:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    for k in keys:
        w = comms[k]
        hosts = {i.host for i in w.log.ranks.values()}
        for peer, dev, net in w.peers:
            cands = [
                x
                for x in by_rank.get((w.log.nranks, peer), [])
                if x != k
                and (not dev or dev in comms[x].idents)
                and (net or {i.host for i in comms[x].log.ranks.values()} & hosts)
            ]
            if len(cands) == 1:
                root[find(k)] = find(cands[0])
    comps: dict[str, list[str]] = {}
    for k in keys:
        comps.setdefault(find(k), []).append(k)
    groups: list[list[str]] = []
    for members in comps.values():  # an ambiguous component is split where it repeats
        parts: list[list[str]] = []
        for k in sorted(members, key=lambda x: comms[x].log.first_line):
            for part in parts:
                if _compatible(comms, part, [k]):
                    part.append(k)
                    break
            else:
                parts.append([k])
        groups += parts
    groups.sort(key=lambda g: min(comms[k].log.first_line for k in g))
    merged: list[list[str]] = []
    guessed: list[int] = []  # indices of merged groups joined by order alone
    for g in groups:
        for i, m in enumerate(merged):
            if _compatible(comms, m, g):
                m += g
                guessed.append(i)
                break
        else:
            merged.append(list(g))
    sizes = [comms[g[0]].log.nranks for g in merged]
    unsure = sorted({i for i in guessed if sizes.count(sizes[i]) > 1})
    for n, g in enumerate(merged, start=1):
        base = comms.pop(g[0])
        for k in g[1:]:
            absorb(out, base, comms.pop(k))
        base.log.key = f"anon-{n}"
        comms[base.log.key] = base
    if unsure:
        names = ", ".join(f"anon-{i + 1}" for i in unsure)
        out.notes.append(
            f"{out.source}: communicators {names}: some processes were grouped by "
            "rank count and log order only (no commId before NCCL 2.18, and their connection "
            "lines name no peer device); communicators of the same size may be mixed"
        )


def _compatible(comms: dict[str, CommWork], a: list[str], b: list[str]) -> bool:
    wa, wb = [comms[k] for k in a], [comms[k] for k in b]
    if wa[0].log.nranks != wb[0].log.nranks:
        return False
    ra = [r for w in wa for r in w.log.ranks]
    rb = [r for w in wb for r in w.log.ranks]
    if set(ra) & set(rb) or len(ra) + len(rb) > wa[0].log.nranks:
        return False
    sa = set().union(*(w.streams for w in wa))
    return not sa & set().union(*(w.streams for w in wb))


def absorb(out: NcclLog, a: CommWork, b: CommWork) -> None:
    """Merge ``b`` (another instance of the same communicator) into ``a``."""
    la, lb = a.log, b.log
    for r, info in lb.ranks.items():
        la.ranks.setdefault(r, info)
    la.first_line = min(la.first_line, lb.first_line)
    a.streams |= b.streams
    for ch, (o, line) in b.orders.items():
        cur = a.orders.get(ch)
        if cur is None or len(o.ranks) > len(cur[0].ranks):
            a.orders[ch] = (o, line)
    for ch, m in b.succ.items():
        kinds = b.edge_kinds.get(ch, {"connection lines"})
        for src, (dst, line) in m.items():
            add_edge(out, a, ch, src, dst, line, sorted(kinds)[0])
        a.edge_kinds.setdefault(ch, set()).update(kinds)
    for ch, t in lb.trees.items():
        tree = la.trees.setdefault(ch, {})
        for r, par in t.items():
            line = b.tree_lines.get((ch, r), lb.first_line)
            old = tree.get(r)
            if old is not None and old != par:
                out.warn(line, f"tree {ch}: rank {r} parent {par} differs from {old}")
                continue
            tree[r] = par
            a.tree_lines.setdefault((ch, r), line)
    la.tree_format = la.tree_format or lb.tree_format
    la.n_channels = la.n_channels or lb.n_channels


def finish_comm(out: NcclLog, work: CommWork, versions: dict[tuple[str, int], str]) -> None:
    """Version, rings per channel, missing ranks and tree checks of one communicator."""
    log = work.log
    for (host, pid), ver in versions.items():
        if any(r.host == host and r.pid == pid for r in log.ranks.values()):
            log.version = ver
            break
    for ch in sorted(set(work.orders) | set(work.succ)):
        _ring(out, work, ch)
    if log.n_channels is None and log.rings:
        log.n_channels = max(log.rings) + 1
    missing = log.missing_ranks()
    if missing:
        out.warn(
            log.first_line,
            f"communicator {log.key}: no init line for {len(missing)} of {log.nranks} "
            f"ranks: {ranges(missing)}",
        )
    for ch, tree in list(log.trees.items()):
        if len(tree) != log.nranks:
            continue
        why = tree_problem(tree)
        if why:
            line = min(work.tree_lines.get((ch, r), log.first_line) for r in tree)
            out.warn(line, f"communicator {log.key}: tree {ch}: {why}; not used")
            del log.trees[ch]


def _ring(out: NcclLog, work: CommWork, ch: int) -> None:
    log = work.log
    n = log.nranks
    order = work.orders.get(ch)
    succ = {s: d for s, (d, _) in work.succ.get(ch, {}).items()}
    if order is not None and not order[0].partial and len(order[0].ranks) == n:
        ring = order[0].ranks
        log.rings[ch], log.ring_sources[ch] = ring, "order line"
        pos = {r: i for i, r in enumerate(ring)}
        bad = [s for s, d in succ.items() if ring[(pos[s] + 1) % n] != d]
        if bad:
            out.warn(
                order[1],
                f"channel {ch}: the connection lines of ranks {ranges(sorted(bad))} "
                "disagree with this ring order; the order line is used",
            )
        return
    prefix = order[0].ranks if order is not None else ()
    walked = walk(prefix, succ, n)
    if walked is not None:
        log.rings[ch] = walked
        kinds = " + ".join(sorted(work.edge_kinds.get(ch, set())))
        log.ring_sources[ch] = kinds if not prefix else f"order line + {kinds}"
        return
    first = order[1] if order is not None else min(x[1] for x in work.succ[ch].values())
    have = len(succ)
    why = (
        f"the connection lines give the next rank of only {have} of {n} ranks"
        if have < n
        else "the connection lines do not form one ring through every rank"
    )
    out.warn(
        first,
        f"communicator {log.key}: channel {ch}: ring order "
        + (f"cut at {len(prefix)} of {n} ranks" if order is not None else "not printed")
        + f" and {why}: the ring cannot be rebuilt (log every rank with NCCL_DEBUG=INFO)",
    )


def walk(prefix: tuple[int, ...], succ: dict[int, int], n: int) -> tuple[int, ...] | None:
    """The ring through ``prefix`` following ``succ``; one missing link is closed if unique."""
    for a, b in itertools.pairwise(prefix):
        if succ.get(a, b) != b:
            return None
        succ.setdefault(a, b)
    if len(succ) == n - 1:  # one rank's connection lines are missing: its link is forced
        no_succ = [r for r in range(n) if r not in succ]
        no_pred = set(range(n)) - set(succ.values())
        if len(no_succ) == 1 and len(no_pred) == 1:
            succ[no_succ[0]] = no_pred.pop()
    if len(succ) != n:
        return None
    start = prefix[0] if prefix else min(succ)
    ring = [start]
    x = succ[start]
    while x != start and len(ring) <= n:
        ring.append(x)
        x = succ.get(x, -1)
        if x == -1:
            return None
    if x != start or len(ring) != n or len(set(ring)) != n:
        return None
    return tuple(ring)


def same_cycle(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    if len(a) != len(b) or set(a) != set(b):
        return False
    i = b.index(a[0])
    return a == b[i:] + b[:i]


def tree_problem(tree: dict[int, int]) -> str:
    roots = [r for r, p in tree.items() if p == -1]
    if len(roots) != 1:
        return f"expected one root, found {len(roots)}"
    ok: set[int] = {-1}
    for r in tree:  # linear: every rank is walked once, then known to reach the root
        path: list[int] = []
        on_path: set[int] = set()
        x = r
        while x not in ok:
            if x in on_path or x not in tree:
                return f"parent links from rank {r} never reach the root"
            path.append(x)
            on_path.add(x)
            x = tree[x]
        ok.update(path)
    return ""
