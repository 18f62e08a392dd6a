"""ECMP exactly as ``p4src/ice.p4`` computes it in ECMP mode (the one model everyone imports).

What the switches do (``p4src/v1model/control/load_balance.p4`` and ``p4src/common/control/path_select.p4``): the
*first* leaf of a RoCEv2 packet whose destination hangs off another leaf hashes

    bucket = crc32(src_addr:32 ++ dst_addr:32 ++ protocol:8 ++ udp_src_port:16 ++
                   udp_dst_port:16 [++ bth.dst_qp:24]) mod PATH_BUCKETS

(v1model ``hash(..., HashAlgorithm.crc32, base 0, {fields}, max 64)``: BMv2's crc32 is the IEEE
CRC-32 of zlib over the fields packed big-endian, 13 bytes, 16 with the QP; the QP is hashed when
the controller's ``lb_config`` sets ``use_qp_in_hash`` — ``FabricOptions.use_qp_in_hash``, on by
default, E-ECMP). ``path_candidate[(dst leaf, bucket)]`` then names a path tag; the controller
writes all 64 buckets of every destination leaf with :func:`icefabric.control.fabric.bucket_tags`
over the *live* candidates in candidate order, weighted by their bottleneck rate. Every later
switch forwards by the tag, so the first leaf's bucket fixes the whole path. The program has no
per-switch seed (base 0, no salt, the same function on every leaf) and no per-hop choice, so
there is none to model.

Keys: the flow's real UDP source port and destination QP when known (host reports, NCCL logs),
otherwise the stand-ins :meth:`Flow.entropy_sport` / :meth:`Flow.entropy_qp` — the ones
``icectl run`` installs and the senders built from the same flows use.

The hash is vectorised over keys (numpy table-driven CRC-32). Random source-port draws use that
CRC is affine over GF(2) for equal-length inputs: ``crc(m with sport s) = crc(m with sport 0) ^
T[s]`` with ``T[s] = crc(zeros with s) ^ crc(zeros)``, one table of 65,536 entries.
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.demand import SPORT_BASE, SPORT_SPAN, Flow
from icefabric.control.fabric import bucket_tags
from icefabric.control.flowkey import PROTO_UDP, ROCE_UDP_PORT, FlowKey
from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n

SPORT_OFFSET = 9  # byte offset of udp_src_port in the hash input
MODEL_NAME = "ice.p4 ECMP"
MODEL_DESCRIPTION = (
    "ice.p4 ECMP: first-leaf crc32(src_ip, dst_ip, proto, udp_sport, udp_dport{qp}) mod 64 "
    "-> path_candidate bucket -> path tag"
)


def model_description(use_qp_in_hash: bool) -> str:
    """One line naming the model and its fields (for reports: which model made a figure)."""
    return MODEL_DESCRIPTION.format(qp=", dst_qp" if use_qp_in_hash else "")


def ecmp_hash(key: FlowKey, *, use_qp_in_hash: bool = True) -> int:
    """ice.p4's ECMP hash of one key (crc32, before the modulo)."""
    return zlib.crc32(key.hash_input(use_qp_in_hash=use_qp_in_hash)) & 0xFFFFFFFF


def ecmp_bucket(key: FlowKey, *, use_qp_in_hash: bool = True) -> int:
    """The path_candidate bucket ice.p4 computes for ``key``."""
    return ecmp_hash(key, use_qp_in_hash=use_qp_in_hash) % n.PATH_BUCKETS


# ---------------------------------------------------------------------- vectorised CRC-32


def _crc32_table() -> np.ndarray:
    poly = 0xEDB88320
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(poly), table >> 1).astype(np.uint32)
    table.flags.writeable = False
    return table


_TABLE = _crc32_table()  # a constant (never written): the reflected IEEE CRC-32 table


def crc32_rows(data: np.ndarray) -> np.ndarray:
    """zlib's CRC-32 of every row of a [N, L] uint8 array, as uint32 [N]."""
    if data.ndim != 2:
        raise ValueError(f"crc32_rows: expected a [N, L] array, got shape {data.shape}")
    crc = np.full(data.shape[0], 0xFFFFFFFF, dtype=np.uint32)
    d = data.astype(np.uint32)
    for j in range(data.shape[1]):
        crc = _TABLE[(crc ^ d[:, j]) & 0xFF] ^ (crc >> 8)
    out: np.ndarray = crc ^ np.uint32(0xFFFFFFFF)
    return out


