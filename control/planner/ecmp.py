"""What ECMP would do with the same flows: per-hop hashing of the RoCEv2 5-tuple.

Stand-in hash (documented, deterministic, not any vendor's): at each switch the flow takes
member ``crc32(src_ip | dst_ip | 17 | udp_sport | 4791 | device_id) % n`` of the equal-cost
next hops, the members ordered by egress port. ``device_id`` salts the hash per switch the way
real fabrics seed each switch differently to avoid polarisation. The UDP source port is the
flow's own when known, otherwise the stand-in of ``Flow.entropy_sport``.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib

import numpy as np

from icefabric.control.ccl.demand import ROCE_UDP_PORT, Flow
from icefabric.control.planner.state import PlanState


def ecmp_hash(src_ip: str, dst_ip: str, sport: int, dport: int, salt: int) -> int:
    """The stand-in switch hash of a UDP 5-tuple with a per-switch salt."""
    key = struct.pack(
        "!IIBHHI",
        int(ipaddress.IPv4Address(src_ip)),
        int(ipaddress.IPv4Address(dst_ip)),
        17,
        sport & 0xFFFF,
        dport & 0xFFFF,
        salt & 0xFFFFFFFF,
    )
    return zlib.crc32(key)


def ecmp_choice(state: PlanState, i: int, flow: Flow) -> int:
    """The candidate index per-hop ECMP hashing gives row ``i`` (-1 when none is live)."""
    cand = state.candidates(i)
    idx = np.nonzero(state.live_mask(cand))[0]
    if idx.size == 0:
        return -1
    topo = state.topo
    src = topo.spec.hosts[topo.host_index[flow.src_host]].address
    dst = topo.spec.hosts[topo.host_index[flow.dst_host]].address
    sport = flow.entropy_sport()
    for j in range(cand.shape[1]):
        if idx.size == 1:
            break
        col = cand[idx, j]
        members = np.unique(col)
        if members.size <= 1:
            continue
        sw = topo.links[int(members[0])].src
        order = sorted(members.tolist(), key=lambda lid: topo.links[lid].src_port)
        salt = topo.switches[sw].device_id
        pick = order[ecmp_hash(src, dst, sport, ROCE_UDP_PORT, salt) % len(order)]
        idx = idx[col == pick]
    return int(idx[0])


def ecmp_loads(state: PlanState) -> np.ndarray:
    """Per-link loads (seconds of line rate) if every live flow followed ECMP's hash instead."""
    load = np.zeros_like(state.load)
    for i in state.live_rows().tolist():
        f = state.flows[i]
        s = state.size[i]
        load[state.host_up[i]] += s * state.invcap[state.host_up[i]]
        load[state.host_down[i]] += s * state.invcap[state.host_down[i]]
        c = ecmp_choice(state, i, f)
        if c < 0:
            continue
        p = state.candidates(i)[c]
        load[p] += s * state.invcap[p]
    load[state.pad] = 0.0
    return load
