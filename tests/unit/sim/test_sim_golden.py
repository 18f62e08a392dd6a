"""The fluid engine's results, bit for bit, on a fixed set of cases.

Every case's result (every published figure, the trace and each flow's finish time; not the
wall-clock times, not the configuration it was given) is hashed and compared with the table
below. A refactor of ``sim/engine.py`` / ``sim/fluid.py`` must leave every hash unchanged: the
order of the floating-point operations is the model's definition. A change that is meant to
change results (the model, a scenario, a mode) prints the new table with
``.venv/bin/python tests/unit/sim/test_sim_golden.py`` and says in its commit why the results
moved.

The cases: the eight scenarios of ``sim/scenarios.py`` at 32 GPUs, 8 MiB, seed 3, under ECMP +
DCQCN (ECN marks, CNPs), ECMP + PFC (pauses), E-ECMP 4 QPs and spraying (stripes), flowlet
(moves), ICE (INT feedback, caps), two runs with no congestion control where it matters, ICE with a wire
overhead; a windowed all-to-all and a tree all-reduce (16 ranks) under four modes.

The hashes were recorded on main at 1106176 (before ``Simulator.run`` became ``fluid.FluidRun``);
the seven cases with CNPs again when a flow's next CNP came to start half a packet in
(``fluid.CNP_PHASE``), and three ICE cases when the caps came to be computed before a step's
injection (``caps_ahead``: in place before the first step), with numpy 2.4.6's float math on
this machine; the six ``job-arrives`` cases (added later) were recorded on the machine of
``GOLDEN_ELSEWHERE``'s entry, where the same modes' ``two-jobs`` cases match this table.
Where that math differs (another libm or SIMD dispatch gives other last bits in
``log1p``/``expm1``), the canary below differs too. A machine whose canary is known has its own
hashes for the few cases its math changes (``GOLDEN_ELSEWHERE``); on an unknown one the cases known to depend on the math skip with the
reason and every other case is still compared (on a failure there, the canary is named).

Recorded again on every case when the simulator's NIC came to share its line max-min, as a
round robin over queue pairs does (``sim/nic.py``), on the machine of canary
1c1da3924aa2295a (numpy 2.4.6), which is now ``CANARY``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from icefabric.control.ccl.job import parse_job
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig, config_for, uncontrolled_config
from icefabric.sim.engine import LinkFailure, Simulator
from icefabric.sim.matrix import stripes_for
from icefabric.sim.results import SimResult
from icefabric.sim.scenarios import SCENARIOS, build
from icefabric.sim.stripes import stripe
from icefabric.sim.workload import Workload, workload_from_jobs
from icefabric.topo.spec import TopologySpec
from icefabric.traffic.modes import get_mode

GPUS = 32
MESSAGE = 8 << 20
SEED = 3
MODES = ("ecmp+dcqcn", "ecmp+pfc", "eecmp4+dcqcn", "flowlet+hpcc", "spray+hpcc", "ice")
CEILINGS = ("ecmp+dcqcn", "spray+hpcc")  # in the scenarios where congestion control matters
CONGESTED = ("background", "oversubscribed", "mixed-nics")
WIRE = ("collisions", "background", "failure")  # ICE with a wire overhead
# the result's fields that are figures of the run (not its inputs, not wall-clock time)
FIGURES = (
    "flows",
    "sim_time_us",
    "steps",
    "collectives",
    "fabric_util_mean",
    "fabric_util_max",
    "fabric_util_busiest",
    "queue_p50_bytes",
    "queue_p99_bytes",
    "queue_max_bytes",
    "pfc_pause_us_total",
    "pfc_pause_us_max_link",
    "cnps",
    "unfinished",
    "base_rtt_us",
    "flowlet_moves",
    "dt_us",
    "flow_finish_us",
    "trace",
    "reroutes",
)

CANARY = "1c1da3924aa2295a"  # numpy_canary() where the table was recorded

GOLDEN = {
    "collisions/ecmp+dcqcn": "e50d3afd5039ec95",
    "collisions/ecmp+pfc": "e50d3afd5039ec95",
    "collisions/eecmp4+dcqcn": "4cb45401356f97f0",
    "collisions/flowlet+hpcc": "e50d3afd5039ec95",
    "collisions/spray+hpcc": "cf7268e2586e2acd",
    "collisions/ice": "4bb82bf3b0943979",
    "collisions/ice+wire": "4bb82bf3b0943979",
    "two-jobs/ecmp+dcqcn": "37572d55c18ecffc",
    "two-jobs/ecmp+pfc": "37572d55c18ecffc",
    "two-jobs/eecmp4+dcqcn": "2ba3c4194889db70",
    "two-jobs/flowlet+hpcc": "ab7e15fd8801fc32",
    "two-jobs/spray+hpcc": "1fafa6e7e932c1dc",
    "two-jobs/ice": "86dc9d02cd5cfba0",
    "incast/ecmp+dcqcn": "0ff0f141cba23908",
    "incast/ecmp+pfc": "0ff0f141cba23908",
    "incast/eecmp4+dcqcn": "4c6083bd2837303d",
    "incast/flowlet+hpcc": "0ff0f141cba23908",
    "incast/spray+hpcc": "c9a921919950c33b",
    "incast/ice": "0a51a452b795b56b",
    "background/ecmp+dcqcn": "5949fa88aeb99da0",
    "background/ecmp+dcqcn:uncontrolled": "e3bf8e2fa50de8ec",
    "background/ecmp+pfc": "1b818874236b8b53",
    "background/eecmp4+dcqcn": "561ddbf93013ebfb",
    "background/flowlet+hpcc": "c5271af35dababdd",
    "background/spray+hpcc": "38d881b4c5ea1222",
    "background/spray+hpcc:uncontrolled": "0c382f571bf03be3",
    "background/ice": "379f3af4e155800f",
    "background/ice+wire": "0bea19f940e73745",
    "failure/ecmp+dcqcn": "8f6d385860dffab8",
    "failure/ecmp+pfc": "8f6d385860dffab8",
    "failure/eecmp4+dcqcn": "340d185c20656dcd",
    "failure/flowlet+hpcc": "cc0147ac31c8be1c",
    "failure/spray+hpcc": "14405a880528fe6c",
    "failure/ice": "cd5503f07a82f4f2",
    "failure/ice+wire": "0e21b610620ccec8",
    "oversubscribed/ecmp+dcqcn": "31e8d4a2ea7da9fb",
    "oversubscribed/ecmp+dcqcn:uncontrolled": "3ca28b49b9ed5c27",
    "oversubscribed/ecmp+pfc": "3ca28b49b9ed5c27",
    "oversubscribed/eecmp4+dcqcn": "d6c7334cc3a640cb",
    "oversubscribed/flowlet+hpcc": "aa9d4602cd9ed1b9",
    "oversubscribed/spray+hpcc": "a7669c5178420225",
    "oversubscribed/spray+hpcc:uncontrolled": "a7669c5178420225",
    "oversubscribed/ice": "6a00944596e19597",
    "mixed-nics/ecmp+dcqcn": "8a5270805f10c5f9",
    "mixed-nics/ecmp+dcqcn:uncontrolled": "bc968bfdeeb13cfd",
    "mixed-nics/ecmp+pfc": "bc968bfdeeb13cfd",
    "mixed-nics/eecmp4+dcqcn": "306b2b8ff3fee684",
    "mixed-nics/flowlet+hpcc": "95003bad6be9aa5f",
    "mixed-nics/spray+hpcc": "14703c4043f64f9f",
    "mixed-nics/spray+hpcc:uncontrolled": "477317dc48a5f915",
    "mixed-nics/ice": "7c379bd2194ca6fd",
    "job-arrives/ecmp+dcqcn": "7af5aaa80a311004",
    "job-arrives/ecmp+pfc": "7af5aaa80a311004",
    "job-arrives/eecmp4+dcqcn": "38117709642c4305",
    "job-arrives/flowlet+hpcc": "486084ca9b4fbcf4",
    "job-arrives/spray+hpcc": "59caed50c4b2aedd",
    "job-arrives/ice": "579ebc296c41ef68",
    "all-to-all-ring/ecmp+dcqcn": "3eb8d0f1add83801",
    "all-to-all-ring/ecmp+pfc": "3eb8d0f1add83801",
    "all-to-all-ring/ice": "3eb8d0f1add83801",
    "all-reduce-tree/ecmp+dcqcn": "52a09ff7bd62608b",
    "all-reduce-tree/ecmp+pfc": "a1dc1045b3c4f8e4",
    "all-reduce-tree/ice": "267035350cb6cfb9",
    "all-reduce-tree/flowlet+hpcc": "3d237a2def9da7dd",
}

# Machines whose float math (numpy_canary) differs from the table's: the hashes of the cases
# that math changes there, every other case being the same bit for bit. Recorded by running
# this file there on code whose results match GOLDEN on the recording machine. The machine of
# the earlier table (canary e688857c6eac4928, numpy 2.4.6) has no entry since the NIC share
# changed: its math-sensitive cases skip there until someone records them.
GOLDEN_ELSEWHERE: dict[str, dict[str, str]] = {}
# the cases whose hash differed between the two machines that recorded this table's earlier
# versions (the others were the same bit for bit): on a machine with another canary they skip
MATH_SENSITIVE = frozenset(
    {
        "background/ecmp+pfc",
        "failure/ecmp+dcqcn",
        "failure/ecmp+pfc",
        "failure/eecmp4+dcqcn",
        "oversubscribed/ecmp+dcqcn",
    }
)

Case = tuple[str, TopologySpec, Workload, SimConfig, tuple[LinkFailure, ...]]


def cases() -> Iterator[Case]:
    """Every case: (name, fabric, workload, configuration, link failures)."""
    for sc in SCENARIOS:
        case = build(sc, GPUS, SEED, MESSAGE)
        topo = Topology(case.spec)
        for name in MODES:
            m = get_mode(name)
            w = stripe(case.workload, stripes_for(m, topo, len(case.failures)))
            yield f"{sc}/{name}", case.spec, w, config_for(m, seed=SEED), case.failures
            if name in CEILINGS and sc in CONGESTED:
                cfg = uncontrolled_config(m, seed=SEED)
                yield f"{sc}/{name}:uncontrolled", case.spec, w, cfg, case.failures
        if sc not in WIRE:
            continue
        cfg = config_for(get_mode("ice"), seed=SEED, wire_overhead=0.03)
        yield f"{sc}/ice+wire", case.spec, case.workload, cfg, case.failures
    spec = build("collisions", GPUS, SEED, MESSAGE).spec
    hosts = [h.name for h in spec.hosts[:16]]
    for coll, alg, window in (("all-to-all", "ring", 2), ("all-reduce", "tree", None)):
        phase = {"name": "p", "collective": coll, "channels": 2, "message_bytes": MESSAGE}
        if coll == "all-reduce":
            phase["algorithm"] = alg
        job = parse_job({"name": "j", "hosts": hosts, "phases": [phase]})
        w = workload_from_jobs([job], a2a_window=window)
        for name in ("ecmp+dcqcn", "ecmp+pfc", "ice", "flowlet+hpcc"):
            if window is not None and name == "flowlet+hpcc":
                continue  # windowed rows under flowlet routing are not modelled
            yield f"{coll}-{alg}/{name}", spec, w, config_for(get_mode(name), seed=SEED), ()


def result_hash(res: SimResult) -> str:
    """The first 16 hex digits of the SHA-256 of the run's figures as JSON."""
    d = res.to_dict(trace=True)
    figures = {k: d[k] for k in FIGURES}
    return hashlib.sha256(json.dumps(figures, sort_keys=True).encode()).hexdigest()[:16]


