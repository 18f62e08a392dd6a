"""Exact path selection (a MILP solved by HiGHS through scipy) and lower bounds.

MILP: binary x[f, p] (flow f takes candidate p), continuous z; minimise z subject to
sum_p x[f, p] = 1 for every flow and, for every directed switch-to-switch link e,
base[e] + sum_{f, p : e in p} size[f] / cap[e] * x[f, p] <= z, where base holds the loads of
flows with a single live candidate. Host links carry the same load whatever the choice, so the
overall optimum is max(busiest host link, z). Every candidate path of a Clos has the same length,
so the total load (the second objective) is the same for every choice and needs no stage.

Lower bounds: ``cut_lower_bound`` is "the load a perfect split would give": for every hop
position of a flow's candidates, the set of links at that position is a cut every path crosses
once, so max load >= (bytes of the flows sharing that exact cut) / (capacity of the cut).
Host links and single-path flows are counted exactly. ``lp_lower_bound`` solves the LP
relaxation of the MILP (tighter, small instances only).
"""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from icefabric.control.planner.state import PlanState

log = logging.getLogger(__name__)


class ExactSolveError(RuntimeError):
    """HiGHS did not return an optimal solution (time limit, infeasible, ...)."""


def _model(
    state: PlanState, rows: np.ndarray
) -> tuple[np.ndarray, list[tuple[int, np.ndarray, np.ndarray]]]:
    """Base loads (everything but the free choices) and per choosing flow (row, cand idx, paths)."""
    base = np.zeros_like(state.load)
    live = state.live_rows()
    s = state.size[live]
    np.add.at(base, state.host_up[live], s * state.invcap[state.host_up[live]])
    np.add.at(base, state.host_down[live], s * state.invcap[state.host_down[live]])
    choosing: list[tuple[int, np.ndarray, np.ndarray]] = []
    row_set = set(rows.tolist())
    for i in live.tolist():
        cand = state.candidates(i)
        if i in row_set:
            idx = np.nonzero(state.live_mask(cand))[0]
            if idx.size == 0:
                continue
            if idx.size == 1:
                p = cand[idx[0]]
                base[p] += state.size[i] * state.invcap[p]
            else:
                choosing.append((i, idx, cand[idx]))
        elif state.choice[i] >= 0:
            p = state.paths[i]
            base[p] += state.size[i] * state.invcap[p]
    base[state.pad] = 0.0
    return base, choosing


def _solve(state: PlanState, rows: np.ndarray, *, relax: bool, time_limit_s: float):  # type: ignore[no-untyped-def]
    base, choosing = _model(state, rows)
    n_links = state.pad
    nx = sum(len(c[1]) for c in choosing)
    zcol = nx
    ri, ci, vals = [], [], []
    eq_r, eq_c = [], []
    col = 0
    for k, (i, idx, paths) in enumerate(choosing):
        for p in paths:
            for e in p.tolist():
                if e != state.pad:
                    ri.append(e)
                    ci.append(col)
                    vals.append(state.size[i] * state.invcap[e])
            eq_r.append(k)
            eq_c.append(col)
            col += 1
        del idx
    # link rows: sum a x - z <= -base, over switch-to-switch links only: a host link's load is
    # the same whatever paths are chosen, so minimising the fabric max minimises the overall max
    # too (the overall max is max(host links, z)) and also gives the best fabric headroom.
    fabric = np.array([ln.kind == "fabric" for ln in state.topo.links], dtype=bool)
    ri += np.nonzero(fabric)[0].tolist()
    ci += [zcol] * int(fabric.sum())
    vals += [-1.0] * int(fabric.sum())
    a_link = coo_matrix((vals, (ri, ci)), shape=(n_links, nx + 1)).tocsr()[fabric]
    cons = [LinearConstraint(a_link, -np.inf, -base[:n_links][fabric])]
    if choosing:
        a_eq = coo_matrix((np.ones(len(eq_r)), (eq_r, eq_c)), shape=(len(choosing), nx + 1)).tocsr()
        cons.append(LinearConstraint(a_eq, 1.0, 1.0))
    c = np.zeros(nx + 1)
    c[zcol] = 1.0
    integrality = np.zeros(nx + 1)
    if not relax:
        integrality[:nx] = 1
    ub = np.ones(nx + 1)
    ub[zcol] = np.inf
    res = milp(
        c,
        constraints=cons,
        integrality=integrality,
        bounds=Bounds(np.zeros(nx + 1), ub),
        options={"time_limit": time_limit_s, "disp": False},
    )
    if res.status != 0 or res.x is None:
        raise ExactSolveError(f"HiGHS: {res.message} (status {res.status})")
    host_max = float(base[:n_links][~fabric].max()) if (~fabric).any() else 0.0
    return res, choosing, host_max


