"""The planner object the controller keeps: jobs come and go, links fail, the plan follows.

``method``: ``"exact"`` solves the MILP of exact.py (small instances), ``"heuristic"`` runs
greedy + repair (heuristic.py), ``"auto"`` takes the exact solver when at most
``exact_max_flows`` flows have a choice of path (so such plans are optimal) and the heuristic
otherwise.

Budget of the heuristic's repair: ``work_budget`` (counted steps; see heuristic.py) makes
planning deterministic: the same inputs give the same plan on any machine under any load. The
experiment engines, the simulator and the planner bench use it (``DEFAULT_WORK_BUDGET``).
Without it the repair stops on the wall-clock ``time_budget_s`` (``replan_budget_s`` after a
failure), which the live controller keeps: it must answer in time, and its plans may then differ
with the machine's load. control/planner/README.md lists who uses which.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.demand import Demand
from icefabric.control.planner.ecmp import ecmp_loads
from icefabric.control.planner.exact import ExactSolveError, cut_lower_bound, solve_exact
from icefabric.control.planner.heuristic import Budget, greedy, improve_within
from icefabric.control.planner.plan import Plan, PlannedFlow, build_plan, link_table
from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology

log = logging.getLogger(__name__)

METHODS = ("auto", "exact", "heuristic")
# Counted repair steps (one step: one flow considered for a move). Measured (control/planner/
# README.md): the planner bench's scenarios reach their bound within 60 steps, a tight
# fat-tree(16) ring within ~5,700 (~150 us a step there), so the search stops on its own long
# before this; an instance that never converges stops here (seconds, not minutes).
DEFAULT_WORK_BUDGET = 100_000
# The MILP's time limit when planning is counted (a safety net: <= exact_max_flows choosing flows
# solve in milliseconds); with the wall clock it is max(time_budget_s, 5 s).
EXACT_LIMIT_S = 120.0


@dataclass(slots=True, frozen=True)
class Explanation:
    """Per flow its path, per link its load (and ECMP's beside it)."""

    plan: Plan
    flows: list[dict[str, object]]
    links: list[dict[str, object]]
    ecmp_max_load_s: float | None


class Planner:
    """Incremental global path planning over one topology."""

    def __init__(
        self,
        topo: Topology,
        *,
        method: str = "auto",
        time_budget_s: float = 1.0,
        work_budget: int | None = None,
        exact_max_flows: int = 24,
        repair_depth: int = 3,
        replan_budget_s: float = 0.05,
        replan_work_budget: int | None = None,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
        for name, value in (
            ("work_budget", work_budget),
            ("replan_work_budget", replan_work_budget),
        ):
            if value is not None and value < 0:
                raise ValueError(f"{name}: expected >= 0 steps, got {value}")
        self.topo = topo
        self.state = PlanState(topo)
        self.method = method
        self.time_budget_s = time_budget_s
        self.exact_max_flows = exact_max_flows
        self.repair_depth = repair_depth
        self.replan_budget_s = replan_budget_s  # failure replans: greedy + this much repair
        # counted repair steps instead of the wall clock (deterministic plans); None: wall clock
        self.work_budget = work_budget
        self.replan_work_budget = replan_work_budget
        self.last_steps = 0  # repair steps the last operation spent
        self.changed: list[str] = []  # flow ids whose path changed in the last operation
        self.last_method = "none"
        self.last_elapsed_s = 0.0
        self._lower_bound = 0.0
        self._flow_cache: dict[str, PlannedFlow] = {}

    # ------------------------------------------------------------------ operations

    def add(self, demand: Demand) -> Plan:
        """Plan the flows of ``demand`` (one or more new jobs) on top of what is planned."""
        t0 = time.perf_counter()
        self.state.compact()
        before = self._snapshot()
        rows = self.state.add_flows(list(demand.flows))
        self._place(rows, t0)
        return self._finish(before, t0)

    def add_pinned(self, demand: Demand, choices: Mapping[str, int]) -> Plan:
        """Add ``demand`` with its flows on the candidates another planner chose (a standby
        taking over): usable choices are placed as they are, without a search; the other flows
        are planned as :meth:`add` plans them, and the saved choices are pinned again after."""
        t0 = time.perf_counter()
        s = self.state
        s.compact()
        before = self._snapshot()
        rows = s.add_flows(list(demand.flows))
        rest: list[int] = []
        any_failed = bool(self.topo.failed.any())
        for i in rows.tolist():
            c = choices.get(s.flows[i].flow_id, -1)
            if c < 0:
                rest.append(i)
                continue
            halves = None if any_failed else s.halves_t(i)  # as greedy: no full path table
            if halves is not None:
                up, _, down, _ = halves
                if c < up.shape[1]:
                    s.place(i, c, np.concatenate([up[:, c], down[:, c]]))
                else:
                    rest.append(i)
                continue
            cand_t = s.candidates_t(i)[0]
            if c >= cand_t.shape[1] or not s.live_mask_t(cand_t[:, c : c + 1])[0]:
                rest.append(i)
                continue
            s.place(i, c, cand_t[:, c])
        if rest:
            self._place(np.array(rest, dtype=np.int64), t0)
            self.pin(choices)
        else:
            self.last_method = "pinned"
        return self._finish(before, t0)

    def remove_job(self, job: str) -> Plan:
        """Take every flow of ``job`` out of the plan (the others keep their paths)."""
        t0 = time.perf_counter()
        before = self._snapshot()
        s = self.state
        rows = np.array(
            [i for i in s.live_rows().tolist() if s.flows[i].job == job], dtype=np.int64
        )
        if rows.size == 0:
            raise KeyError(f"no job {job!r} in the plan")
        s.remove_rows(rows)
        self.last_method = "remove"
        return self._finish(before, t0)

    def replan_after_failure(
        self,
        *,
        links: Iterable[int] = (),
        ports: Iterable[tuple[str, int]] = (),
        switches: Iterable[str] = (),
    ) -> Plan:
        """Mark links/ports/switches down and move every flow that crossed them."""
        t0 = time.perf_counter()
        before = self._snapshot()
        for lid in links:
            self.topo.fail_link(lid)
        for node, port in ports:
            self.topo.fail_port(node, port)
        for sw in switches:
            self.topo.fail_switch(sw)
        self._reroute_dead(t0)
        return self._finish(before, t0)

    def restore(self, ids: Iterable[int] | None = None) -> Plan:
        """Mark links up again and replan every placed flow from scratch onto the larger fabric."""
        self.topo.restore(ids)
        return self.rebalance()

    def rebalance(self) -> Plan:
        """Re-place every flow (all paths may change)."""
        t0 = time.perf_counter()
        before = self._snapshot()
        s = self.state
        rows = s.live_rows()
        for i in rows.tolist():
            s.unplace(i)
        s.unrouted.clear()
        self._place(rows, t0)
        return self._finish(before, t0)

    # ------------------------------------------------------------------ views

    def plan(self) -> Plan:
        """The current plan."""
        return build_plan(
            self.state,
            method=self.last_method,
            lower_bound_s=self._lower_bound,
            elapsed_s=self.last_elapsed_s,
            cache=self._flow_cache,
        )

    def choices(self) -> dict[str, int]:
        """Every planned flow's candidate index (-1: not placed), by flow id."""
        s = self.state
        return {s.flows[i].flow_id: int(s.choice[i]) for i in s.live_rows().tolist()}

    def pin(self, choices: Mapping[str, int]) -> int:
        """Put flows back on the candidates another planner chose for them (a standby taking
        over restores the primary's plan exactly, whatever time its own search had); a choice
        that is out of range or crosses a failed link is left as planned. Returns flows moved."""
        s = self.state
        moved = 0
        for i in s.live_rows().tolist():
            c = choices.get(s.flows[i].flow_id)
            if c is None or c < 0 or c == s.choice[i]:
                continue
            cand_t = s.candidates_t(i)[0]
            if c >= cand_t.shape[1] or not s.live_mask_t(cand_t[:, c : c + 1])[0]:
                continue
            s.place(i, c)
            moved += 1
        if moved:
            s.unrouted = {f: why for f, why in s.unrouted.items() if choices.get(f, -1) < 0}
            self._lower_bound = self.lower_bound()
        return moved

    def lower_bound(self) -> float:
        """The perfect-split lower bound of the current demand (see exact.py)."""
        return cut_lower_bound(self.state)

    def ecmp_loads(self, *, use_qp_in_hash: bool = True) -> np.ndarray:
        """Per directed link, the load in seconds if ice.p4's ECMP placed the flows."""
        return ecmp_loads(self.state, use_qp_in_hash=use_qp_in_hash)[: self.state.pad]

    def explain(self, *, ecmp: bool = True) -> Explanation:
        """Per flow its path (nodes), per link its load, ice.p4 ECMP's load beside it."""
        plan = self.plan()
        e = self.ecmp_loads() if ecmp else None
        flows = [
            {
                "flow_id": f.flow_id,
                "job": f.job,
                "bytes": f.bytes,
                "path_index": f.path_index,
                "path": " > ".join(f.nodes),
                "src": f.src_host,
                "dst": f.dst_host,
            }
            for f in plan.flows
        ]
        links = link_table(plan, self.state, ecmp_seconds=e)
        return Explanation(
            plan=plan,
            flows=flows,
            links=links,
            ecmp_max_load_s=float(e.max()) if e is not None and e.size else None,
        )

    # ------------------------------------------------------------------ internals

    def _snapshot(self) -> np.ndarray:
        return self.state.choice.copy()

    def _finish(self, before: np.ndarray, t0: float) -> Plan:
        s = self.state
        old = np.full(len(s.choice), -2, dtype=np.int64)  # -2: the flow did not exist before
        old[: len(before)] = before
        live = s.live_rows()
        moved = live[s.choice[live] != old[live]]
        self.changed = [s.flows[i].flow_id for i in moved.tolist()]
        self.last_elapsed_s = time.perf_counter() - t0
        self._lower_bound = self.lower_bound()
        return self.plan()

    def _choosing(self, rows: np.ndarray) -> int:
        s = self.state
        n = 0
        for i in rows.tolist():
            if s.candidates(i).shape[0] > 1:
                n += 1
                if n > self.exact_max_flows:
                    break
        return n

    @property
    def deterministic(self) -> bool:
        """True when the repair counts steps (plans do not depend on the clock or the load)."""
        return self.work_budget is not None

    def _budget(self, t0: float, seconds: float, replan: bool) -> Budget:
        """The repair's budget for one operation started at ``t0``."""
        if self.work_budget is None:
            return Budget(deadline=t0 + seconds)
        if replan:
            steps = self.replan_work_budget
            return Budget(steps=self.work_budget // 20 if steps is None else steps)
        return Budget(steps=self.work_budget)

    def _place(self, rows: np.ndarray, t0: float) -> None:
        self._run(rows, t0, self.time_budget_s)

    def _dead_host_rows(self) -> np.ndarray:
        """Rows whose own access link is down: they cannot be routed at all."""
        s = self.state
        failed = self.topo.failed
        rows = s.live_rows()
        dead: np.ndarray = rows[failed[s.host_up[rows]] | failed[s.host_down[rows]]]
        return dead

    def _run(self, rows: np.ndarray, t0: float, budget_s: float, replan: bool = False) -> None:
        """Place ``rows`` (exactly or greedily) and repair within ``budget_s`` from ``t0`` (or
        within the counted work budget)."""
        s = self.state
        self.last_steps = 0
        dead_host = self._dead_host_rows()
        for i in dead_host.tolist():
            s.unplace(i)
            s.unrouted[s.flows[i].flow_id] = "its host link is down"
        rows = np.setdiff1d(rows, dead_host)
        use_exact = self.method == "exact" or (
            self.method == "auto" and self._choosing(s.live_rows()) <= self.exact_max_flows
        )
        if use_exact:
            # a failure replan moves only the flows that crossed the failure (the others keep
            # their paths, as the heuristic's); placing a job solves every live flow again
            keep = rows if replan else np.setdiff1d(s.live_rows(), dead_host)
            try:
                # HiGHS returns the same optimum every time; only its time limit could make a
                # loaded machine fall back to the heuristic, so counted planning allows far more
                limit = max(budget_s, EXACT_LIMIT_S if self.deterministic else 5.0)
                solve_exact(s, keep, time_limit_s=limit)
                self._mark_unrouted(keep)
                self.last_method = "exact"
                return
            except ExactSolveError as e:
                if self.method == "exact":
                    raise
                log.warning("exact planner failed (%s); using the heuristic", e)
        for i in greedy(s, rows):
            s.unrouted[s.flows[i].flow_id] = "no live path between the leaves"
        budget = self._budget(t0, budget_s, replan)
        if not budget.spent():
            improve_within(s, budget, depth=self.repair_depth)
        self.last_steps = budget.used
        self.last_method = "heuristic"

    def _mark_unrouted(self, rows: np.ndarray) -> None:
        s = self.state
        for i in rows.tolist():
            if s.choice[i] < 0:
                s.unrouted[s.flows[i].flow_id] = "no live path between the leaves"
            else:
                s.unrouted.pop(s.flows[i].flow_id, None)

    def _reroute_dead(self, t0: float) -> None:
        """Unplace every flow crossing a failed link and place them again on live paths."""
        s = self.state
        failed = np.concatenate([self.topo.failed, [False]])
        rows = s.live_rows()
        dead = rows[failed[s.paths[rows]].any(axis=1) | (s.choice[rows] < 0)]
        for i in dead.tolist():
            s.unplace(i)
            s.unrouted.pop(s.flows[i].flow_id, None)
        self._run(dead, t0, self.replan_budget_s, replan=True)


def plan_demand(
    topo: Topology,
    demand: Demand,
    *,
    method: str = "auto",
    time_budget_s: float = 1.0,
    work_budget: int | None = None,
) -> Plan:
    """Plan ``demand`` on a fresh planner and return the plan (one-shot API)."""
    p = Planner(topo, method=method, time_budget_s=time_budget_s, work_budget=work_budget)
    return p.add(demand)
