"""Max-min fair rates by progressive filling (water-filling), vectorised with numpy.

Every unfrozen flow's rate rises at the same pace; when a link is full, every flow crossing it
freezes at the current level (that link is its bottleneck); a flow whose demand is met freezes
at its demand (a demand is a link of its own). Links are taken in the order they fill (a heap
of fair shares with lazy updates: a share only grows as other links freeze flows); the links
that fill at one level are one batch, and a batch costs array work on the entries of the flows
it freezes only, so the whole fill touches every (flow, link) entry about once, however many
distinct levels there are.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable, Mapping, Sequence
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
    # a duplicated (flow, link) entry would count the flow twice on the link
    if fe.size:
        pair, _ = _unique_counts(fe * np.int64(cap.size) + le)
        fe, le = pair // cap.size, pair % cap.size
    no_links = np.bincount(fe, minlength=n_flows) == 0
    rate[no_links] = dem[no_links]
    # A finite demand is a link of its own that only its flow crosses.
    capped = np.flatnonzero(np.isfinite(dem) & ~no_links)
    n_links = cap.size + capped.size
    fe = np.concatenate([fe, capped])
    le = np.concatenate([le, cap.size + np.arange(capped.size, dtype=np.int64)])
    avail = np.concatenate([cap, dem[capped]])  # capacity less what frozen flows took
    order = np.argsort(fe, kind="stable")
    fe, le = fe[order], le[order]
    flow_ptr = np.concatenate([[0], np.cumsum(np.bincount(fe, minlength=n_flows))])
    by_link = np.argsort(le, kind="stable")
    count = np.bincount(le, minlength=n_links)  # unfrozen flows per link
    link_ptr = np.concatenate([[0], np.cumsum(count)])
    _progressive_fill(fe, le, flow_ptr, by_link, link_ptr, avail, count, rate, ~no_links)
    return rate


def _unique_counts(
    a: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Sorted distinct values and how often each occurs (sort-based: numpy 2's hashing
    np.unique is several times slower on these arrays)."""
    if a.size == 0:
        return a, np.zeros(0, dtype=np.int64)
    srt = np.sort(a)
    first = np.flatnonzero(np.concatenate(([True], srt[1:] != srt[:-1])))
    counts = np.diff(np.append(first, srt.size))
    return srt[first], counts


def _rows(ptr: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Positions of every item of CSR ``rows`` (concatenated ranges ptr[r]..ptr[r+1])."""
    starts, ends = ptr[rows], ptr[rows + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    out: npt.NDArray[np.int64] = np.arange(total, dtype=np.int64) + offsets
    return out


def _progressive_fill(
    fe: npt.NDArray[np.int64],
    le: npt.NDArray[np.int64],
    flow_ptr: npt.NDArray[np.int64],
    by_link: npt.NDArray[np.int64],
    link_ptr: npt.NDArray[np.int64],
    avail: npt.NDArray[np.float64],
    count: npt.NDArray[np.int64],
    rate: npt.NDArray[np.float64],
    active: npt.NDArray[np.bool_],
) -> None:
    """Bottleneck order: the link whose fair share (capacity left / unfrozen flows) is least
    fills first and freezes its flows at that share; the shares of the other links of those
    flows can only grow, so a heap whose entries are lower bounds finds the next one (an entry
    that is out of date when it comes up goes back with the current share). Links that fill at
    the same level are taken in one batch (one round of array work per distinct level)."""
    used = np.flatnonzero(count)
    share = avail[used] / count[used]
    heap = list(zip(share.tolist(), used.tolist(), strict=True))  # Python floats: fast compares
    heapq.heapify(heap)
    level = 0.0
    slack = 1 + REL_EPS
    while heap:
        t, lk = heapq.heappop(heap)
        n = int(count[lk])
        if n == 0:
            continue
        now = max(float(avail[lk]) / n, level)
        if now > t * slack:  # stale: its share grew since it was pushed
            heapq.heappush(heap, (now, lk))
            continue
        level = now
        batch = [lk]
        while heap and heap[0][0] <= level * slack:
            _, l2 = heapq.heappop(heap)
            n2 = int(count[l2])
            if n2 == 0:
                continue
            now2 = float(avail[l2]) / n2
            if now2 <= level * slack:
                batch.append(l2)
            else:
                heapq.heappush(heap, (now2, l2))
        if len(batch) == 1:  # the flows of one link are distinct
            flows = fe[by_link[link_ptr[lk] : link_ptr[lk + 1]]]
            flows = flows[active[flows]]
        else:
            links = np.array(batch, dtype=np.int64)
            flows = fe[by_link[_rows(link_ptr, links)]]
            flows, _ = _unique_counts(flows[active[flows]])
        if flows.size == 0:
            count[batch] = 0
            continue
        rate[flows] = level
        active[flows] = False
        touched, times = _unique_counts(le[_rows(flow_ptr, flows)])
        # Shares of the touched links only grow: their heap entries are now low, and a low
        # entry is re-pushed with its current share when it comes up (no push per update).
        avail[touched] -= times * level
        count[touched] -= times


def _link_index(chain: Iterable[L], links: list[L], count: int) -> npt.NDArray[np.int64]:
    """The position in ``links`` of every link id of the paths (ValueError naming one that has
    no capacity); integer ids go through a lookup array instead of a dict."""
    if links and all(type(lk) is int for lk in links):
        keys = np.array(links, dtype=np.int64)
        if keys.min() >= 0 and keys.max() < 16 * len(links) + 1024:
            lut = np.full(int(keys.max()) + 1, -1, dtype=np.int64)
            lut[keys] = np.arange(keys.size, dtype=np.int64)
            try:
                raw = np.fromiter(chain, dtype=np.int64, count=count)
            except (TypeError, ValueError):
                raise ValueError("paths: expected integer link ids like the capacities") from None
            bad = (raw < 0) | (raw >= lut.size)
            idx = np.where(bad, -1, lut[np.where(bad, 0, raw)])
            if np.any(idx < 0):
                raise ValueError(f"paths: link {int(raw[np.argmax(idx < 0)])!r} has no capacity")
            return idx
    index = {lk: i for i, lk in enumerate(links)}
    try:
        return np.fromiter((index[lk] for lk in chain), dtype=np.int64, count=count)
    except KeyError as exc:
        raise ValueError(f"paths: link {exc.args[0]!r} has no capacity") from None


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
    lengths = np.fromiter((len(paths[f]) for f in flows), dtype=np.int64, count=len(flows))
    chain = itertools.chain.from_iterable(paths[f] for f in flows)
    link_of_entry = _link_index(chain, links, int(lengths.sum()))
    flow_of_entry = np.repeat(np.arange(len(flows), dtype=np.int64), lengths)
    cap = np.fromiter((float(capacity[lk]) for lk in links), dtype=np.float64, count=len(links))
    dem = None
    if demand is not None:
        dem = np.fromiter(
            (float(demand.get(f, np.inf)) for f in flows), dtype=np.float64, count=len(flows)
        )
    rates = max_min_fill(flow_of_entry, link_of_entry, cap, len(flows), dem)
    return dict(zip(flows, rates.tolist(), strict=True))
