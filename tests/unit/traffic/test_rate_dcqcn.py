"""DCQCN reaction point: each rule of the algorithm, with the paper's numbers."""

from __future__ import annotations

import pytest

from icefabric.traffic.rate import Dcqcn, DcqcnParams, HopSample, RateControl

G = 1.0 / 256.0


def _dcqcn(**kw: float) -> Dcqcn:
    return Dcqcn(DcqcnParams(**kw))


def test_is_a_rate_control_starting_at_line_rate() -> None:
    d = _dcqcn()
    assert isinstance(d, RateControl)
    assert d.rate_bps() == 40e9
    assert d.next_timer_us() is None  # at line rate nothing to recover


def test_first_cnp_halves_the_rate_and_sets_the_target() -> None:
    d = _dcqcn()
    d.on_cnp(100.0)
    assert d.rate_bps() == pytest.approx(20e9)  # alpha starts at 1: Rc * (1 - 1/2)
    assert d.target_bps == 40e9
    assert d.next_timer_us() == pytest.approx(155.0)


def test_alpha_rises_with_cnps_and_decays_per_period_without() -> None:
    d = _dcqcn()
    d.on_cnp(0.0)
    d.on_cnp(56.0)  # one period (K = 55 us) ended, with a CNP: alpha = (1-g) a + g
    assert d.alpha == pytest.approx((1 - G) * 1.0 + G)
    d.on_cnp(56.0 + 10 * 55.0)  # period with a CNP, then 9 empty ones
    assert d.alpha == pytest.approx(((1 - G) * 1.0 + G) * (1 - G) ** 9)


def test_cut_uses_alpha() -> None:
    d = _dcqcn(initial_alpha=0.25)
    d.on_cnp(0.0)
    assert d.rate_bps() == pytest.approx(40e9 * (1 - 0.125))


def test_decrease_at_most_once_per_monitor_period() -> None:
    d = _dcqcn()
    d.on_cnp(0.0)
    d.on_cnp(2.0)  # inside rate_reduce_monitor_period (4 us): counted, no cut
    assert d.rate_bps() == pytest.approx(20e9)
    assert (d.cnps, d.decreases) == (2, 1)
    d.on_cnp(5.0)
    assert d.decreases == 2


def test_min_rate_and_min_decrease_factor() -> None:
    d = _dcqcn(min_rate_bps=15e9, decrease_interval_us=0.0)
    d.on_cnp(0.0)
    d.on_cnp(1.0)
    assert d.rate_bps() == 15e9
    e = _dcqcn(min_decrease_factor=0.8)
    e.on_cnp(0.0)
    assert e.rate_bps() == pytest.approx(32e9)


def test_fast_recovery_then_additive_then_hyper_increase() -> None:
    d = _dcqcn(byte_counter_bytes=10**12)
    d.on_cnp(0.0)
    rc, rt = 20e9, 40e9
    for stage in range(1, 5):  # timer stages 1..4 < F = 5: fast recovery towards Rt
        d.on_timer(55.0 * stage)
        rc = (rt + rc) / 2
        assert d.rate_bps() == pytest.approx(rc)
        assert d.target_bps == rt
    # Cut again from a lower point so that additive increase has room.
    d2 = _dcqcn(byte_counter_bytes=10**12, initial_alpha=1.0)
    d2.set_cap(10e9)
    d2.on_cnp(0.0)  # Rc 5, Rt 10 (cap)
    d2.set_cap(None)
    rc, rt = 5e9, 10e9
    for stage in range(1, 8):
        d2.on_timer(55.0 * stage)
        if stage >= 5:  # timer stage reached F, byte stage 0 < F: additive
            rt += 40e6
        rc = (rt + rc) / 2
        assert d2.target_bps == pytest.approx(rt)
        assert d2.rate_bps() == pytest.approx(rc)


def test_byte_counter_drives_hyper_increase_with_the_timer() -> None:
    d = _dcqcn(byte_counter_bytes=1000, timer_us=55.0)
    d.set_cap(10e9)
    d.on_cnp(0.0)
    d.set_cap(None)
    for _ in range(5):
        d.on_bytes_sent(1.0, 1000)  # byte stages 1..5
    assert d.target_bps == pytest.approx(10e9 + 40e6)  # byte stage 5 = F: additive once
    before = d.target_bps
    for stage in range(1, 6):
        d.on_timer(55.0 * stage)  # timer 1-4: additive; 5 (both at F): hyper, i = 1
    assert d.target_bps == pytest.approx(before + 4 * 40e6 + 400e6)


def test_recovers_to_line_rate_and_stops_its_timer() -> None:
    d = _dcqcn()
    d.on_cnp(0.0)
    t = 0.0
    while d.next_timer_us() is not None and t < 1e6:
        t = d.next_timer_us() or t
        d.on_timer(t)
    assert d.rate_bps() == 40e9
    assert d.next_timer_us() is None


def test_cap_bounds_rate_and_target() -> None:
    d = _dcqcn()
    d.set_cap(7e9)
    assert d.rate_bps() == 7e9
    assert d.target_bps == 7e9
    d.on_cnp(0.0)
    for k in range(1, 200):
        d.on_timer(55.0 * k)
        d.on_bytes_sent(55.0 * k, 10**7)
        assert d.rate_bps() <= 7e9
    d.set_cap(None)
    assert d.next_timer_us() is None or d.rate_bps() <= 40e9


def test_feedback_is_ignored() -> None:
    d = _dcqcn()
    d.on_feedback(0.0, [HopSample(1, 1, 40e9, 0, 0.0, 10**6)])
    assert d.rate_bps() == 40e9


def test_scaled_multiplies_times_and_divides_rates() -> None:
    p = DcqcnParams().scaled(100e6)  # 400 x slower links
    assert p.line_rate_bps == 100e6
    assert p.timer_us == pytest.approx(55.0 * 400)
    assert p.alpha_interval_us == pytest.approx(55.0 * 400)
    assert p.cnp_interval_us == pytest.approx(50.0 * 400)
    assert p.decrease_interval_us == pytest.approx(4.0 * 400)
    assert p.ai_rate_bps == pytest.approx(40e6 / 400)
    assert p.hai_rate_bps == pytest.approx(400e6 / 400)
    assert p.byte_counter_bytes == DcqcnParams().byte_counter_bytes
    assert p.g == G


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("g", 1.5, "g must be in"),
        ("timer_us", 0.0, "timer_us must be > 0"),
        ("initial_alpha", 2.0, "initial_alpha must be in"),
        ("min_decrease_factor", -1.0, "min_decrease_factor"),
    ],
)
def test_bad_parameters_are_named(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DcqcnParams(**{field: value})


def test_bad_cap_rejected() -> None:
    with pytest.raises(ValueError, match="cap must be > 0"):
        _dcqcn().set_cap(0.0)