def hash_inputs(
    src_ip: np.ndarray,
    dst_ip: np.ndarray,
    sport: np.ndarray,
    qp: np.ndarray,
    *,
    use_qp_in_hash: bool,
    dport: int = ROCE_UDP_PORT,
    protocol: int = PROTO_UDP,
) -> np.ndarray:
    """The hash input bytes of many keys (IPv4 addresses as integers), [N, 13 or 16] uint8."""
    k = src_ip.shape[0]
    width = 16 if use_qp_in_hash else 13
    out = np.zeros((k, width), dtype=np.uint8)
    s = src_ip.astype(np.uint64)
    d = dst_ip.astype(np.uint64)
    p = sport.astype(np.uint64)
    q = qp.astype(np.uint64)
    for b in range(4):
        out[:, b] = (s >> np.uint64(24 - 8 * b)) & np.uint64(0xFF)
        out[:, 4 + b] = (d >> np.uint64(24 - 8 * b)) & np.uint64(0xFF)
    out[:, 8] = protocol & 0xFF
    out[:, 9] = (p >> np.uint64(8)) & np.uint64(0xFF)
    out[:, 10] = p & np.uint64(0xFF)
    out[:, 11] = (dport >> 8) & 0xFF
    out[:, 12] = dport & 0xFF
    if use_qp_in_hash:
        out[:, 13] = (q >> np.uint64(16)) & np.uint64(0xFF)
        out[:, 14] = (q >> np.uint64(8)) & np.uint64(0xFF)
        out[:, 15] = q & np.uint64(0xFF)
    return out


def sport_table(*, use_qp_in_hash: bool) -> np.ndarray:
    """T[s] = crc(zeros with UDP source port s) ^ crc(zeros), for every s < 65536 (uint32)."""
    width = 16 if use_qp_in_hash else 13
    z = np.zeros((1 << 16, width), dtype=np.uint8)
    s = np.arange(1 << 16, dtype=np.uint32)
    z[:, SPORT_OFFSET] = s >> 8
    z[:, SPORT_OFFSET + 1] = s & 0xFF
    crc = crc32_rows(z)
    out: np.ndarray = crc ^ crc[0]
    return out


# ---------------------------------------------------------------------- the model


@dataclass(slots=True, frozen=True, kw_only=True)
class EcmpDraws:
    """ECMP's max fabric-link load over random UDP source-port draws (seconds at line rate)."""

    n: int
    seed: int
    bound_s: float  # a lower bound on the max fabric-link load (cut bound)
    median_s: float
    p99_s: float
    worst_s: float
    best_s: float
    p_above_bound: float  # fraction of draws where some fabric link carries more than bound_s
    max_load_s: tuple[float, ...]  # every draw's max fabric-link load, in draw order

    def summary(self) -> dict[str, float | int]:
        """The distribution without the per-draw list (for tables and JSON)."""
        return {
            "n": self.n,
            "seed": self.seed,
            "bound_s": self.bound_s,
            "median_s": self.median_s,
            "p99_s": self.p99_s,
            "worst_s": self.worst_s,
            "best_s": self.best_s,
            "p_above_bound": self.p_above_bound,
        }


