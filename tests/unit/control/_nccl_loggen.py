"""Write NCCL_DEBUG=INFO logs the way each NCCL version prints them, from rings and trees we choose.

The format strings follow NCCL's source of each release (src/init.cc, src/graph/rings.cc,
src/graph/connect.cc, src/transport/{net,p2p,shm}.cc, src/transport/generic.cc); the tests parse
what this writes and compare with the rings and trees given here.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field


def _v(version: str) -> tuple[int, int]:
    a, b = version.split(".")[:2]
    return int(a), int(b)


@dataclass
class Comm:
    """One communicator: which process runs each rank, its rings and trees."""

    procs: list[tuple[str, int, int]]  # rank -> (host, pid, cudaDev)
    rings: list[list[int]]
    trees: list[dict[int, int]] = field(default_factory=list)  # channel -> {rank: parent}
    comm_id: int = 0x5EED0001
    ptr_base: int = 0x55D4C8000000
    graph_lines: bool = False  # NCCL_DEBUG_SUBSYS=GRAPH: Ring/Tree triples
    order_lines: bool = True


def bus(dev: int) -> str:
    return f"{0x1A000 + 0x1000 * dev:x}"


def order_line(version: str, ch: int, nch: int, ring: list[int]) -> str:
    """Rank 0's ring order line (rings.cc dumpLine) as the message after 'NCCL INFO '."""
    v = _v(version)
    n = len(ring)
    if v >= (2, 23):
        prefix = f"Channel {ch:02d}/{nch:02d} :"
        width = len(str(n - 1))
        text = prefix
        for r in ring:
            if len(text) >= 127:
                break
            text += f" {r:>{width}d}"
        if len(text) > 127:
            text = text[:124] + "..."
        return text
    if v < (2, 4):
        prefix = f"Ring {ch:02d} : "
    elif v < (2, 5):
        prefix = f"Channel {ch:02d} : "
    else:
        prefix = f"Channel {ch:02d}/{nch:02d} : "
    buf = [" "] * 115
    buf[: min(15, len(prefix))] = prefix[:15]
    plen = len(prefix)
    for i, r in enumerate(ring[:20]):
        s = f" {r:3d}"
        for k, c in enumerate(s):
            pos = plen + 4 * i + k
            if pos < len(buf):
                buf[pos] = c
            else:
                buf.append(c)
    return "".join(buf)


def _children(tree: dict[int, int], r: int) -> list[int]:
    kids = sorted(k for k, p in tree.items() if p == r)
    assert len(kids) <= 3
    return kids + [-1] * (3 - len(kids))


def trees_line(version: str, rank: int, trees: list[dict[int, int]]) -> str:
    v = _v(version)
    parts = []
    for c, t in enumerate(trees):
        up = t[rank]
        d = _children(t, rank)
        if v < (2, 5):
            parts.append(f" [{c}] {up}->{rank}->{d[0]}/{d[1]}/{d[2]}")
        elif v < (2, 8):
            parts.append(
                f" [{c}] {d[0]}/{d[1]}/{d[2]}->{rank}->{up}|{up}->{rank}->{d[0]}/{d[1]}/{d[2]}"
            )
        else:
            parts.append(f" [{c}] {d[0]}/{d[1]}/{d[2]}->{rank}->{up}")
    return "Trees" + "".join(parts)[:1023]


def conn_lines(version: str, comm: Comm, c: int, src: int, dst: int, me: int) -> list[str]:
    """Lines rank ``me`` prints when connecting src -> dst on channel c (me is src or dst)."""
    v = _v(version)
    hs, _, ds = comm.procs[src]
    hd, _, dd = comm.procs[dst]
    net = hs != hd
    if not net and me != src:
        return []  # P2P/SHM print on the sending side only
    if v < (2, 4):
        if net:
            return [f"Ring {c:02d} : {src} -> {dst} via NET/IB/0"] if me == dst else []
        return [f"Ring {c:02d} : {src}[{ds}] -> {dst}[{dd}] via P2P/IPC"]
    side = "[send]" if me == src else "[receive]"
    if v < (2, 5):
        if net:
            return [f"Ring {c:02d} : {src} -> {dst} {side} via NET/IB/0"]
        return [f"Ring {c:02d} : {src}[{ds}] -> {dst}[{dd}] via P2P/IPC"]
    bs, bd = bus(ds), bus(dd)
    if v < (2, 7):
        if net:
            return [f"Ring {c:02d} : {src}[{bs}] -> {dst}[{bd}] {side} via NET/IB/0"]
        return [f"Ring {c:02d} : {src}[{bs}] -> {dst}[{bd}] via P2P/IPC"]
    if v < (2, 12):
        if net:
            return [f"Channel {c:02d} : {src}[{bs}] -> {dst}[{bd}] {side} via NET/IB/0/GDRDMA"]
        return [f"Channel {c:02d} : {src}[{bs}] -> {dst}[{bd}] via P2P/IPC"]
    if v < (2, 19):
        if net:
            return [f"Channel {c:02d}/0 : {src}[{bs}] -> {dst}[{bd}] {side} via NET/IB/0/GDRDMA"]
        return [f"Channel {c:02d} : {src}[{bs}] -> {dst}[{bd}] via P2P/IPC/read"]
    if net:
        return [f"Channel {c:02d}/0 : {src}[{ds}] -> {dst}[{dd}] {side} via NET/IB/1/GDRDMA"]
    return [f"Channel {c:02d}/0 : {src}[{ds}] -> {dst}[{dd}] via P2P/CUMEM/read"]


