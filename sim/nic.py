"""How a host's NIC shares its line among its flows in one step of the fluid model (``fluid.py``'s
``inject``): max-min, as a NIC's round robin over its queue pairs."""

from __future__ import annotations

import numpy as np


def nic_round_robin(want: np.ndarray, host: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """What each flow puts through its host's NIC in a step: ``want`` (bytes) of flows on hosts
    ``host``, each NIC serving ``cap[host]`` bytes, shared max-min as a NIC's round robin over
    its queue pairs does (every flow gets the same share, a flow that wants less keeps what it
    wants and the rest is shared by the others). Proportional scaling, which this replaced,
    took a flow that DCQCN had cut (but still above its share) further down at the NIC and gave
    its share to the flows not cut; the packet level's NIC never did, and the two engines'
    ECMP + DCQCN on the all-to-all preset were 28 % apart on average (sim/README.md).

    The same allocation as the controller's ``control.congestion.max_min_fill`` with one link
    per flow (its host) and ``want`` as demand (tests/unit/sim/test_sim_nic.py checks it), in
    one sort instead of its freezing rounds: it runs every step, and at 8,192 flows over 1,024
    NICs it takes ~2 ms where the general water-filling takes ~200."""
    n = want.size
    if n == 0:
        return want.copy()
    order = np.lexsort((want, host))
    h = host[order]
    d = want[order]
    starts = np.r_[0, np.flatnonzero(np.diff(h)) + 1]
    sizes = np.diff(np.r_[starts, n])
    grp = np.repeat(np.arange(starts.size), sizes)
    pos = np.arange(n) - starts[grp]
    csum = np.cumsum(d)
    before = csum - d - np.r_[0.0, csum][starts][grp]  # what the smaller flows of the host take
    level = (cap[h] - before) / (sizes[grp] - pos)  # an equal share of what they leave
    # the first flow (by size) that wants more than the equal share of what is left sets the
    # level every larger flow of the host gets
    first = np.minimum.reduceat(np.where(d > level, pos, n), starts)
    at = starts + np.minimum(first, sizes - 1)
    got = np.where(pos < first[grp], d, level[at][grp])
    out = np.empty(n)
    out[order] = got
    return out


def nic_share(inj: np.ndarray, host: np.ndarray, cap: np.ndarray) -> None:
    """Cut ``inj`` (bytes each flow would put on its first link this step; ``host``: its host)
    in place to what the hosts' NICs (``cap`` bytes each) let through, max-min per NIC."""
    tot = np.bincount(host, weights=inj, minlength=cap.size)
    over = tot > cap
    if over.any():
        rows = np.flatnonzero(over[host])
        inj[rows] = nic_round_robin(inj[rows], host[rows], cap)
