"""The ceiling of a scheme's paths: the best any rate allocation could do on them.

A congestion control only decides how fast each flow sends; on fixed paths no choice of rates
can finish a collective sooner than its busiest link allows. So the ceiling of a collective on
a set of paths is its busbw ÷ bound if every link carried the collective's bytes at full rate,
the rest of the traffic (another job, unplanned background flows) deferred:

* **no failure**: the collective takes at least ``max over links L of bytes(L) / capacity(L)``
  (host links included, so a NIC's own bytes count), bytes(L) the bytes of the collective's
  flows whose path crosses L;
* **a link fails** at ``t_f`` and the routing moves the flows at ``t_d`` (the detection delay
  later): a linear programme (scipy's HiGHS) splits each flow's bytes into what it sends before
  ``t_f`` on its first path, between ``t_f`` and ``t_d`` on that path (nothing if it crosses the
  failed link) and after ``t_d`` on the path the routing gives it then; each link carries at most
  its capacity times each phase's length; the least completion time is the bound.

The ring's data dependencies, latencies and packetisation are left out, so the ceiling is an
upper bound, not a schedule: no scheme on those paths can beat it (``tests/unit/sim/
test_sim_bound.py`` runs every scheme against it). It replaces running the simulator with no
control on the paths, which was no bound: with no control the line-rate background flows took
more of the shared links than a congestion control gives them, and fixed-rate FIFO sharing lost
up to 2 % to rate-controlled flows on ring collisions.

Paths that change during a run other than by a failure (flowlet switching) have no fixed set:
their ceiling is that of the connection's bytes striped over every path (spraying's stripes),
the best balance a flowlet scheme could reach.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import LinkFailure, Simulator, busbw_factor
from icefabric.sim.workload import Workload


def paths_ceiling(
    topo: Topology,
    work: Workload,
    cfg: SimConfig,
    measured: Sequence[int],
    failures: Sequence[LinkFailure] = (),
) -> float:
    """The mean over the ``measured`` collectives of each one's ceiling (busbw ÷ bound) on the
    paths ``cfg``'s routing gives ``work`` on ``topo`` (routed, never run)."""
    if work.windows:
        raise ValueError("ceiling: the windowed all-to-all re-routes rows in the run; no ceiling")
    if len(failures) > 1:
        raise ValueError(f"ceiling: at most one link failure, got {len(failures)}")
    sim = Simulator(topo, work, cfg, failures=failures)
    after = None
    fail = failures[0] if failures else None
    if fail is not None:
        down = copy.deepcopy(topo)
        down.fail_link(fail.link)
        after = sim.route_on(down)[0].path
    return routes_ceiling(topo, work, sim.routes.path, measured, fail, after)


def routes_ceiling(
    topo: Topology,
    work: Workload,
    path: np.ndarray,
    measured: Sequence[int],
    failure: LinkFailure | None = None,
    after: np.ndarray | None = None,
) -> float:
    """:func:`paths_ceiling` on given paths: ``path`` per row (``sim.network`` aligned rows, the
    pad id ``topo``'s link count) and, with a ``failure``, the rows' paths ``after`` it."""
    cap = np.append(topo.capacity, np.inf)  # bytes/s per link id; the pad is inf
    dead = Topology.both_directions(failure.link) if failure is not None else []
    out = []
    for g in measured:
        rows = np.flatnonzero(work.group == g)
        c = work.collectives[g]
        size = work.size[rows].astype(np.float64)
        t = _volume_time(path[rows], size, cap)
        if failure is not None and after is not None and t > failure.at_us * 1e-6:
            t = _failure_time(
                path[rows],
                after[rows],
                size,
                cap,
                dead,
                failure.at_us * 1e-6,
                (failure.at_us + failure.detect_us) * 1e-6,
            )
        nic = float(cap[path[rows, 0]].min()) * 8.0
        busbw = c.message_bytes * 8.0 / t * busbw_factor(c.collective, max(c.ranks, 1))
        out.append(min(busbw / nic, 1.0) if nic > 0 and t > 0 else 0.0)
    return float(np.mean(out)) if out else 0.0