def solve_exact(state: PlanState, rows: np.ndarray, *, time_limit_s: float = 30.0) -> float:
    """Place ``rows`` optimally given the other flows' paths; returns the optimal max load."""
    res, choosing, host_max = _solve(state, rows, relax=False, time_limit_s=time_limit_s)
    x = res.x
    for i in rows.tolist():
        state.unplace(i)
    col = 0
    picks = []
    for i, idx, _paths in choosing:
        seg = x[col : col + len(idx)]
        picks.append((i, int(idx[int(np.argmax(seg))])))
        col += len(idx)
    chosen = {i for i, _ in picks}
    for i, c in picks:
        state.place(i, c)
    for i in rows.tolist():
        if i not in chosen:
            idx = np.nonzero(state.live_mask(state.candidates(i)))[0]
            if idx.size:
                state.place(i, int(idx[0]))
    return max(float(res.x[-1]), float(host_max))


def lp_lower_bound(state: PlanState, *, time_limit_s: float = 30.0) -> float:
    """The LP relaxation's optimum over all live flows: no integral plan does better."""
    res, _, host_max = _solve(state, state.live_rows(), relax=True, time_limit_s=time_limit_s)
    return max(float(res.x[-1]), float(host_max))


def _cuts(state: PlanState, rows: np.ndarray) -> tuple[dict[bytes, list[int]], np.ndarray]:
    """Every exact cut of the live flows ``rows``: cut (sorted link ids as bytes) -> the
    (source leaf, destination leaf) groups crossing it, and each row's group index."""
    key = state.src_leaf[rows] * (1 << 32) + state.dst_leaf[rows]
    uk, inv = np.unique(key, return_inverse=True)
    first = np.zeros(len(uk), dtype=np.int64)
    first[inv[::-1]] = rows[::-1]
    cuts: dict[bytes, list[int]] = defaultdict(list)
    topo = state.topo
    leaves = topo.leaves
    any_failed = bool(topo.failed.any())
    for g, i in enumerate(first.tolist()):
        if any_failed:
            cand = state.candidates(i)
            p = cand[state.live_mask(cand)]
            if p.shape[0] == 0:
                continue
            keys = [np.unique(p[:, j]).tobytes() for j in range(p.shape[1])]
        else:
            keys = topo.hop_sets(leaves[int(state.src_leaf[i])], leaves[int(state.dst_leaf[i])])
        for kb in keys:
            cuts[kb].append(g)
    return cuts, inv


def cut_lower_bound(state: PlanState, *, fabric_only: bool = False) -> float:
    """The perfect-split bound over hop-position cuts and forced links (fast, any size).

    With ``fabric_only`` host links are left out: a bound on the max over switch-to-switch links.
    """
    pad = state.pad
    forced = np.zeros_like(state.load)
    rows = state.live_rows()
    if rows.size == 0:
        return 0.0
    s = state.size[rows]
    np.add.at(forced, state.host_up[rows], s * state.invcap[state.host_up[rows]])
    np.add.at(forced, state.host_down[rows], s * state.invcap[state.host_down[rows]])
    bound = 0.0 if fabric_only or not pad else float(forced[:pad].max())
    # bytes per (src leaf, dst leaf) group
    cuts, inv = _cuts(state, rows)
    tot = np.bincount(inv, weights=s)
    cap = np.concatenate([state.topo.capacity, [np.inf]])
    for kb, groups in cuts.items():
        b = 0.0
        for g in groups:
            b += float(tot[g])
        bound = max(bound, b / float(cap[np.frombuffer(kb, dtype=np.int64)].sum()))
    return bound


def whole_flow_bound(state: PlanState, *, fabric_only: bool = False) -> float:
    """``cut_lower_bound`` tightened for unsplittable flows (the repair's stopping floor).

    A flow takes one path, so it crosses one link of each cut: of a cut's ``j k + 1`` largest
    flows (``k`` links) some link carries ``j + 1`` (pigeonhole), at least the ``j + 1``
    smallest of them, for every ``j >= 0``. Twenty equal flows over 16 uplinks: two on some
    uplink, where the perfect split says 1.25.
    """
    bound = cut_lower_bound(state, fabric_only=fabric_only)
    rows = state.live_rows()
    if rows.size == 0:
        return bound
    cuts, inv = _cuts(state, rows)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(1, int(inv.max()) + 1))
    per_group = np.split(state.size[rows][order], bounds)
    cap = np.concatenate([state.topo.capacity, [np.inf]])
    for kb, groups in cuts.items():
        links = np.frombuffer(kb, dtype=np.int64)
        k = links.size
        sizes = np.sort(np.concatenate([per_group[g] for g in groups]))[::-1]
        n = sizes.size
        if n == 0 or k == 0:
            continue
        cs = np.concatenate([[0.0], np.cumsum(sizes)])
        j = np.arange((n - 1) // k + 1)
        m = j * k + 1  # the m largest: some link carries j + 1 of them, the smallest j + 1 at least
        most = float((cs[m] - cs[m - j - 1]).max())
        bound = max(bound, most / float(cap[links].max()))
    return bound