@functools.cache
def run_case(name: str) -> tuple[str, SimResult]:
    """Simulate the case called ``name``: its hash and its result (once per session)."""
    _, spec, w, cfg, failures = CASES[name]
    res = Simulator(Topology(spec), w, cfg, failures=failures).run()
    return result_hash(res), res


def numpy_canary() -> str:
    """A hash of the float operations whose last bits depend on numpy's build and the CPU."""
    rng = np.random.default_rng(7)
    x = rng.random(4096)
    parts = [np.log1p(-x * 0.999), np.expm1(-x), x / (x + 0.1), np.bincount(x.argsort() % 9, x)]
    return hashlib.sha256(b"".join(p.tobytes() for p in parts)).hexdigest()[:16]


def expected_hash(name: str, canary: str) -> str | None:
    """The hash ``name`` must have under the float math ``canary`` names; None when unknown
    (an unrecorded machine, and a case whose hash is known to depend on the math)."""
    if canary == CANARY:
        return GOLDEN[name]
    if canary in GOLDEN_ELSEWHERE:
        return GOLDEN_ELSEWHERE[canary].get(name, GOLDEN[name])
    if name in MATH_SENSITIVE:
        return None
    return GOLDEN[name]


CASES = {c[0]: c for c in cases()}
NAMES = list(CASES)


