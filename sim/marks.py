"""The queue depth ice.p4's ECN marking sees: the depth a packet met when it was *enqueued*.

``p4src/v1model/control/ecn.p4`` marks on ``enq_qdepth``, so the mark a packet carries out of a
queue is decided by the queue it joined, and it reaches the receiver only after the packet has
waited through that queue: marks lag the queue by its drain time and keep coming while a deep
queue drains below Kmin. In the fluid model the bytes leaving a link in a step are the ones whose
cumulative arrival index has just been served: a byte with index ``D(t)`` (the link's cumulative
departures now) arrived in the first step ``tau`` where the cumulative arrivals ``A(tau)``
reached it, and it met a queue of the bytes served between then and now, ``D(t) - D(tau)``
(FIFO). :class:`EnqueueDepth` keeps ``A`` and ``D`` of every link for the last ``history``
steps and answers that depth.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
SHORT_TAIL = 16  # tails up to this many entries are compared together


class EnqueueDepth:
    """Per link: the queue (bytes) the bytes leaving it in this step met at enqueue.

    ``history`` steps of cumulative arrivals and departures are kept; a byte that waited longer
    is taken as arrived at the oldest step kept (its depth is underestimated). Only links whose
    queue was above ``floor`` at some step in the history and that sent something in this step
    are looked up; the others' depth is their queue now (at or below ``floor`` for the whole
    history: no mark either way; or nothing left them).
    """

    def __init__(self, n_links: int, history: int) -> None:
        if history < 1:
            raise ValueError(f"EnqueueDepth: history must be >= 1 step, got {history}")
        self.history = history
        self._arr = np.zeros((history, n_links))
        self._dep = np.zeros((history, n_links))
        self._last_over = np.full(n_links, -history - 1, dtype=np.int64)
        # per link: every entry of a step before this one is below the byte that last left it
        # (cumulative departures only grow, so it stays below every later one): only the entries
        # after it are compared again, a few steps' worth where queues are short
        self._below = np.zeros(n_links, dtype=np.int64)
        self._steps = 0

    def update(self, queue: FloatArray, departed: FloatArray, floor: FloatArray) -> FloatArray:
        """Record one step (``queue`` now and cumulative ``departed`` bytes per link, arrivals
        being their sum) and return each link's enqueue depth of what left it in this step."""
        h = self.history
        slot = self._steps % h
        arrived = queue + departed
        self._arr[slot] = arrived
        self._dep[slot] = departed
        self._steps += 1
        self._last_over[queue > floor] = self._steps
        depth = queue.copy()
        sent = departed > self._dep[(slot - 1) % h] if self._steps > 1 else departed > 0
        links = np.flatnonzero((self._steps - self._last_over < h) & sent)
        if links.size == 0:
            return depth
        n = min(self._steps, h)
        first = self._steps - n  # the step of the oldest entry kept
        dep_now = departed[links]
        thr = dep_now - 1e-9
        known = np.clip(self._below[links] - first, 0, n)
        # steps kept whose arrivals had not yet reached the byte leaving now (A is nondecreasing,
        # so they are the oldest ones): the byte arrived in the next one; counted over the
        # entries not yet known to be below, tails of ``span`` entries, short tails together
        before = known.copy()
        rest = n - known
        for sel in (rest <= SHORT_TAIL, rest > SHORT_TAIL):
            if not sel.any():
                continue
            span = int(rest[sel].max())
            if span == 0:
                continue
            pos = np.arange(n - span, n)  # window positions of the tail
            arr = self._arr[np.ix_((first + pos) % h, links[sel])]
            fresh = pos[:, None] >= known[sel]
            below = (arr < thr[sel]) & fresh
            before[sel] += below.sum(axis=0)
            # the first entry not below (or the window's end): everything before it is
            stop = np.where(fresh & ~below, pos[:, None], n).min(axis=0)
            self._below[links[sel]] = first + stop
        before = np.minimum(before, n - 1)
        tau = (first + before) % h
        depth[links] = np.maximum(dep_now - self._dep[tau, links], 0.0)
        return depth
