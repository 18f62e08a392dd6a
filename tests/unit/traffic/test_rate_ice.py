"""ICE end-side control (HPCC-style) from INT hop records."""

from __future__ import annotations

import pytest
from fluid import FluidBottleneck, FluidFlow

from icefabric.traffic.rate import HopSample, IceParams, IceRate, RateControl, make_rate_control

LINE = 100e9
T = 10.0  # base RTT, us


def _ice(**kw: float) -> IceRate:
    return IceRate(IceParams(line_rate_bps=LINE, base_rtt_us=T, **kw))


def _hop(
    tx: int, ts: float, q: int = 0, *, switch: int = 1, port: int = 1, link: float = LINE
) -> HopSample:
    return HopSample(
        switch_id=switch, port=port, link_bps=link, tx_bytes=tx, ts_us=ts, qdepth_bytes=q
    )


def _bytes_at(fraction: float, dt_us: float) -> int:
    """Bytes a 100G port sends in dt_us at ``fraction`` of the line."""
    return round(LINE * fraction * dt_us * 1e-6 / 8)


def test_is_a_rate_control_without_timers() -> None:
    r = _ice()
    assert isinstance(r, RateControl)
    assert r.rate_bps() == LINE
    assert r.next_timer_us() is None


def test_first_record_only_primes_the_hop() -> None:
    r = _ice()
    r.on_feedback(0.0, [_hop(0, 0.0)])
    assert r.rate_bps() == LINE
    assert r.feedbacks == 0


def test_utilisation_from_tx_bytes_and_queue() -> None:
    r = _ice()
    r.on_feedback(0.0, [_hop(0, 0.0, q=12_500)])
    # 80 % of the line over a full T, plus a queue of 12.5 KB = 0.1 * (100G * 10 us): u = 0.9
    r.on_feedback(T, [_hop(_bytes_at(0.8, T), T, q=12_500)])
    assert r.utilisation == pytest.approx(0.9)
    # Under target, first stage: additive increase from the reference (line rate, capped).
    assert r.rate_bps() == LINE


def test_the_most_loaded_hop_counts() -> None:
    r = _ice()
    first = [_hop(0, 0.0, switch=1), _hop(0, 0.0, switch=2)]
    second = [_hop(_bytes_at(0.5, T), T, switch=1), _hop(_bytes_at(1.2, T), T, switch=2)]
    r.on_feedback(0.0, first)
    r.on_feedback(T, second)
    assert r.utilisation == pytest.approx(1.2)
    assert r.rate_bps() == pytest.approx(LINE / (1.2 / 0.95) + 0.005 * LINE)


def test_standing_queue_cuts_the_rate_within_one_rtt() -> None:
    r = _ice()
    ts, tx = 0.0, 0
    for _ in range(300):  # one flow alone on the port: U -> its own rate, which settles at eta
        ts += 1.0
        tx += round(r.rate_bps() * 1e-6 / 8)
        r.on_feedback(ts, [_hop(tx, ts)])
    settled = r.rate_bps()
    assert settled == pytest.approx(0.95 * LINE + 0.005 * LINE, rel=0.01)
    # A standing queue of one BDP (125 KB = 100G x 10 us) appears; feedback keeps coming every us.
    q = 125_000
    cut_at = None
    for k in range(int(T)):
        ts += 1.0
        tx += _bytes_at(1.0, 1.0)
        r.on_feedback(ts, [_hop(tx, ts, q=q)])
        if cut_at is None and r.rate_bps() < settled:
            cut_at = k
    # The first records of the congested port already cut, and within one RTT u = 2 (line rate
    # plus one BDP of queue) has pulled the rate well under the line: the queue drains.
    assert cut_at is not None and cut_at <= 1
    assert r.rate_bps() < 0.6 * LINE


def test_standing_queue_drains_in_the_fluid_model() -> None:
    flows = [FluidFlow(make_rate_control("ice", 10e9, base_rtt_us=T)) for _ in range(2)]
    model = FluidBottleneck(10e9, flows, dt_us=1.0, rtt_us=T)
    model.queue_bytes = 200_000.0  # a standing queue of 16 BDPs before the run starts
    model.run(3 * T)
    # Within one RTT of its feedback arriving (at T), the senders' total is below the line rate.
    total = sum(f.rates[round(2 * T) - 1] for f in flows)
    assert total < 10e9
    model.run(300 * T)
    assert model.queue_bytes == 0.0