@pytest.mark.parametrize("name", NAMES)
def test_results_are_bit_identical(name: str) -> None:
    """Each case's figures hash to the recorded value."""
    canary = numpy_canary()
    want = expected_hash(name, canary)
    if want is None:
        pytest.skip(
            f"numpy's float math here (canary {canary}) is not one the table was recorded "
            f"with ({', '.join([CANARY, *GOLDEN_ELSEWHERE])}), and this case's last bits "
            "depend on it"
        )
    got = run_case(name)[0]
    known = canary == CANARY or canary in GOLDEN_ELSEWHERE
    hint = "" if known else f" (numpy canary {canary} is not a recorded one)"
    assert got == want, f"{name}: the results changed{hint}"


def test_the_cases_exercise_every_phase() -> None:
    """The table covers marks, pauses, flowlet moves, reroutes, caps and every case once."""
    assert len(NAMES) == len(list(cases())) == len(GOLDEN)
    results = {n: run_case(n)[1] for n in NAMES}
    assert results["background/ecmp+dcqcn"].cnps > 0
    assert results["background/ecmp+pfc"].pfc_pause_us_total > 0
    assert results["failure/flowlet+hpcc"].flowlet_moves > 0
    assert all(results[f"failure/{m}"].reroutes > 0 for m in MODES)
    assert results["all-to-all-ring/ice"].unfinished == 0
    assert results["background/ice+wire"].config["wire_overhead"] > 0
    differ = {results[f"background/{m}"].flow_finish_us for m in MODES}
    assert len(differ) == len(MODES)  # the modes do not all give one result