def rank_messages(version: str, comm: Comm, rank: int) -> list[str]:
    """Every message rank ``rank`` of ``comm`` prints during init, in NCCL's order."""
    v = _v(version)
    n = len(comm.procs)
    host, _pid, dev = comm.procs[rank]
    ptr = f"0x{comm.ptr_base + 0x1000 * rank:x}"
    cid = f"0x{comm.comm_id:x}"
    out: list[str] = []
    if rank == 0:
        out.append(f"NCCL version {version}.3+cuda12.2")
    func = "ncclCommInitRank " if v >= (2, 23) else ""
    if v >= (2, 18):
        out.append(
            f"{func}comm {ptr} rank {rank} nranks {n} cudaDev {dev} nvmlDev {dev} busId {bus(dev)} "
            f"commId {cid} - Init START"
        )
    if v >= (2, 23):
        hosts = list(dict.fromkeys(p[0] for p in comm.procs))
        local = [r for r in range(n) if comm.procs[r][0] == host]
        out.append(
            f"comm {ptr} rank {rank} nRanks {n} nNodes {len(hosts)} localRanks {len(local)} "
            f"localRank {local.index(rank)} MNNVL 0"
        )
    nch = len(comm.rings)
    if rank == 0 and comm.order_lines:
        out += [order_line(version, c, nch, ring) for c, ring in enumerate(comm.rings)]
    if comm.graph_lines:
        for c, ring in enumerate(comm.rings):
            i = ring.index(rank)
            out.append(f"Ring {c:02d} : {ring[i - 1]} -> {rank} -> {ring[(i + 1) % n]}")
        for c, t in enumerate(comm.trees):
            d = _children(t, rank)
            out.append(f"Tree {c} : {t[rank]} -> {rank} -> {d[0]}/{d[1]}/{d[2]}")
        out.append("Pattern 4, crossNic 0, nChannels 2, bw 40.000000/40.000000, type NVL/PIX")
    if comm.trees and v >= (2, 4):
        out.append(trees_line(version, rank, comm.trees))

    def ring_conns(c: int) -> list[str]:
        ring = comm.rings[c]
        i = ring.index(rank)
        prev, nxt = ring[i - 1], ring[(i + 1) % n]
        return conn_lines(version, comm, c, prev, rank, rank) + conn_lines(
            version, comm, c, rank, nxt, rank
        )

    def tree_conns(c: int) -> list[str]:
        if c >= len(comm.trees):
            return []
        t = comm.trees[c]
        kids = [k for k in _children(t, rank) if k >= 0]
        up = t[rank]
        lines: list[str] = []
        for k in kids:  # tree up: receive from children, send to parent
            lines += conn_lines(version, comm, c, k, rank, rank)
        if up >= 0:
            lines += conn_lines(version, comm, c, rank, up, rank)
            lines += conn_lines(version, comm, c, up, rank, rank)  # tree down
        for k in kids:
            lines += conn_lines(version, comm, c, rank, k, rank)
        return lines

    if v >= (2, 8):
        for c in range(nch):
            out += ring_conns(c)
        out.append("Connected all rings")
        for c in range(nch):
            out += tree_conns(c)
        if comm.trees:
            out.append("Connected all trees")
    else:
        for c in range(nch):
            out += ring_conns(c) + tree_conns(c)
    if v < (2, 4):
        out.append(f"comm {ptr} rank {rank} nranks {n} - COMPLETE")
    elif v < (2, 5):
        out.append(f"comm {ptr} rank {rank} nranks {n} cudaDev {dev} nvmlDev {dev} - Init COMPLETE")
    elif v < (2, 18):
        out.append(
            f"comm {ptr} rank {rank} nranks {n} cudaDev {dev} busId {bus(dev)} - Init COMPLETE"
        )
    else:
        out.append(
            f"{func}comm {ptr} rank {rank} nranks {n} cudaDev {dev} nvmlDev {dev} busId {bus(dev)} "
            f"commId {cid} - Init COMPLETE"
        )
    return out