def test_additive_then_multiplicative_increase_when_under_target() -> None:
    r = _ice(initial_rate_fraction=0.1)
    ts = 0.0
    r.on_feedback(ts, [_hop(0, ts)])
    rates = []
    tx = 0
    for _ in range(8):
        ts += T
        tx += _bytes_at(0.1, T)
        r.on_feedback(ts, [_hop(tx, ts)])
        rates.append(r.rate_bps())
    # Stages 1..5: +0.5 % of the line each; then multiplicative: ref / (0.1 / 0.95).
    for k in range(5):
        assert rates[k] == pytest.approx(0.1 * LINE + (k + 1) * 0.005 * LINE)
    assert rates[5] == pytest.approx(LINE)  # capped at line rate


def test_reference_updates_once_per_rtt() -> None:
    r = _ice()
    r.on_feedback(0.0, [_hop(0, 0.0)])
    r.on_feedback(T, [_hop(_bytes_at(1.9, T), T)])
    assert r.rate_bps() == pytest.approx(LINE / 2 + 0.005 * LINE)  # reference updated: 50.5 G
    # The same u seen again within the RTT is computed from that reference: no compounding.
    r.on_feedback(T + 2, [_hop(_bytes_at(1.9, T + 2), T + 2)])
    second = r.rate_bps()
    r.on_feedback(T + 4, [_hop(_bytes_at(1.9, T + 4), T + 4)])
    assert r.rate_bps() == pytest.approx(second)
    assert second == pytest.approx(50.5e9 / 2 + 0.005 * LINE)
    # One RTT after the last reference update the reference moves again (to 25.75 G).
    r.on_feedback(2 * T, [_hop(_bytes_at(1.9, 2 * T), 2 * T)])
    r.on_feedback(2 * T + 2, [_hop(_bytes_at(1.9, 2 * T + 2), 2 * T + 2)])
    assert r.rate_bps() == pytest.approx(second / 2 + 0.005 * LINE)


def test_never_above_cap_and_no_windup() -> None:
    r = _ice()
    r.set_cap(30e9)
    assert r.rate_bps() == 30e9
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    for _ in range(50):  # idle path: it would grow, the cap stops it
        ts += T
        tx += _bytes_at(0.3, T)
        r.on_feedback(ts, [_hop(tx, ts)])
        assert r.rate_bps() <= 30e9
    r.set_cap(10e9)
    assert r.rate_bps() == 10e9
    r.set_cap(None)
    ts += T
    tx += _bytes_at(1.5, T)
    r.on_feedback(ts, [_hop(tx, ts)])
    assert r.rate_bps() < 10e9  # decreases from the capped reference, not from a wound-up one


def test_path_change_and_counter_wrap() -> None:
    r = _ice()
    r.on_feedback(0.0, [_hop(2**64 - 1000, 0.0)])
    r.on_feedback(T, [_hop(_bytes_at(0.5, T) - 1000, T)])
    assert r.utilisation == pytest.approx(0.5, rel=1e-3)  # the 64-bit counter wrapped
    u = r.utilisation
    r.on_feedback(2 * T, [_hop(0, 2 * T, switch=9)])  # a different hop: nothing to compare
    assert r.utilisation == u


def test_zero_link_rate_hop_is_ignored() -> None:
    r = _ice()
    r.on_feedback(0.0, [_hop(0, 0.0, link=0.0)])
    assert r.ignored_hops == 1
    assert r.rate_bps() == LINE


def test_scaled_and_factory() -> None:
    p = IceParams().scaled(100e6)
    assert p.base_rtt_us == pytest.approx(9.0 * 1000)
    assert p.ai_rate_bps == pytest.approx(0.005 * 100e6)
    assert IceParams().scaled(1e9, base_rtt_us=42.0).base_rtt_us == 42.0
    r = make_rate_control("ice", 1e9, base_rtt_us=5.0)
    assert isinstance(r, IceRate)
    assert r.params.base_rtt_us == 5.0
    with pytest.raises(ValueError, match="unknown kind 'reno'"):
        make_rate_control("reno", 1e9)
    with pytest.raises(ValueError, match="eta must be in"):
        IceParams(eta=1.5)