class EcmpModel:
    """ice.p4's ECMP path choice on one topology (live candidates as the controller writes them).

    Caches each leaf pair's 64-bucket member table; build a new model after links fail or heal.
    """

    def __init__(self, topo: Topology, *, use_qp_in_hash: bool = True) -> None:
        self.topo = topo
        self.use_qp_in_hash = use_qp_in_hash
        self._rates = np.array([ln.rate_gbps for ln in topo.links], dtype=np.float64)
        self._members: dict[tuple[str, str], np.ndarray] = {}
        self._wrr: dict[tuple[float, ...], np.ndarray] = {}
        self._sport_t: np.ndarray | None = None

    @property
    def description(self) -> str:
        """Which model this is, in one line."""
        return model_description(self.use_qp_in_hash)

    def members(self, src_leaf: str, dst_leaf: str) -> np.ndarray:
        """Per bucket, the stable candidate index path_candidate names ([64]; empty: none live)."""
        key = (src_leaf, dst_leaf)
        got = self._members.get(key)
        if got is not None:
            return got
        if src_leaf == dst_leaf:
            out = np.zeros(n.PATH_BUCKETS, dtype=np.int64)  # no tag: the one "path" of no links
        else:
            arr, idx = self.topo.live_candidates(src_leaf, dst_leaf)
            if idx.size == 0:
                out = np.zeros(0, dtype=np.int64)
            else:
                weights = tuple(float(w) for w in self._rates[arr].min(axis=1).tolist())
                wrr = self._wrr.get(weights)
                if wrr is None:
                    order = bucket_tags(list(range(len(weights))), weights, n.PATH_BUCKETS)
                    wrr = np.array(order, dtype=np.int64)
                    self._wrr[weights] = wrr
                out = idx[wrr]
        self._members[key] = out
        return out

    def path_index(self, src_leaf: str, dst_leaf: str, key: FlowKey) -> int:
        """The stable candidate index ice.p4 sends ``key`` along (-1: no live candidate)."""
        m = self.members(src_leaf, dst_leaf)
        if m.size == 0:
            return -1
        return int(m[ecmp_bucket(key, use_qp_in_hash=self.use_qp_in_hash)])

    def flow_path_index(self, flow: Flow) -> int:
        """The candidate index of ``flow`` under ECMP (its real key, else the stand-ins)."""
        t = self.topo
        return self.path_index(
            t.leaf_of[flow.src_host], t.leaf_of[flow.dst_host], FlowKey.of_flow(t, flow)
        )

    # ------------------------------------------------------------ many flows at once

    def _row_keys(
        self, state: PlanState, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        t = self.topo
        src = np.empty(rows.size, dtype=np.uint64)
        dst = np.empty(rows.size, dtype=np.uint64)
        sport = np.empty(rows.size, dtype=np.uint64)
        qp = np.empty(rows.size, dtype=np.uint64)
        addr = {h.name: int(ipaddress.IPv4Address(h.address)) for h in t.spec.hosts}
        for k, i in enumerate(rows.tolist()):
            f = state.flows[i]
            src[k] = addr[f.src_host]
            dst[k] = addr[f.dst_host]
            sport[k] = f.entropy_sport()
            qp[k] = f.entropy_qp()
        return src, dst, sport, qp

    def bucket_paths(self, state: PlanState, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(member table [rows, 64] of global path ids, paths [P, hops] of link ids, pad-filled).

        Path id 0 is the empty path (same leaf) and -1 in the table means no live candidate.
        """
        leaves = self.topo.leaves
        pad = state.pad
        gid: dict[tuple[int, int], np.ndarray] = {}
        paths: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        table = np.empty((rows.size, n.PATH_BUCKETS), dtype=np.int64)
        for k, i in enumerate(rows.tolist()):
            pair = (int(state.src_leaf[i]), int(state.dst_leaf[i]))
            g = gid.get(pair)
            if g is None:
                a, b = leaves[pair[0]], leaves[pair[1]]
                m = self.members(a, b)
                if a == b:
                    g = np.zeros(n.PATH_BUCKETS, dtype=np.int64)
                elif m.size == 0:
                    g = np.full(n.PATH_BUCKETS, -1, dtype=np.int64)
                else:
                    cand = self.topo.candidate_array(a, b)
                    used = np.unique(m)
                    base = len(paths)
                    paths.extend(cand[c] for c in used.tolist())
                    g = base + np.searchsorted(used, m)
                gid[pair] = g
            table[k] = g
        width = max((p.size for p in paths), default=0)
        parr = np.full((len(paths) + 1, max(width, 1)), pad, dtype=np.int64)  # last row: none
        for j, p in enumerate(paths):
            parr[j, : p.size] = p
        table[table < 0] = len(paths)
        return table, parr

    def row_buckets(self, state: PlanState, rows: np.ndarray) -> np.ndarray:
        """The path_candidate bucket of every row's actual key (vectorised crc32)."""
        src, dst, sport, qp = self._row_keys(state, rows)
        data = hash_inputs(src, dst, sport, qp, use_qp_in_hash=self.use_qp_in_hash)
        out: np.ndarray = (crc32_rows(data) % np.uint32(n.PATH_BUCKETS)).astype(np.int64)
        return out

    def choices(self, state: PlanState, rows: np.ndarray | None = None) -> np.ndarray:
        """The ECMP candidate index of every row (live rows by default; -1: none live)."""
        r = state.live_rows() if rows is None else rows
        out = np.full(r.size, -1, dtype=np.int64)
        for k, i in enumerate(r.tolist()):
            out[k] = self.flow_path_index(state.flows[i])
        return out

    def loads(self, state: PlanState) -> np.ndarray:
        """Per-link loads (seconds of line rate, pad entry 0) if ECMP placed every live flow."""
        rows = state.live_rows()
        load = np.zeros_like(state.load)
        if rows.size == 0:
            return load
        size = state.size[rows]
        np.add.at(load, state.host_up[rows], size * state.invcap[state.host_up[rows]])
        np.add.at(load, state.host_down[rows], size * state.invcap[state.host_down[rows]])
        bucket = self.row_buckets(state, rows)
        table, parr = self.bucket_paths(state, rows)
        links = parr[table[np.arange(rows.size), bucket]]  # [rows, hops]
        w = size[:, None] * state.invcap[links]
        np.add.at(load, links.ravel(), w.ravel())
        load[state.pad] = 0.0
        return load

    def draws(
        self,
        state: PlanState,
        *,
        n_draws: int,
        seed: int,
        fabric: np.ndarray,
        bound_s: float,
        chunk: int = 0,
    ) -> EcmpDraws:
        """ECMP's max fabric-link load when every flow's UDP source port is drawn at random.

        Each draw gives every live flow an independent source port, uniform over the range
        the stand-ins use (49152-65535), keeping its addresses and QP. ``fabric`` masks the
        links that count ([n_links + 1] bool, pad False). Seeded: the same seed, the same draws.
        """
        if n_draws < 1:
            raise ValueError(f"draws: expected >= 1, got {n_draws}")
        rows = state.live_rows()
        rng = np.random.default_rng(seed)
        nl = state.pad + 1
        maxes = np.zeros(n_draws)
        if rows.size:
            if self._sport_t is None:
                self._sport_t = sport_table(use_qp_in_hash=self.use_qp_in_hash)
            src, dst, _sport, qp = self._row_keys(state, rows)
            zero = np.zeros(rows.size, dtype=np.uint64)
            base = crc32_rows(hash_inputs(src, dst, zero, qp, use_qp_in_hash=self.use_qp_in_hash))
            table, parr = self.bucket_paths(state, rows)
            size = state.size[rows]
            fab_ids = np.flatnonzero(fabric)
            step = chunk or max(1, min(n_draws, 4_000_000 // max(rows.size * parr.shape[1], 1)))
            ar = np.arange(rows.size)[:, None]
            for d0 in range(0, n_draws, step):
                d1 = min(n_draws, d0 + step)
                # draw-major, so that how the draws are chunked does not change them
                sp = rng.integers(SPORT_BASE, SPORT_BASE + SPORT_SPAN, size=(d1 - d0, rows.size)).T
                bucket = ((base[:, None] ^ self._sport_t[sp]) % np.uint32(n.PATH_BUCKETS)).astype(
                    np.int64
                )
                links = parr[table[ar, bucket]]  # [rows, draws, hops]
                w = size[:, None, None] * state.invcap[links]
                flat = (np.arange(d1 - d0)[None, :, None] * nl + links).ravel()
                load = np.bincount(flat, weights=w.ravel(), minlength=(d1 - d0) * nl)
                load = load.reshape(d1 - d0, nl)
                maxes[d0:d1] = load[:, fab_ids].max(axis=1) if fab_ids.size else 0.0
        tol = bound_s * 1e-9 + 1e-15
        return EcmpDraws(
            n=n_draws,
            seed=seed,
            bound_s=bound_s,
            median_s=float(np.median(maxes)),
            p99_s=float(np.quantile(maxes, 0.99)),
            worst_s=float(maxes.max()),
            best_s=float(maxes.min()),
            p_above_bound=float(np.mean(maxes > bound_s + tol)),
            max_load_s=tuple(float(x) for x in maxes.tolist()),
        )


def ecmp_choice(state: PlanState, i: int, flow: Flow, *, use_qp_in_hash: bool = True) -> int:
    """The candidate index ice.p4's ECMP gives row ``i`` (-1 when none is live)."""
    del i  # the flow carries everything the hash reads
    return EcmpModel(state.topo, use_qp_in_hash=use_qp_in_hash).flow_path_index(flow)


def ecmp_loads(state: PlanState, *, use_qp_in_hash: bool = True) -> np.ndarray:
    """Per-link loads (seconds of line rate) if every live flow followed ice.p4's ECMP."""
    return EcmpModel(state.topo, use_qp_in_hash=use_qp_in_hash).loads(state)


def ecmp_paths(
    topo: Topology, flows: Sequence[Flow], *, use_qp_in_hash: bool = True
) -> dict[str, int]:
    """{flow id: candidate index ice.p4's ECMP sends it along} (-1: no live candidate)."""
    model = EcmpModel(topo, use_qp_in_hash=use_qp_in_hash)
    return {f.flow_id: model.flow_path_index(f) for f in flows}
