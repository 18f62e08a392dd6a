"""Max-min fair rates by progressive filling (water-filling), vectorised with numpy.

Every unfrozen flow's rate rises at the same pace; when a link is full, every flow crossing it
freezes at the current level (that link is its bottleneck); a flow whose demand is met freezes
at its demand. Each round costs O(entries of the unfrozen flows) array work and freezes at
least one link's or one demand's flows, so the number of rounds is the number of distinct
bottleneck levels (a few dozen on a planned fabric), not the number of flows.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

F = TypeVar("F", bound=Hashable)
L = TypeVar("L", bound=Hashable)

REL_EPS = 1e-9  # a link with less than this fraction of its capacity left counts as full


def max_min_fill(
    flow_of_entry: npt.NDArray[np.int64],
    link_of_entry: npt.NDArray[np.int64],
    capacity: npt.NDArray[np.float64],
    n_flows: int,
    demand: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """The max-min fair rate of each flow, arrays in and out.

    ``flow_of_entry[i]`` crosses ``link_of_entry[i]`` (one entry per flow and link on its path);
    ``capacity[l]`` in bit/s; ``demand[f]`` bounds a flow (``inf`` or None: no bound). A flow
    that crosses no link and has no finite demand gets ``inf``.
    """
    cap = np.asarray(capacity, dtype=np.float64)
    if cap.ndim != 1 or np.any(~np.isfinite(cap)) or np.any(cap < 0):
        raise ValueError("capacity: expected finite values >= 0, one per link")
    fe = np.asarray(flow_of_entry, dtype=np.int64)
    le = np.asarray(link_of_entry, dtype=np.int64)
    if fe.shape != le.shape:
        raise ValueError("flow_of_entry and link_of_entry must have the same length")
    if fe.size and (fe.min() < 0 or fe.max() >= n_flows or le.min() < 0 or le.max() >= cap.size):
        raise ValueError("entry refers to a flow or link outside the arrays")
    dem = (
        np.full(n_flows, np.inf) if demand is None else np.asarray(demand, dtype=np.float64).copy()
    )
    if dem.shape != (n_flows,) or np.any(np.isnan(dem)) or np.any(dem < 0):
        raise ValueError("demand: expected one value >= 0 (or inf) per flow")
    rate = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=bool)
    # a duplicated (flow, link) entry would count the flow twice on the link
    if fe.size:
        pair = np.unique(fe * np.int64(cap.size) + le)
        fe, le = pair // cap.size, pair % cap.size
    no_links = np.bincount(fe, minlength=n_flows) == 0
    rate[no_links] = dem[no_links]
    active[no_links] = False
    remaining = cap.copy()
    tol = cap * REL_EPS
    level = 0.0
    while fe.size:
        on_link = np.bincount(le, minlength=cap.size)
        used = on_link > 0
        share = np.full(cap.size, np.inf)
        share[used] = remaining[used] / on_link[used]
        link_step = share.min()
        act_idx = np.flatnonzero(active)
        dem_step = (dem[act_idx] - level).min() if act_idx.size else np.inf
        step = max(0.0, min(link_step, dem_step))
        level += step
        remaining[used] -= step * on_link[used]
        full = used & (remaining <= tol)
        if link_step <= dem_step:  # the links that set this step are full
            full |= used & (share <= link_step * (1 + REL_EPS))
        frozen = np.zeros(n_flows, dtype=bool)
        frozen[fe[full[le]]] = True
        frozen[act_idx[dem[act_idx] <= level * (1 + REL_EPS)]] = True
        frozen &= active
        if not frozen.any():  # numerical safety: never loop without progress
            frozen = active.copy()
        rate[frozen] = np.minimum(level, dem[frozen])
        active &= ~frozen
        keep = active[fe]
        fe, le = fe[keep], le[keep]
    return rate


def max_min_rates(
    paths: Mapping[F, Sequence[L]],
    capacity: Mapping[L, float],
    demand: Mapping[F, float] | None = None,
) -> dict[F, float]:
    """Max-min fair rates (bit/s) of flows over their paths: ``{flow: [link ids]}``,
    ``{link: bit/s}``, optional ``{flow: bit/s}`` demands (a flow without one is unbounded).

    A link of a path missing from ``capacity`` is a ValueError naming it.
    """
    flows = list(paths)
    links = list(capacity)
    index = {lk: i for i, lk in enumerate(links)}
    lengths = np.fromiter((len(paths[f]) for f in flows), dtype=np.int64, count=len(flows))
    try:
        link_of_entry = np.fromiter(
            (index[lk] for lk in itertools.chain.from_iterable(paths[f] for f in flows)),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
    except KeyError as exc:
        raise ValueError(f"paths: link {exc.args[0]!r} has no capacity") from None
    flow_of_entry = np.repeat(np.arange(len(flows), dtype=np.int64), lengths)
    cap = np.fromiter((float(capacity[lk]) for lk in links), dtype=np.float64, count=len(links))
    dem = None
    if demand is not None:
        dem = np.fromiter(
            (float(demand.get(f, np.inf)) for f in flows), dtype=np.float64, count=len(flows)
        )
    rates = max_min_fill(flow_of_entry, link_of_entry, cap, len(flows), dem)
    return dict(zip(flows, rates.tolist(), strict=True))
