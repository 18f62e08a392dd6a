"""Global path planning: give every flow a candidate path so the busiest link is as idle as possible."""

from icefabric.control.planner.ecmp import (
    EcmpDraws,
    EcmpModel,
    ecmp_bucket,
    ecmp_choice,
    ecmp_hash,
    ecmp_loads,
    ecmp_paths,
)
from icefabric.control.planner.exact import (
    ExactSolveError,
    cut_lower_bound,
    lp_lower_bound,
    solve_exact,
    whole_flow_bound,
)
from icefabric.control.planner.heuristic import (
    Budget,
    fabric_mask,
    greedy,
    improve,
    improve_within,
    repair,
)
from icefabric.control.planner.plan import LinkLoad, Plan, PlannedFlow, build_plan, link_table
from icefabric.control.planner.planner import (
    DEFAULT_WORK_BUDGET,
    METHODS,
    Explanation,
    Planner,
    plan_demand,
)
from icefabric.control.planner.state import PlanState

__all__ = [
    "DEFAULT_WORK_BUDGET",
    "METHODS",
    "Budget",
    "EcmpDraws",
    "EcmpModel",
    "ExactSolveError",
    "Explanation",
    "LinkLoad",
    "Plan",
    "PlanState",
    "PlannedFlow",
    "Planner",
    "build_plan",
    "cut_lower_bound",
    "ecmp_bucket",
    "ecmp_choice",
    "ecmp_hash",
    "ecmp_loads",
    "ecmp_paths",
    "fabric_mask",
    "greedy",
    "improve",
    "improve_within",
    "link_table",
    "lp_lower_bound",
    "plan_demand",
    "repair",
    "solve_exact",
    "whole_flow_bound",
]