def _loads(path: np.ndarray, size: np.ndarray, n: int) -> np.ndarray:
    """Bytes per link id (0..n-1, the pad n) of rows ``path`` carrying ``size`` bytes each."""
    return np.bincount(path.ravel(), weights=np.repeat(size, path.shape[1]), minlength=n).astype(
        np.float64
    )


def _volume_time(path: np.ndarray, size: np.ndarray, cap: np.ndarray) -> float:
    """Seconds the busiest link needs for its bytes."""
    load = _loads(path, size, cap.size)
    real = np.isfinite(cap) & (cap > 0)
    return float((load[real] / cap[real]).max(initial=0.0))


def _failure_time(
    first: np.ndarray,
    after: np.ndarray,
    size: np.ndarray,
    cap: np.ndarray,
    dead: Sequence[int],
    t_f: float,
    t_d: float,
) -> float:
    """The least completion time when the links ``dead`` stop at ``t_f`` and the rows move from
    ``first`` to ``after`` at ``t_d`` (> ``t_f``): the linear programme of the module docstring."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, hstack, vstack

    pad = cap.size - 1
    # one variable triple per distinct (first path, later path): rows that share both are one
    key = np.concatenate([first, after], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    total = np.bincount(inv, weights=size, minlength=len(uniq))
    k = len(uniq)
    w = first.shape[1]
    p_first, p_after = uniq[:, :w], uniq[:, w:]
    cap_live = cap.copy()
    cap_live[list(dead)] = 0.0
    blocked = np.isin(p_first, list(dead)).any(axis=1)

    def incidence(paths: np.ndarray) -> coo_matrix:
        r = np.repeat(np.arange(k), paths.shape[1])
        col = paths.ravel()
        keep = col != pad
        return coo_matrix((np.ones(int(keep.sum())), (col[keep], r[keep])), shape=(pad, k))

    m_first, m_after = incidence(p_first), incidence(p_after)
    # in units of the largest variable's bytes and of t_d: bytes (1e8) against seconds (1e-3)
    # with capacities of 5e10 are too far apart for the solver's tolerances (it stopped 38 %
    # above the optimum on the 128-GPU failure scenario)
    unit_b = float(total.max()) or 1.0
    demand = total / unit_b
    per = cap[:pad] * t_d / unit_b  # a link's bytes per unit of time, in byte units
    unit_t = t_d
    t_f, t_d = t_f / t_d, 1.0
    zero = coo_matrix((pad, k))
    zcol = coo_matrix((pad, 1))
    live = np.where(cap_live[:pad] > 0, per, 0.0)

    def solve(with_after: bool) -> float:
        # variables: a (k), b (k), [c (k)], T; rows: phase A, phase B, [phase C] per link
        blocks = [
            hstack([m_first, zero, *([zero] if with_after else []), zcol]),
            hstack(
                [
                    zero,
                    m_first,
                    *([zero] if with_after else []),
                    coo_matrix(-live.reshape(-1, 1) if not with_after else (pad, 1)),
                ]
            ),
        ]
        ub = [per * t_f, live * (t_d - t_f) if with_after else -live * t_f]
        if with_after:
            blocks.append(hstack([zero, zero, m_after, coo_matrix(-live.reshape(-1, 1))]))
            ub.append(-live * t_d)
        a_ub = vstack(blocks).tocsr()
        b_ub = np.concatenate(ub)
        n_var = (3 if with_after else 2) * k + 1
        eye = coo_matrix((np.ones(k), (np.arange(k), np.arange(k))), shape=(k, k))
        a_eq = hstack([eye, eye, *([eye] if with_after else []), coo_matrix((k, 1))]).tocsr()
        bounds: list[tuple[float, float | None]] = [(0.0, None)] * k
        bounds += [(0.0, 0.0) if bool(x) else (0.0, None) for x in np.asarray(blocked).ravel()]
        if with_after:
            bounds += [(0.0, None)] * k
        bounds.append((t_d if with_after else t_f, None))
        obj = np.zeros(n_var)
        obj[-1] = 1.0
        res = linprog(obj, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=demand, bounds=bounds)
        if res.status != 0:
            return float("inf")
        return float(res.x[-1])

    t = solve(with_after=True)
    if t <= 1 + 1e-9:  # it may finish before the rows move: phases A and B only
        t = min(t, solve(with_after=False))
    return t * unit_t
