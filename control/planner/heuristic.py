"""The fast planner: greedy largest-first placement, then ejection-chain repair of the hottest links.

Greedy: flows in decreasing size (equal sizes grouped by leaf pair) each take the live candidate
whose most loaded link, after adding the flow, is least loaded; among equal maxima the one with
the least summed load wins. In a Clos the candidates are "up half i + down half i", so the step
works on the two halves directly (no per-pair candidate matrix).

Repair: take the current maximum M and bring every link at M below it. A link is relieved by
moving its flows, one at a time, to paths that stay below M everywhere, or to a path that pushes
one or two other links to M, which are then relieved the same way (an ejection chain). Every
move is logged and a failed chain is rolled back, so no link ever ends at or above M. Search
shapes escalate from a long chain without backtracking (the alternating chains a tight fabric
needs) to short, wider searches with backtracking, each with a bounded number of steps. When a
link at M cannot be relieved in time, the repair stops there; it also stops when M reaches the
lower bound. ``improve`` runs it on all links, then on switch-to-switch links only (host links
carry the same load whatever the plan, so that second pass buys fabric headroom).

Budget: the repair stops after a number of *steps* (one step = one flow considered for a move:
counted, so the same input gives the same plan on any machine and under any load), after a
wall-clock deadline (the answer then depends on how fast the machine is right now), or whichever
comes first when both are given. See ``Budget`` and control/planner/README.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from icefabric.control.planner.exact import whole_flow_bound
from icefabric.control.planner.state import PlanState

log = logging.getLogger(__name__)

_REL = 1e-9
# Weight of a path's summed load in the greedy score: small enough never to outweigh a real
# difference of maxima (a path has at most MAX_HOPS links), large enough to break exact ties.
_TIE = 1e-7


@dataclass(slots=True)
class Budget:
    """What a repair may spend: ``steps`` counted steps and/or wall-clock time until ``deadline``.

    One step is one flow considered for a move (the unit of the repair's work). A budget with
    steps and no deadline is deterministic: the same input gives the same plan on any machine
    under any load. ``deadline`` is a ``time.perf_counter()`` value; with it the plan depends on
    how fast the machine is right now. ``used`` counts the steps spent so far.
    """

    steps: int | None = None
    deadline: float | None = None
    used: int = 0

    @classmethod
    def of(cls, *, steps: int | None = None, seconds: float | None = None) -> Budget:
        """A budget of ``steps`` steps and/or ``seconds`` of wall-clock time from now."""
        if steps is None and seconds is None:
            raise ValueError("a repair budget needs steps or seconds (or both)")
        if steps is not None and steps < 0:
            raise ValueError(f"steps: expected >= 0, got {steps}")
        deadline = None if seconds is None else time.perf_counter() + seconds
        return cls(steps=steps, deadline=deadline)

    @property
    def counted(self) -> bool:
        """True when only steps bound the search (the result does not depend on the clock)."""
        return self.deadline is None

    def spent(self) -> bool:
        """True when nothing is left (checked before each step, and between search levels)."""
        if self.steps is not None and self.used >= self.steps:
            return True
        return self.deadline is not None and time.perf_counter() > self.deadline

    def take(self) -> bool:
        """Spend one step; False (and nothing spent) when nothing is left."""
        if self.spent():
            return False
        self.used += 1
        return True


def greedy(state: PlanState, rows: np.ndarray) -> list[int]:
    """Place ``rows`` one by one (largest first); returns rows with no live candidate.

    Score of a path: its most loaded link after adding the flow, plus ``_TIE`` times the sum
    over its links (so among paths with equal maxima the least loaded one wins).
    """
    if rows.size == 0:
        return []
    order = np.lexsort((state.dst_leaf[rows], state.src_leaf[rows], -state.size[rows]))
    rows = rows[order]
    stuck: list[int] = []
    load = state.load
    any_failed = bool(state.topo.failed.any())
    sizes = state.size.tolist()
    for i in rows.tolist():
        size = sizes[i]
        halves = None if any_failed else state.halves_t(i)
        if halves is not None:
            up, icap_up, down, icap_down = halves
            a = load.take(up)
            a += size * icap_up
            b = load.take(down)
            b += size * icap_down
            score = np.maximum(np.maximum.reduce(a, axis=0), np.maximum.reduce(b, axis=0))
            score += _TIE * (np.add.reduce(a, axis=0) + np.add.reduce(b, axis=0))
            k = int(score.argmin())
            state.place(i, k, np.concatenate([up[:, k], down[:, k]]))
            continue
        cand, icap = state.candidates_t(i)
        idx = None
        if any_failed:
            live = state.live_mask_t(cand)
            if not live.all():
                idx = np.flatnonzero(live)
                if idx.size == 0:
                    stuck.append(i)
                    continue
                cand, icap = cand[:, idx], icap[:, idx]
        if cand.shape[1] == 1 or cand.shape[0] == 0:
            state.place(i, 0 if idx is None else int(idx[0]))
            continue
        new = load.take(cand)
        new += size * icap
        score = np.maximum.reduce(new, axis=0)
        score += _TIE * np.add.reduce(new, axis=0)
        k = int(score.argmin())
        state.place(i, k if idx is None else int(idx[k]), cand[:, k])
    return stuck


class _Repair:
    def __init__(self, state: PlanState, budget: Budget, depth: int, branch: int) -> None:
        self.s = state
        self.budget = budget
        self.depth = depth
        self.branch = branch
        self.branch0 = branch
        self.moves = 0
        # link -> rows index, built once: rows_on() scans every flow, too slow for many calls.
        # Rows moved onto a link later are remembered in ``added``; stale entries are filtered.
        w = max(state.width, 1)
        self.w = w
        flat = state.paths[:, :w].ravel()
        rows = np.repeat(np.arange(state.paths.shape[0]), w)
        keep = (flat != state.pad) & state.alive[rows]
        flat, rows = flat[keep], rows[keep]
        order = np.argsort(flat, kind="stable")
        self.by_link = rows[order]
        self.starts = np.searchsorted(flat[order], np.arange(state.pad + 2))
        self.added: dict[int, set[int]] = {}
        self.log: list[tuple[int, int]] = []  # (row, previous choice) of every move, for undo
        self.calls = 0  # relieve() calls left for the current attempt (bounds the search)
        self.two = False  # whether a move may overload two links (needed in 3-tier fabrics)

    def place(self, i: int, c: int) -> None:
        self.s.place(i, c)
        for link in self.s.paths[i, : self.w].tolist():
            if link != self.s.pad:
                self.added.setdefault(link, set()).add(i)

    def flows_on(self, e: int) -> np.ndarray:
        s = self.s
        rows = self.by_link[self.starts[e] : self.starts[e + 1]]
        extra = self.added.get(e)
        if extra:
            rows = np.union1d(rows, np.fromiter(extra, dtype=np.int64, count=len(extra)))
        on = np.logical_or.reduce(s.paths[rows, : self.w] == e, axis=1) & s.alive[rows]
        rows = rows[on]
        ordered: np.ndarray = rows[np.argsort(-s.size[rows], kind="stable")]
        return ordered

    def relieve(self, e: int, thr: float, depth: int, banned: set[int]) -> bool:
        """Bring link ``e`` below ``thr`` without pushing any other link to ``thr``.

        Every move is logged; on failure everything moved since the call is undone.
        """
        mark = len(self.log)
        while self.s.load[e] >= thr:
            if not self._shed(e, thr, depth, banned):
                self.rollback(mark)
                return False
        return True

    def _shed(self, e: int, thr: float, depth: int, banned: set[int]) -> bool:
        """Move one flow off ``e`` (with a chain of further moves if needed); logged."""
        s = self.s
        load = s.load
        self.calls -= 1
        if self.calls < 0 or self.budget.spent():
            return False
        branches: list[tuple[int, float, int, int, tuple[int, ...]]] = []
        most = 2 if self.two else 1
        for i in self.flows_on(e).tolist():
            if not self.budget.take():
                return False
            cand, icap = s.candidates_t(i)
            if cand.shape[1] < 2:
                continue
            ok = s.live_mask_t(cand) & ~np.logical_or.reduce(cand == e, axis=0)
            if not ok.any():
                continue
            idx = np.flatnonzero(ok)
            old = int(s.choice[i])
            s.unplace(i)
            p = cand[:, idx]
            new = load.take(p)
            new += s.size[i] * icap[:, idx]
            viol = new >= thr
            nviol = viol.sum(axis=0)
            free = np.flatnonzero(nviol == 0)
            if free.size:
                best = np.maximum.reduce(new[:, free], axis=0).argmin()
                self.log.append((i, old))
                self.place(i, int(idx[free[int(best)]]))
                self.moves += 1
                return True
            self.place(i, old)
            if depth > 0:
                # a move that overloads one or two other links, which are then relieved in turn
                for k in np.flatnonzero((nviol >= 1) & (nviol <= most)).tolist():
                    links = tuple(int(x) for x in p[viol[:, k], k].tolist())
                    if any(x in banned or x == e for x in links):
                        continue
                    excess = float((new[viol[:, k], k] - thr).sum())
                    branches.append((len(links), excess, i, int(idx[k]), links))
        if depth <= 0 or not branches:
            return False
        branches.sort()
        for _, _, i, c, links in branches[: self.branch]:
            mark = len(self.log)
            self.log.append((i, int(s.choice[i])))
            self.place(i, c)
            ok = True
            for link in links:
                if not ok:
                    break
                if load[link] >= thr:
                    ok = self.relieve(link, thr, depth - 1, banned | {e, *links})
            if ok:
                self.moves += 1
                return True
            self.rollback(mark)
        return False

    def rollback(self, mark: int) -> None:
        """Undo the logged moves after position ``mark``, newest first."""
        while len(self.log) > mark:
            i, old = self.log.pop()
            if old >= 0:
                self.place(i, old)
            else:
                self.s.unplace(i)


def repair(
    state: PlanState,
    *,
    budget: Budget,
    depth: int = 3,
    branch: int = 4,
    scope: np.ndarray | None = None,
    floor: float = 0.0,
) -> int:
    """Lower the maximum load over ``scope`` (a mask of links, all when None) by moving flows.

    Returns the number of moves made. No move ever raises any link to the current maximum.
    Stops at once when the maximum reaches ``floor`` (a lower bound: nothing to gain), and when
    ``budget`` is spent (its ``used`` grows by the steps taken).
    """
    rep = _Repair(state, budget, depth, branch)
    pad = state.pad
    mask = np.ones(pad, dtype=bool) if scope is None else scope[:pad]
    if not mask.any():
        return 0
    while not budget.spent():
        m = float(state.load[:pad][mask].max())
        if m <= 0 or m <= floor * (1 + 1e-9):
            break
        thr = m * (1 - _REL)
        hot = np.nonzero((state.load[:pad] >= thr) & mask)[0]
        done = True
        for e in hot.tolist():
            if state.load[e] < thr:
                continue
            if not _relieve_escalating(rep, int(e), thr):
                done = False
                break
        if not done:
            break
    log.debug(
        "repair: %d moves, %d steps used, max load %.6g", rep.moves, budget.used, state.max_load()
    )
    return rep.moves


def _relieve_escalating(rep: _Repair, e: int, thr: float) -> bool:
    """Relieve ``e``, trying search shapes from cheap to expensive.

    Levels: (depth, branch, may a move overload two links, relieve() calls allowed). First a
    long chain without backtracking (branch 1): in a tight fabric the fix is an alternating
    chain of moves (a Kempe chain between two uplinks) that may cross many leaves; then short,
    wider searches with backtracking. Moves that overload two links are what a three-tier path
    needs (changing aggregation switch changes both the up and the down half).
    """
    d, b = rep.depth, rep.branch0
    for depth, branch, two, calls in (
        (40, 1, True, 4_000),
        (d, b, False, 400),
        (d + 1, b, True, 2_000),
        (d + 4, b + 2, True, 20_000),
    ):
        rep.branch, rep.two, rep.calls = branch, two, calls
        if rep.relieve(e, thr, depth, {e}):
            rep.log.clear()  # kept: nothing above this call needs to undo it
            return True
        if rep.budget.spent():
            return False
    return False


def fabric_mask(state: PlanState) -> np.ndarray:
    """True for switch-to-switch links (the ones planning can change)."""
    return np.array([ln.kind == "fabric" for ln in state.topo.links] + [False], dtype=bool)


def improve(
    state: PlanState,
    *,
    steps: int | None = None,
    time_budget_s: float | None = None,
    depth: int = 3,
) -> int:
    """Repair the max over all links, then (host links being fixed) the max over fabric links.

    Both passes share one budget: ``steps`` counted steps (deterministic) and/or
    ``time_budget_s`` wall-clock seconds; at least one must be given.
    """
    return improve_within(state, Budget.of(steps=steps, seconds=time_budget_s), depth=depth)


def improve_within(state: PlanState, budget: Budget, *, depth: int = 3) -> int:
    """``improve`` with a budget made by the caller (it reads ``budget.used`` afterwards)."""
    floor = whole_flow_bound(state)
    moves = repair(state, budget=budget, depth=depth, floor=floor)
    if not budget.spent():
        fab_floor = whole_flow_bound(state, fabric_only=True)
        moves += repair(
            state, budget=budget, depth=depth, scope=fabric_mask(state), floor=fab_floor
        )
    return moves
