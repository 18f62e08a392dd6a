"""The example job files shipped with the controller load, fit the example fabric and plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.control.ccl import demand_from_jobs, load_job
from icefabric.control.ccl.job import check_hosts
from icefabric.control.planner import Planner
from icefabric.control.topology import Topology
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]
JOBS = sorted((ROOT / "control" / "ccl" / "examples").glob("*.yaml"))
FABRIC = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"


def test_there_are_example_jobs() -> None:
    assert len(JOBS) >= 2


@pytest.mark.parametrize("path", JOBS, ids=lambda p: p.stem)
def test_example_job_plans_on_the_example_fabric(path: Path) -> None:
    spec = load_topology(FABRIC)
    job = load_job(path)
    assert check_hosts(job, [h.name for h in spec.hosts]) == []
    vendors = {r.vendor for r in job.ranks}
    assert len(vendors) >= 2, "the examples are heterogeneous jobs"
    plan = Planner(Topology(spec), method="exact").add(demand_from_jobs([job]))
    assert not plan.unrouted
    assert len(plan.flows) > 0
    assert plan.max_load_s <= plan.lower_bound_s * 1.05 + 1e-12
