"""The P4Info names the controller writes exist in p4src/ice.p4 and every entity encodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.control import fabric
from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import parse_job
from icefabric.control.install import plan_entries
from icefabric.control.p4rt import P4InfoIndex, encode_entity
from icefabric.control.planner.planner import Planner
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def p4info() -> P4InfoIndex:
    compiler = pytest.importorskip("icefabric.target.compiler")
    program = compiler.load_program(ROOT / "p4src" / "ice.p4")
    return P4InfoIndex(program.p4info)


def test_every_name_constant_is_in_the_p4info(p4info: P4InfoIndex) -> None:
    lookups = {
        "TABLE_": p4info.table,
        "ACTION_": p4info.action,
        "COUNTER_": p4info.counter,
        "DIRECT_COUNTER_": p4info.direct_counter,
    }
    checked = 0
    for name, value in vars(n).items():
        for prefix, lookup in lookups.items():
            if name.startswith(prefix) and isinstance(value, str):
                assert lookup(value).name == value
                checked += 1
    assert checked >= 30


def test_every_base_and_plan_entity_encodes(p4info: P4InfoIndex) -> None:
    topo = Topology(load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"))
    tags = fabric.allocate_tags(topo)
    job = parse_job(
        {
            "name": "j",
            "hosts": ["h1", "h3", "h5", "h7"],
            "phases": [
                {
                    "name": "ar",
                    "collective": "all-reduce",
                    "algorithm": "ring",
                    "channels": 2,
                    "message_bytes": "1MiB",
                }
            ],
        }
    )
    demand = demand_from_job(job)
    planner = Planner(topo)
    planner.add(demand)
    flows = {f.flow_id: f for f in demand.flows}
    entities = [
        *[e for ents in fabric.base_entries(topo, tags=tags).values() for e in ents],
        *[e for ents in plan_entries(topo, planner.plan(), flows, tags).values() for e in ents],
    ]
    for e in entities:
        encode_entity(e, p4info)
    assert len(entities) > 1000


def test_constants_match_the_p4rt_name_generator(p4info: P4InfoIndex) -> None:
    """icefabric.p4src.ice_p4 uses the identifiers the P4Info name generator gives: regenerating is safe."""
    from icefabric.control.p4rt import generate_names_module

    generated: dict[str, object] = {}
    exec(generate_names_module(p4info, program="ice.p4"), generated)
    mine = {k: v for k, v in vars(n).items() if k.isupper() and isinstance(v, str)}
    assert mine and all(generated.get(k) == v for k, v in mine.items())
