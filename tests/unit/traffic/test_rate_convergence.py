"""N flows on one bottleneck converge to the fair share (fluid model, no network)."""

from __future__ import annotations

import pytest
from fluid import FluidBottleneck, FluidFlow

from icefabric.traffic.rate import DcqcnParams, IceRate, make_rate_control

RTT_US = 10.0


def _model(
    kind: str, capacity: float, n: int, stagger_us: float, *, scale: float = 1.0
) -> FluidBottleneck:
    """``n`` flows of ``kind`` starting ``stagger_us`` apart; times x scale, rates / scale."""
    rate = capacity / scale
    flows = [
        FluidFlow(
            make_rate_control(kind, rate, base_rtt_us=RTT_US * scale),
            start_us=i * stagger_us * scale,
        )
        for i in range(n)
    ]
    return FluidBottleneck(
        rate,
        flows,
        dt_us=1.0 * scale,
        rtt_us=RTT_US * scale,
        kmin_bytes=20_000 if kind == "dcqcn" else 5_000,
        kmax_bytes=200_000,
        pmax=0.01,
        cnp_interval_us=DcqcnParams().scaled(rate).cnp_interval_us,
    )


def _assert_fair(model: FluidBottleneck, window_us: float, tolerance: float = 0.05) -> None:
    fair = model.capacity_bps / len(model.flows)
    for i, mean in enumerate(model.mean_rates(window_us)):
        assert abs(mean - fair) <= tolerance * fair, (
            f"flow {i}: mean rate {mean / 1e9:.3f} Gbit/s, fair share {fair / 1e9:.3f} Gbit/s"
        )


@pytest.mark.parametrize("n", [2, 4])
def test_ice_flows_converge_to_the_fair_share_within_500_rtts(n: int) -> None:
    model = _model("ice", 100e9, n, stagger_us=100.0)
    model.run(500 * RTT_US)
    _assert_fair(model, window_us=5 * RTT_US)
    # ... and stay there, with the queue empty (HPCC's point: eta < 1 keeps queues near zero).
    model.run(200 * RTT_US)
    _assert_fair(model, window_us=5 * RTT_US)
    assert max(model.queue_trace[-200:]) == 0.0


@pytest.mark.parametrize("n", [2, 4])
def test_dcqcn_flows_converge_to_the_fair_share_within_4000_rtts(n: int) -> None:
    model = _model("dcqcn", 40e9, n, stagger_us=1000.0)
    model.run(4000 * RTT_US)
    # DCQCN oscillates around its share (sawtooth of cuts and recovery): judge means over 500 RTTs.
    _assert_fair(model, window_us=500 * RTT_US)
    model.run(1000 * RTT_US)
    _assert_fair(model, window_us=500 * RTT_US)
    assert all(f.cnps > 0 for f in model.flows)


def test_unequal_start_is_unfair_before_it_converges() -> None:
    # The convergence tests would pass trivially if flows simply started equal: they do not.
    model = _model("dcqcn", 40e9, 4, stagger_us=1000.0)
    model.run(500 * RTT_US)
    means = model.mean_rates(100 * RTT_US)
    assert max(means) > 1.2 * min(means)


@pytest.mark.parametrize("kind", ["dcqcn", "ice"])
def test_scaled_parameters_give_the_same_dynamics_at_a_lower_line_rate(kind: str) -> None:
    fast = _model(kind, 40e9, 3, stagger_us=300.0)
    slow = _model(kind, 40e9, 3, stagger_us=300.0, scale=400.0)  # 100 Mbit/s, times x 400
    fast.run(2000 * RTT_US)
    slow.run(2000 * RTT_US * 400.0)
    for a, b in zip(fast.flows, slow.flows, strict=True):
        assert len(a.rates) == len(b.rates)
        for ra, rb in zip(a.rates[::97], b.rates[::97], strict=True):
            assert ra / 40e9 == pytest.approx(rb * 400.0 / 40e9, rel=1e-6, abs=1e-9)


def test_ice_never_exceeds_its_cap_under_changing_caps() -> None:
    model = _model("ice", 100e9, 3, stagger_us=50.0)
    caps = [20e9, None, 5e9, 33e9, 1e9, 50e9]
    for step, cap in enumerate(caps):
        control = model.flows[step % 3].control
        assert isinstance(control, IceRate)
        control.set_cap(cap)
        limit = cap if cap is not None else 100e9
        start = len(model.flows[step % 3].rates)
        model.run(100 * RTT_US)
        assert max(model.flows[step % 3].rates[start:]) <= limit