def test_an_unknown_machine_still_compares_the_cases_its_math_cannot_move() -> None:
    sensitive = next(iter(MATH_SENSITIVE))
    stable = next(n for n in NAMES if n not in MATH_SENSITIVE)
    assert expected_hash(sensitive, "0" * 16) is None
    assert expected_hash(stable, "0" * 16) == GOLDEN[stable]
    for canary, table in GOLDEN_ELSEWHERE.items():
        assert expected_hash(sensitive, canary) == table.get(sensitive, GOLDEN[sensitive])
        assert expected_hash(stable, canary) == GOLDEN[stable]
    assert expected_hash(sensitive, CANARY) == GOLDEN[sensitive]


def test_other_machines_differ_only_where_recorded() -> None:
    """An entry of GOLDEN_ELSEWHERE lists only cases whose hash there differs."""
    for canary, table in GOLDEN_ELSEWHERE.items():
        assert canary != CANARY and set(table) <= set(GOLDEN), canary
        assert all(table[n] != GOLDEN[n] for n in table), canary


if __name__ == "__main__":  # print the table (after a change meant to change results)
    table = {n: run_case(n)[0] for n in NAMES}
    canary = numpy_canary()
    if canary == CANARY:
        print(f'CANARY = "{canary}"')
        print("GOLDEN = " + json.dumps(table, indent=4).replace("\n}", ",\n}"))
    else:  # this machine's entry of GOLDEN_ELSEWHERE: the cases its math changes
        other = {n: h for n, h in table.items() if h != GOLDEN[n]}
        print(f"# canary {canary} (not the table's {CANARY}): its GOLDEN_ELSEWHERE entry")
        print(f'"{canary}": ' + json.dumps(other, indent=4).replace("\n}", ",\n}"))
    sys.exit(0)