def wrap(
    style: str, host: str, pid: int, dev: int, msg: str, rank: int, k: int, lib: str = "NCCL"
) -> str:
    """One physical line with the launcher's prefix."""
    core = f"{host}:{pid}:{pid} [{dev}] {lib} INFO {msg}"
    if style == "pdsh":
        return f"{host}: {core}"
    if style == "mpirun":
        return f"[1,{rank}]<stdout>:{core}"
    if style == "timestamp":
        return f"2024-05-01T10:{k // 60 % 60:02d}:{k % 60:02d}.{k % 1000:03d} {core}"
    return core


def write_log(
    version: str,
    comms: list[Comm],
    *,
    style: str = "plain",
    seed: int = 1,
    cuts: int = 0,
    noise: bool = True,
    lib: str = "NCCL",
) -> list[str]:
    """The physical lines of a log of ``comms`` (initialised one after another per process)."""
    rng = random.Random(seed)
    per_proc: dict[tuple[str, int, int], list[tuple[int, str]]] = {}
    for comm in comms:
        for r, proc in enumerate(comm.procs):
            per_proc.setdefault(proc, []).extend((r, m) for m in rank_messages(version, comm, r))
    queues = {p: list(ms) for p, ms in per_proc.items()}
    lines: list[str] = []
    k = 0
    while any(queues.values()):
        p = rng.choice([q for q in queues if queues[q]])
        r, msg = queues[p].pop(0)
        lines.append(wrap(style, p[0], p[1], p[2], msg, r, k, lib))
        k += 1
        if noise and rng.random() < 0.05:
            lines.append(f"{p[0]}: some other program's output {k}")
    done: set[int] = set()
    for _ in range(cuts):  # another process's line lands in the middle of one
        for _try in range(100):
            i = rng.randrange(len(lines) - 1)
            a, b = lines[i], lines[i + 1]
            if (
                a.count(" INFO ") == 1
                and b.count(" INFO ") == 1
                and i not in done
                and i + 1 not in done
                and a.split(":")[:2] != b.split(":")[:2]
            ):
                done.update({i, i + 1})
                at = (
                    a.index(" INFO ") + 6 + rng.randrange(1, max(2, len(a) - a.index(" INFO ") - 6))
                )
                m = re.search(r"[A-Za-z0-9_.-]+:\d+:\d+ \[", a)
                wrapper = a[: m.start()] if m else ""
                lines[i : i + 2] = [a[:at] + b, wrapper + a[at:]]
                break
    return lines


def layout(hosts: int, per_host: int, *, pid0: int = 1000) -> list[tuple[str, int, int]]:
    """Rank -> (host, pid, dev) for ``hosts`` nodes of ``per_host`` GPUs."""
    return [(f"node{h:02d}", pid0 + h * 100 + g, g) for h in range(hosts) for g in range(per_host)]


def nccl_rings(n: int, per_host: int, nch: int, seed: int) -> list[list[int]]:
    """Rings like NCCL's: through each host's GPUs in some order, hosts in some order."""
    rng = random.Random(seed)
    hosts = n // per_host
    rings = []
    for _ in range(nch):
        order = list(range(hosts))
        rng.shuffle(order)
        ring: list[int] = []
        for h in order:
            gpus = list(range(h * per_host, (h + 1) * per_host))
            rng.shuffle(gpus)
            ring += gpus
        i = ring.index(0)
        rings.append(ring[i:] + ring[:i])
    return rings


def nccl_trees(n: int, per_host: int, nch: int) -> list[dict[int, int]]:
    """Trees like NCCL's: a chain inside each host, a binary tree over hosts, two mirrored roots."""
    hosts = n // per_host
    trees = []
    for c in range(nch):
        t: dict[int, int] = {}
        order = list(range(hosts)) if c % 2 == 0 else list(reversed(range(hosts)))
        for i, h in enumerate(order):
            first = h * per_host
            parent_host = order[(i - 1) // 2] if i > 0 else None
            t[first] = parent_host * per_host if parent_host is not None else -1
            for g in range(1, per_host):
                t[first + g] = first + g - 1
        trees.append(t)
    return trees
