"""`make bench` part: how fast the NCCL log importer reads big and hostile logs.

Writes an NCCL 2.19-format log of RANKS ranks (8 per host, CHANNELS ring channels, trees),
with rank 0's order lines cut at 20 ranks as NCCL does, so every ring is rebuilt from the
connection lines; then 1 MiB lines built to make a backtracking parser quadratic. Prints lines
per second and checks that the rings read back are the rings written.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence

from icefabric.control.ccl.nccl_log import parse_nccl_log
from icefabric.control.cli.common import int_range


def synth_log(ranks: int, channels: int, seed: int = 1) -> tuple[list[str], list[list[int]]]:
    """A 2.19-format log and the rings it was written from."""
    rng = random.Random(seed)
    per_host = 8
    hosts = ranks // per_host
    rings: list[list[int]] = []
    for _ in range(channels):
        order = list(range(hosts))
        rng.shuffle(order)
        ring = [h * per_host + g for h in order for g in range(per_host)]
        i = ring.index(0)
        rings.append(ring[i:] + ring[:i])
    lines: list[str] = []

    def pre(r: int) -> str:
        return f"node{r // per_host:04d}:{1000 + r}:{1000 + r} [{r % per_host}] NCCL INFO "

    for r in range(ranks):
        lines.append(
            f"{pre(r)}comm 0x{0x5500000 + r:x} rank {r} nranks {ranks} cudaDev {r % per_host} "
            f"nvmlDev {r % per_host} busId 1a000 commId 0xfeed - Init START"
        )
    for c, ring in enumerate(rings):
        lines.append(
            f"{pre(0)}Channel {c:02d}/{channels:02d} : " + "".join(f" {x:3d}" for x in ring[:20])
        )
    for r in range(ranks):
        for c, ring in enumerate(rings):
            i = ring.index(r)
            nxt, prv = ring[(i + 1) % ranks], ring[i - 1]
            if nxt // per_host != r // per_host:
                lines.append(f"{pre(r)}Channel {c:02d}/0 : {r}[0] -> {nxt}[0] [send] via NET/IB/0")
            else:
                lines.append(f"{pre(r)}Channel {c:02d}/0 : {r}[0] -> {nxt}[1] via P2P/CUMEM/read")
            if prv // per_host != r // per_host:
                lines.append(
                    f"{pre(r)}Channel {c:02d}/0 : {prv}[0] -> {r}[0] [receive] via NET/IB/0"
                )
        lines.append(f"{pre(r)}Connected all rings")
        lines.append(
            f"{pre(r)}comm 0x{0x5500000 + r:x} rank {r} nranks {ranks} cudaDev {r % per_host} "
            f"nvmlDev {r % per_host} busId 1a000 commId 0xfeed - Init COMPLETE"
        )
    return lines, rings


def _ranks(text: str) -> int:
    value = int_range(8, 1 << 20)(text)
    if value % 8:
        raise argparse.ArgumentTypeError(
            f"expected a multiple of 8 (8 ranks per host), got {text!r}"
        )
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit 1 if the rings read back differ from the rings written."""
    p = argparse.ArgumentParser(prog="python -m icefabric.control.ccl.nccl.bench")
    p.add_argument("--ranks", type=_ranks, default=4096, help="ranks, 8 per host (a multiple of 8)")
    p.add_argument("--channels", type=int_range(1, 64), default=8, help="rings (1..64)")
    args = p.parse_args(argv)
    lines, rings = synth_log(args.ranks, args.channels)
    t0, c0 = time.perf_counter(), time.process_time()
    log = parse_nccl_log(lines, source="bench.log")
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    c = log.select()
    ok = c.rings == {i: tuple(r) for i, r in enumerate(rings)} and not log.warnings
    print(
        f"nccl log: {args.ranks} ranks, {args.channels} channels, {len(lines)} lines "
        f"({sum(map(len, lines)) / 1e6:.1f} MB) in {dt:.2f} s wall, {cpu:.2f} s CPU = "
        f"{len(lines) / cpu:,.0f} lines per CPU second; "
        f"rings rebuilt from connection lines: {'all match' if ok else 'MISMATCH'}"
    )
    hostile = ["a" * (1 << 20), "a:1:" * (1 << 18), "[0] NCCL INFO " * 70000]
    c0 = time.process_time()
    parse_nccl_log(hostile, source="hostile.log")
    print(f"nccl log: 3 hostile 1 MiB lines in {time.process_time() - c0:.2f} s CPU")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
