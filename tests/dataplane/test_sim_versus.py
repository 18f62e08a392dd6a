"""The fluid simulator beside the packet-level experiment on the `make demo` preset (issue 13)
and on the all-to-all preset (issue 19).

``icectl experiment run --preset ecmp-collides`` in virtual time (ice.p4 on embedded switches,
RoCEv2 endpoints, DCQCN / ICE agents), then ``python -m icefabric.experiment.versus`` on its
results.json: both must name the same winner, give ICE ÷ ECMP within 15 % of each other, and
ECMP + DCQCN's busbw within 10 %. Seed 1 is the preset as `make demo` runs it (its ratio was 30 %
apart while ice.p4 queued CNPs behind data); seed 2 collides other flows (its ECMP + DCQCN was
22 % apart while the simulator marked on the queue at departure instead of at enqueue). The
all-to-all preset is compared at the median of seeds 1-5 (its test says why).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from icefabric.experiment.presets import load_preset
from icefabric.experiment.runner import run_experiment
from icefabric.experiment.versus import ceiling, compare, read_run
from icefabric.experiment.virtual import VirtualEngine

pytestmark = [pytest.mark.dataplane, pytest.mark.slow]


@pytest.mark.parametrize("seed", [1, 2])
def test_simulator_and_packet_level_agree_on_the_demo_preset(
    engine: VirtualEngine, tmp_path: Path, seed: int
) -> None:
    exp = replace(load_preset("ecmp-collides"), seed=seed)
    outcome = run_experiment(exp, out_base=tmp_path, engine=engine, plot=False)
    assert outcome.ok and outcome.directory is not None
    out = compare(outcome.directory / "results.json")
    e, i = out["modes"]["ecmp+dcqcn"], out["modes"]["ice"]
    for side in ("packet_level", "sim"):  # the same winner
        assert i[f"{side}_busbw_over_bound"] > e[f"{side}_busbw_over_bound"], (side, out)
    assert abs(out["ratio_difference"]) <= 0.15, out
    pkt, sim = e["packet_level_busbw_over_bound"], e["sim_busbw_over_bound"]
    assert sim == pytest.approx(pkt, rel=0.10), out
    # the ceiling of each mode's paths (the simulator, no congestion control, on the paths the
    # run's switches took): ECMP's busiest links carry 3 ring flows at seed 1 (2/3 of the
    # bound), 2 at seed 2 (1/2), as issue 19 counted them; the planned paths reach the bound
    run = read_run(outcome.directory / "results.json")
    ecmp_ceiling, source = ceiling(run, "ecmp+dcqcn")
    assert source == "the run's paths"
    assert ecmp_ceiling == pytest.approx({1: 2 / 3, 2: 1 / 2}[seed], abs=1e-3)
    assert ceiling(run, "ice")[0] == pytest.approx(1.0, abs=1e-3)
    assert e["packet_level_busbw_over_bound"] <= ecmp_ceiling


def test_simulator_and_packet_level_agree_on_all_to_all(
    engine: VirtualEngine, tmp_path: Path
) -> None:
    """The all-to-all preset over seeds 1-5: the same winner on every seed, and at the median
    of the seeds ICE ÷ ECMP within 15 % and ECMP + DCQCN's busbw within 10 %. Not per seed: a
    run's ECMP + DCQCN is its slowest flow, and one CNP more or less halves that flow's rate
    for the rest of the run, so single seeds were 1-31 % apart (sim/README.md, "All-to-all").
    The medians were 28 % apart (the simulator's ECMP + DCQCN higher on every seed) while the
    simulator shared a NIC in proportion to its flows' rates (``sim/nic.py``); 44 %
    while its next CNP came a whole packet late (``sim.fluid.CNP_PHASE``), 26 % while the
    packet level paced a flow at the rate of its last frame after its agent had raised it
    (``Endpoint.repace``)."""
    ratios: dict[str, list[float]] = {"packet_level": [], "sim": []}
    ecmp: dict[str, list[float]] = {"packet_level": [], "sim": []}
    for seed in range(1, 6):
        exp = replace(load_preset("all-to-all"), seed=seed)
        outcome = run_experiment(exp, out_base=tmp_path / str(seed), engine=engine, plot=False)
        assert outcome.ok and outcome.directory is not None
        out = compare(outcome.directory / "results.json")
        e, i = out["modes"]["ecmp+dcqcn"], out["modes"]["ice"]
        for side in ("packet_level", "sim"):
            assert i[f"{side}_busbw_over_bound"] > e[f"{side}_busbw_over_bound"], (side, out)
            ecmp[side].append(e[f"{side}_busbw_over_bound"])
        ratios["packet_level"].append(out["packet_level_ratio"])
        ratios["sim"].append(out["sim_ratio"])
    median = {k: statistics.median(v) for k, v in ratios.items()}
    assert median["sim"] / median["packet_level"] == pytest.approx(1.0, abs=0.15), ratios
    pkt, sim = statistics.median(ecmp["packet_level"]), statistics.median(ecmp["sim"])
    assert sim == pytest.approx(pkt, rel=0.10), ecmp
