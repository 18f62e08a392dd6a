"""Start rates for the flows no plan covers: what the plan leaves on the links they may take.

A flow the controller does not know (storage, checkpoints, another tenant's traffic) gets no
path and no cap: ice.p4's flowlet / ECMP fallback puts it on one of the candidate paths between
its leaves, and its end-side control (HPCC's rule) starts it at the line rate and cuts it once
INT records show the queue it built. On links the plan already fills, that queue stands for
a round trip or more, behind the planned flows' frames too.

The controller knows what its caps put on every link, so it can tell each host, per
destination prefix, the rate an unplanned flow can start at without overloading any link it
might be hashed onto: the smallest residual (capacity at the rate target, less the active
flows' caps) over the source host's uplink and every link of every live candidate path
between the two leaves. The destination host's own downlink is not counted (the table is per
leaf, not per host, to stay small; a receiver's downlink is the end side's to find, at the
first record). Prefixes whose start would be the host's line rate are left out (the default
start, HPCC's). The agent starts a flow of no job that has not sent yet and has no cap at its
prefix's rate (traffic/agent.py); the end-side rule then governs it as before, rising into
capacity the planned flows leave idle.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import numpy as np

from icefabric.control.topology import Topology

#: a start table entry: destination prefix (CIDR text) and start rate in bit/s
Start = tuple[str, float]


def pair_residuals(
    topo: Topology,
    residual_bps: np.ndarray,
    pairs: Iterable[tuple[str, str]] | None = None,
) -> dict[tuple[str, str], float]:
    """The smallest residual over every live candidate path's links, per ordered leaf pair
    (every pair, or ``pairs``; links of failed paths do not count: ECMP does not hash onto
    them; a leaf to itself: inf)."""
    res = np.asarray(residual_bps, dtype=np.float64).copy()
    res[topo.failed[: res.size]] = np.inf
    out: dict[tuple[str, str], float] = {}
    memo: dict[int, float] = {}

    def low(arr: np.ndarray) -> float:
        key = id(arr)
        if key not in memo:
            memo[key] = float(res[arr].min()) if arr.size else np.inf
        return memo[key]

    todo = pairs if pairs is not None else ((a, b) for a in topo.leaves for b in topo.leaves)
    for a, b in todo:
        if (a, b) in out:
            continue
        if a == b:
            out[(a, b)] = np.inf
            continue
        halves = topo.candidate_halves(a, b)
        if halves is not None:
            out[(a, b)] = min(low(halves[0]), low(halves[1]))
        else:
            paths, _ = topo.live_candidates(a, b)
            out[(a, b)] = float(res[paths].min()) if paths.size else 0.0
    return out


def unplanned_starts(
    topo: Topology,
    residual_bps: np.ndarray,
    hosts: Iterable[str] | None = None,
    *,
    target: float = 1.0,
) -> dict[str, tuple[Start, ...]]:
    """Each host's start table (module docstring): destination prefixes with the rate in bit/s
    an unplanned flow to them starts at, lowest first; prefixes where the host's line at the
    rate ``target`` fits are left out (nothing the caps placed limits them).

    ``residual_bps``: per directed link, the capacity the active flows' caps leave at the rate
    target (:attr:`RateAllocator.residual_bps`)."""
    res = np.maximum(np.asarray(residual_bps, dtype=np.float64), 0.0)
    chosen = topo.spec.hosts if hosts is None else [topo.spec.host(n) for n in hosts]
    nets = leaf_prefixes(topo)
    # only the pairs from the chosen hosts' leaves (a push to a few hosts needs few rows)
    pairs = pair_residuals(topo, res, ((h.leaf, b) for h in chosen for b in nets))
    out: dict[str, tuple[Start, ...]] = {}
    for host in chosen:
        up = topo.host_uplink(host.name)
        line = float(topo.capacity[up]) * 8.0 * target
        by_rate: dict[float, list[ipaddress.IPv4Network]] = {}
        for leaf, prefixes in nets.items():
            rate = min(float(res[up]), pairs[(host.leaf, leaf)])
            if rate < line * (1 - 1e-9):
                by_rate.setdefault(rate, []).extend(prefixes)
        out[host.name] = tuple(
            (str(net), rate)
            for rate in sorted(by_rate)
            for net in ipaddress.collapse_addresses(by_rate[rate])
        )
    return out


def leaf_prefixes(topo: Topology) -> dict[str, list[ipaddress.IPv4Network]]:
    """Each leaf's destinations as prefixes: the subnet its hosts are configured in when
    it holds them all and no other leaf's host, else one /32 per host."""
    hosts: dict[str, list[ipaddress.IPv4Interface]] = {leaf: [] for leaf in topo.leaves}
    for h in topo.spec.hosts:
        hosts.setdefault(h.leaf, []).append(ipaddress.IPv4Interface(str(h.ip)))
    names = list(hosts)
    ips = np.array([int(i.ip) for leaf in names for i in hosts[leaf]], dtype=np.int64)
    owner = np.repeat(np.arange(len(names)), [len(hosts[leaf]) for leaf in names])
    out: dict[str, list[ipaddress.IPv4Network]] = {}
    for k, leaf in enumerate(names):
        subnets = {i.network for i in hosts[leaf]}
        net = next(iter(subnets)) if len(subnets) == 1 else None
        if net is not None and net.prefixlen > 0:
            inside = (ips & int(net.netmask)) == int(net.network_address)
            if not np.any(inside & (owner != k)):
                out[leaf] = [net]
                continue
        out[leaf] = [ipaddress.IPv4Network(i.ip) for i in hosts[leaf]]
    return out
