"""Demand: the network flows a job creates, from a job description or a parsed CCL log.

Volumes per phase (S = ``message_bytes`` as nccl-tests counts it, n ranks, C channels; every
channel carries 1/C of the data on its own ring/tree and its own queue pairs):

* ring all-reduce: each channel's ring sends rank i -> next, 2(n-1)/n * S / C bytes;
* ring all-gather / reduce-scatter: (n-1)/n * S / C per ring hop;
* tree all-reduce: per channel, every tree edge carries S / C up (reduce) and S / C down
  (broadcast); default trees are binary trees over the phase's ranks, rotated by one rank per
  channel so the channels use different edges (NCCL's double binary tree has the same effect);
* halving-doubling (n a power of two): reduce-scatter step k exchanges S / 2^(k+1) with the
  partner at distance n / 2^(k+1); all-gather is the reverse; all-reduce is both;
* all-to-all: every ordered pair, S / n / C;
* send-recv (pipeline): every (src, dst) pair, S / C.

Ranks on the same host talk over the host's own links (NVLink, PCIe), so those hops give no
network flow. Flows of the same rank pair, phase and channel are one queue pair, so one flow.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from icefabric.control.ccl.job import JobSpec, Phase

SPORT_BASE = 49152  # stand-in UDP source ports: SPORT_BASE + crc32(flow_id) % SPORT_SPAN
SPORT_SPAN = 16384
QP_BASE = 0x100  # QP numbers below this are special (0: SMI, 1: GSI) or low in practice


def stand_in_sport(flow_id: str) -> int:
    """The stand-in UDP source port of a flow whose NIC did not report one."""
    return SPORT_BASE + zlib.crc32(flow_id.encode()) % SPORT_SPAN


def stand_in_qp(flow_id: str) -> int:
    """The stand-in destination QP of a flow whose NIC did not report one (24 bits)."""
    return QP_BASE + zlib.crc32(f"qp:{flow_id}".encode()) % ((1 << 24) - QP_BASE)


@dataclass(slots=True, frozen=True, kw_only=True)
class Flow:
    """One network flow (one RoCEv2 queue pair's traffic) of one phase of one job."""

    flow_id: str
    job: str
    phase: str
    channel: int
    src_host: str
    dst_host: str
    src_rank: int
    dst_rank: int
    bytes: float
    udp_sport: int | None = None  # RoCEv2 UDP source port when known (set by the NIC per QP)
    qp: int | None = None  # destination queue pair number when known

    def entropy_sport(self) -> int:
        """The UDP source port, or a deterministic stand-in (49152 + crc32(flow_id) % 16384)."""
        return self.udp_sport if self.udp_sport is not None else stand_in_sport(self.flow_id)

    def entropy_qp(self) -> int:
        """The destination QP, or a deterministic 24-bit stand-in from the flow id."""
        return self.qp if self.qp is not None else stand_in_qp(self.flow_id)


@dataclass(slots=True, frozen=True)
class Demand:
    """The flows of one or more jobs."""

    flows: tuple[Flow, ...] = field(default_factory=tuple)

    @property
    def jobs(self) -> tuple[str, ...]:
        """The job names, in first-seen order."""
        return tuple(dict.fromkeys(f.job for f in self.flows))

    @property
    def total_bytes(self) -> float:
        """The sum of all flow volumes."""
        return float(sum(f.bytes for f in self.flows))

    def __len__(self) -> int:
        return len(self.flows)

    def __iter__(self) -> Iterator[Flow]:
        return iter(self.flows)

    def merge(self, *others: Demand) -> Demand:
        """This demand plus others (flow ids must stay unique)."""
        flows = list(self.flows)
        seen = {f.flow_id for f in flows}
        for o in others:
            for f in o.flows:
                if f.flow_id in seen:
                    raise ValueError(f"flow {f.flow_id!r} appears twice")
                seen.add(f.flow_id)
                flows.append(f)
        return Demand(tuple(flows))

    def of_job(self, job: str) -> Demand:
        """Only the flows of ``job``."""
        return Demand(tuple(f for f in self.flows if f.job == job))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {"flows": [asdict(f) for f in self.flows]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Demand:
        """The inverse of :meth:`to_dict`."""
        return cls(tuple(Flow(**f) for f in data["flows"]))


def flow_id(job: str, phase: str, channel: int, src: int, dst: int) -> str:
    """The id of the flow from rank ``src`` to rank ``dst`` on ``channel`` of ``phase``."""
    return f"{job}/{phase}/c{channel}/r{src}->r{dst}"


def demand_from_job(job: JobSpec) -> Demand:
    """Every network flow of every phase of ``job``."""
    flows: dict[tuple[str, int, int, int], Flow] = {}
    for phase in job.phases:
        for ch, src, dst, vol in phase_transfers(phase):
            hs, hd = job.ranks[src].host, job.ranks[dst].host
            if hs == hd or vol <= 0:
                continue
            key = (phase.name, ch, src, dst)
            old = flows.get(key)
            if old is not None:
                flows[key] = replace(old, bytes=old.bytes + vol)
                continue
            flows[key] = Flow(
                flow_id=flow_id(job.name, phase.name, ch, src, dst),
                job=job.name,
                phase=phase.name,
                channel=ch,
                src_host=hs,
                dst_host=hd,
                src_rank=src,
                dst_rank=dst,
                bytes=vol,
            )
    return Demand(tuple(flows.values()))


def demand_from_jobs(jobs: Iterable[JobSpec]) -> Demand:
    """The flows of several jobs together (job names must differ)."""
    out = Demand()
    for j in jobs:
        out = out.merge(demand_from_job(j))
    return out


def default_tree(order: tuple[int, ...], channel: int) -> dict[int, int]:
    """A binary tree over ``order`` rotated by ``channel``: {rank: parent}, root's parent -1."""
    n = len(order)
    rot = [order[(i + channel) % n] for i in range(n)]
    return {rot[i]: (rot[(i - 1) // 2] if i else -1) for i in range(n)}


def phase_transfers(phase: Phase) -> Iterator[tuple[int, int, int, float]]:
    """(channel, src rank, dst rank, bytes) for every rank-to-rank transfer of ``phase``."""
    ranks = phase.ranks
    n = len(ranks)
    c_n = phase.channels
    size = float(phase.message_bytes)
    coll, alg = phase.collective, phase.algorithm
    if coll == "send-recv":
        for ch in range(c_n):
            for s, d in phase.pairs:
                yield ch, s, d, size / c_n
        return
    if coll == "all-to-all":
        for ch in range(c_n):
            for s in ranks:
                for d in ranks:
                    if s != d:
                        yield ch, s, d, size / n / c_n
        return
    if alg == "ring":
        factor = 2.0 * (n - 1) / n if coll == "all-reduce" else (n - 1) / n
        for ch in range(c_n):
            ring = phase.rings[ch] if phase.rings else ranks
            for i in range(n):
                yield ch, ring[i], ring[(i + 1) % n], factor * size / c_n
        return
    if alg == "tree":
        for ch in range(c_n):
            tree = phase.trees[ch] if phase.trees else default_tree(ranks, ch)
            for r, parent in tree.items():
                if parent >= 0:
                    yield ch, r, parent, size / c_n
                    yield ch, parent, r, size / c_n
        return
    if alg == "halving-doubling":
        steps = n.bit_length() - 1
        for ch in range(c_n):
            for k in range(steps):
                dist = n >> (k + 1)
                vol = size / (1 << (k + 1)) / c_n
                reps = 2 if coll == "all-reduce" else 1
                for i in range(n):
                    yield ch, ranks[i], ranks[i ^ dist], vol * reps
        return
    raise ValueError(f"phase {phase.name!r}: no transfer model for {coll} {alg}")
