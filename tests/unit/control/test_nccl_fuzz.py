"""Seeded fuzzing of NCCL log lines: no input makes the importer raise, hang or allocate much."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from _nccl_loggen import Comm, layout, nccl_rings, nccl_trees, write_log

from icefabric.control.ccl.nccl_log import parse_nccl_log, to_job

_TOKENS = [
    "NCCL INFO ",
    "RCCL INFO ",
    " [0] ",
    "[1,0]<stdout>:",
    "Channel ",
    "Ring ",
    "Trees ",
    "Tree 3 : ",
    " -> ",
    "->",
    "|",
    "/",
    " via NET/IB/0",
    " [send]",
    " [receive]",
    "comm 0x1 rank ",
    " nranks ",
    " nRanks ",
    "commId 0x",
    "parent 0x1 color ",
    "Connected all rings",
    "Connected all trees",
    "Init START",
    "Init COMPLETE",
    "Destroy COMPLETE",
    "...",
    "99999999999999",
    "-1",
    "4294967296",
    "\x00",
    "\ufffd",
    "h:1:1 [0] NCCL INFO ",
    " " * 200,
]


def _mutate(rng: random.Random, line: str) -> str:
    op = rng.randrange(7)
    if not line:
        return rng.choice(_TOKENS)
    i = rng.randrange(len(line) + 1)
    if op == 0:  # insert a token NCCL prints
        return line[:i] + rng.choice(_TOKENS) + line[i:]
    if op == 1:  # cut
        return line[:i]
    if op == 2:  # delete a span
        return line[:i] + line[i + rng.randrange(1, 20) :]
    if op == 3:  # a number becomes another number
        return "".join(
            str(rng.choice([0, 1, -1, 7, 21, 1 << 20, 10**12]))
            if c.isdigit() and rng.random() < 0.3
            else c
            for c in line
        )
    if op == 4:  # random bytes
        return line[:i] + "".join(chr(rng.randrange(32, 0x250)) for _ in range(5)) + line[i:]
    if op == 5:  # repeat a piece
        return line[:i] + line[i : i + 30] * rng.randrange(2, 50) + line[i:]
    return line + line  # two messages on one line


@pytest.mark.timeout(120)
def test_mutated_logs_never_raise() -> None:
    rng = random.Random(20240501)
    bases = []
    for version in ("2.3", "2.4", "2.7", "2.12", "2.19", "2.23"):
        procs = layout(3, 4)
        comm = Comm(procs, nccl_rings(12, 4, 2, seed=1), nccl_trees(12, 4, 2), graph_lines=True)
        bases.append(write_log(version, [comm], style=rng.choice(["plain", "mpirun", "pdsh"])))
    for _ in range(150):
        lines = list(rng.choice(bases))
        for _ in range(rng.randrange(1, 40)):
            k = rng.randrange(len(lines))
            lines[k] = _mutate(rng, lines[k])
        if rng.random() < 0.2:
            rng.shuffle(lines)
        log = parse_nccl_log(lines, source="fuzz.log")
        assert all(w.line >= 1 for w in log.warnings)
        for comm in log.comms:
            for coll in ("all-reduce", "all-to-all", "send-recv"):
                try:
                    job = to_job(comm, name="f", collective=coll, message_bytes=1 << 20)
                except ValueError:
                    continue
                assert len(job.ranks) == comm.nranks


@pytest.mark.timeout(60)
def test_hostile_sizes_stay_small() -> None:
    lines = [
        "h:1:1 [0] NCCL INFO comm 0x1 rank 1048575 nranks 1048576 cudaDev 0 commId 0x1 - Init START",
        "h:1:1 [0] NCCL INFO Channel 1023/1024 :" + " 1048575" * 10,
        "h:1:1 [0] NCCL INFO Trees" + " [1023] 1048574/-1/-1->1048575->-1" * 20,
        "h:1:1 [0] NCCL INFO Channel 1023/0 : 1048575[0] -> 0[0] via P2P/IPC",
    ]
    tracemalloc.start()
    try:
        log = parse_nccl_log(lines)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20  # one missing-rank list of 2^20 entries at most
    (c,) = log.comms
    assert c.nranks == 1 << 20 and len(c.ranks) == 1
