"""ICE end-side control (HPCC-style) from INT hop records."""

from __future__ import annotations

import math

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


# ---- anchored on the plan --------------------------------------------------------------------


def _steady(r: IceRate, fraction: float, ts: float, tx: int, q: int = 0) -> tuple[float, int]:
    """One record T later of a port sending ``fraction`` of the line, queue ``q``."""
    ts += T
    tx += _bytes_at(fraction, T)
    r.on_feedback(ts, [_hop(tx, ts, q=q)])
    return ts, tx


def test_a_capped_flow_sends_at_its_cap_while_the_plan_holds() -> None:
    r = _ice()
    r.set_cap(40e9)
    assert r.anchored and r.rate_bps() == 40e9
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    for _ in range(20):  # the hop runs full (U = 1 >= eta) with no queue: as planned
        ts, tx = _steady(r, 1.0, ts, tx, q=4_000)
        assert r.rate_bps() == 40e9 and r.anchored
    assert r.utilisation == pytest.approx(1.0 + 4_000 * 8 / (LINE * T * 1e-6))
    # without the anchor HPCC's rule cuts to eta: the headroom the plan does not need
    plain = _ice(anchor=False)
    plain.set_cap(40e9)
    ts, tx = 0.0, 0
    plain.on_feedback(ts, [_hop(tx, ts)])
    ts, tx = _steady(plain, 1.0, ts, tx)
    assert plain.rate_bps() == pytest.approx(40e9 * 0.95 + 0.05 * 40e9)
    ts, tx = _steady(plain, 1.0, ts, tx)
    assert plain.rate_bps() < 40e9 and not plain.anchored


def _record(
    r: IceRate, fraction: float, ts: float, tx: int, q: int = 0, *, dt: float = T
) -> tuple[float, int]:
    """One record ``dt`` later of a port sending ``fraction`` of the line, queue ``q``."""
    ts += dt
    tx += _bytes_at(fraction, dt)
    r.on_feedback(ts, [_hop(tx, ts, q=q)])
    return ts, tx


def test_records_closer_than_an_rtt_need_a_queue_in_two_in_a_row() -> None:
    """HPCC's min(q, q') where records come a packet apart: a queue only one record saw is a
    transient; two in a row hand the flow to HPCC's rule, at once, from the cap."""
    r = _ice()
    r.set_cap(50e9)
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    bdp = LINE * T * 1e-6 / 8  # 125 KB
    ts, tx = _record(r, 1.0, ts, tx, q=int(0.5 * bdp), dt=T / 2)
    ts, tx = _record(r, 1.0, ts, tx, q=0, dt=T / 2)
    assert r.anchored and r.rate_bps() == 50e9
    ts, tx = _record(r, 1.0, ts, tx, q=int(0.5 * bdp), dt=T / 2)
    assert r.anchored and not r.queued
    ts, tx = _record(r, 1.0, ts, tx, q=int(0.5 * bdp), dt=T / 2)
    assert not r.anchored and r.queued
    assert r.rate_bps() < 50e9


def test_sampled_records_an_rtt_apart_hand_over_on_one_record() -> None:
    """Sampled INT: records of a hop are a base RTT or more apart, separate samples; the one
    that shows a standing queue hands the flow over and its queue counts at once (min(q, q')
    would report the queue of a sampling interval ago: none here)."""
    r = _ice()
    r.set_cap(50e9)
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    bdp = LINE * T * 1e-6 / 8  # 125 KB
    ts, tx = _steady(r, 1.0, ts, tx, q=0)
    assert r.anchored
    ts, tx = _steady(r, 1.0, ts, tx, q=int(0.5 * bdp))
    assert not r.anchored and r.queued
    u = r.utilisation
    assert u == pytest.approx(1.5)
    assert r.rate_bps() == pytest.approx(50e9 / (u / 0.95) + 0.05 * 50e9)  # W_AI = (1-eta) cap
    # 3 RTTs apart (a slow flow's samples): the same
    s = _ice()
    s.set_cap(50e9)
    s.on_feedback(0.0, [_hop(0, 0.0)])
    _record(s, 1.0, 0.0, 0, q=int(0.5 * bdp), dt=3 * T)
    assert not s.anchored and s.utilisation == pytest.approx(1.5)
    # a queue under the threshold stays within the plan
    a = _ice()
    a.set_cap(50e9)
    a.on_feedback(0.0, [_hop(0, 0.0)])
    _steady(a, 1.0, 0.0, 0, q=int(0.09 * bdp))
    assert a.anchored and a.rate_bps() == 50e9


def test_a_cap_does_not_lift_a_flow_over_a_standing_queue() -> None:
    """Caps arrive a control delay after the change they answer (a replan, a phase): a flow
    that is draining a queue keeps HPCC's rule, pulled down to a lower cap but not lifted to
    a cap above its rate; it returns to the cap by the ramp once the queue is gone."""
    r = _ice()
    r.set_cap(50e9)
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    bdp = LINE * T * 1e-6 / 8
    ts, tx = _steady(r, 1.0, ts, tx, q=int(1.0 * bdp))
    cut = r.rate_bps()
    assert not r.anchored and r.queued and cut < 30e9
    r.set_cap(50e9)  # the same cap set again: no news
    assert not r.anchored and r.rate_bps() == cut
    r.set_cap(40e9)  # a new cap above the rate: not lifted while the queue stands
    assert not r.anchored and r.rate_bps() == cut
    r.set_cap(20e9)  # below it: pulled down at once
    assert not r.anchored and r.rate_bps() == 20e9
    # the queue is gone: the ramp back to the cap, anchored there
    for _ in range(40):
        ts, tx = _steady(r, 0.2, ts, tx)
        if r.anchored:
            break
    assert r.anchored and r.rate_bps() == 20e9 and not r.queued
    # a flow without a standing queue takes a new cap at once, up or down, anchored
    r.set_cap(45e9)
    assert r.anchored and r.rate_bps() == 45e9
    # an uncapped flow draining a queue is not lifted by its first cap either
    f = _ice()
    f.on_feedback(0.0, [_hop(0, 0.0)])
    _steady(f, 1.0, 0.0, 0, q=int(1.0 * bdp))
    low = f.rate_bps()
    assert f.queued and low < 60e9
    f.set_cap(80e9)
    assert not f.anchored and f.rate_bps() == low


def test_a_planned_flow_whose_path_moved_reads_the_new_hops_queue_at_once() -> None:
    """A failure replan moves a capped flow onto another uplink (a hop of its record names
    another switch and port) one control delay before the new caps can arrive: the first
    record on the new path counts that hop's own queue, a standing one with the port at its
    line rate (u = q / BDP + 1), and the flow leaves its cap in that record; before this rule
    the new hop was only primed and the flow stayed at its old cap for another record."""
    bdp = LINE * T * 1e-6 / 8  # 125 KB
    r = _ice()
    r.set_cap(50e9)
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts, switch=1, port=3), _hop(0, ts, switch=5, port=2)])
    ts += T
    tx += _bytes_at(0.5, T)
    r.on_feedback(ts, [_hop(tx, ts, switch=1, port=3), _hop(tx, ts, switch=5, port=2)])
    assert r.anchored and not r.moved
    # moved: uplink port 4 to spine 6, whose queue already holds 0.5 BDP
    ts += T
    r.on_feedback(
        ts, [_hop(0, ts, q=int(0.5 * bdp), switch=1, port=4), _hop(0, ts, switch=6, port=2)]
    )
    assert r.moved and r.queued and not r.anchored
    assert r.utilisation == pytest.approx(1.5)
    assert r.rate_bps() == pytest.approx(50e9 / (1.5 / 0.95) + 0.05 * 50e9)
    # a move onto hops without a standing queue keeps the plan's rate (the cap stays the
    # ceiling; nothing says the new path is short of it)
    c = _ice()
    c.set_cap(50e9)
    c.on_feedback(0.0, [_hop(0, 0.0, switch=1, port=3)])
    c.on_feedback(T, [_hop(0, T, q=int(0.05 * bdp), switch=1, port=4)])
    assert c.moved and c.anchored and c.rate_bps() == 50e9
    # an uncapped flow (HPCC as published, the peers' rule) only primes a new hop
    h = _ice()
    h.on_feedback(0.0, [_hop(0, 0.0, switch=1, port=3)])
    h.on_feedback(T, [_hop(0, T, q=int(0.5 * bdp), switch=1, port=4)])
    assert not h.moved and h.feedbacks == 0 and h.rate_bps() == LINE
    # nor does a planned flow's very first record count as a move
    f = _ice()
    f.set_cap(50e9)
    f.on_feedback(0.0, [_hop(0, 0.0, q=int(0.5 * bdp), switch=1, port=4)])
    assert not f.moved and f.anchored and f.feedbacks == 0


def test_a_moved_flow_does_not_return_to_its_old_cap_until_the_next_caps() -> None:
    """The cap a moved flow holds was computed for its old path: once the new hop's queue is
    gone it follows HPCC's rule below that cap (eta's headroom, no ramp to the cap, never
    anchored there) until the controller's next cap set, which anchors it again even when the
    cap is the same value (the cap set that answers the move)."""
    bdp = LINE * T * 1e-6 / 8
    r = _ice()
    r.set_cap(50e9)
    ts = 0.0
    r.on_feedback(ts, [_hop(0, ts, switch=1, port=3)])
    ts += T
    r.on_feedback(ts, [_hop(0, ts, q=int(1.0 * bdp))])  # moved to port 1, queued
    assert r.moved and not r.anchored
    tx = 0
    for _ in range(60):  # the new hop runs at 40 % with no queue: HPCC's increase, not the ramp
        ts, tx = _record(r, 0.4, ts, tx, q=0)
        assert not r.anchored
    assert r.rate_bps() == 50e9  # (HPCC's rule may reach the old cap: its ceiling)
    assert not r.anchored and r.moved
    # without the move the same flow ramps to its cap and is anchored there
    s = _ice()
    s.set_cap(50e9)
    s.on_feedback(0.0, [_hop(0, 0.0)])
    ts, tx = _record(s, 1.0, 0.0, 0, q=int(1.0 * bdp))
    assert not s.anchored and not s.moved
    for _ in range(60):
        ts, tx = _record(s, 0.4, ts, tx, q=0)
        if s.anchored:
            break
    assert s.anchored
    # the controller's next cap set answers the move: the same value anchors it again
    r.set_cap(50e9)
    assert r.anchored and not r.moved and r.rate_bps() == 50e9
    # a lower cap after a move with the queue still standing pulls it down, not anchored
    q = _ice()
    q.set_cap(50e9)
    q.on_feedback(0.0, [_hop(0, 0.0, switch=1, port=3)])
    q.on_feedback(T, [_hop(0, T, q=int(1.0 * bdp), switch=1, port=4)])
    high = q.rate_bps()
    q.set_cap(25e9)
    assert not q.moved and not q.anchored and q.rate_bps() == min(high, 25e9)


def test_the_anchored_regime_tolerates_two_frames_per_planned_flow_of_the_hop() -> None:
    """A cap of B / 10 means about 10 planned flows on the bottleneck hop, each of which may
    have two frames arrive at once (its own and one its pacer sends ahead): 19 frames queued
    stay anchored (though over 10 % of the BDP), more leave; without the frame size the 10 %
    rule alone decides."""
    frame = 4_158
    bdp = LINE * T * 1e-6 / 8  # 125 KB: 10 % is 12.5 KB, 3 frames
    for frame_bytes, stays in ((frame, True), (0, False)):
        r = _ice(frame_bytes=frame_bytes)
        r.set_cap(LINE / 10)
        assert r.params.anchor_threshold(LINE / 10) == pytest.approx(
            max(0.1, 2 * frame_bytes * 8 / (LINE / 10 * T * 1e-6))
        )
        ts, tx = 0.0, 0
        r.on_feedback(ts, [_hop(tx, ts)])
        for _ in range(5):  # a burst of 19 frames, over and over: within the plan
            ts, tx = _steady(r, 1.0, ts, tx, q=19 * frame)
        assert 19 * frame > 0.1 * bdp
        assert r.anchored is stays
    for per_flow, queued, stays in ((2, 22, False), (1, 12, False), (1, 9, True)):
        r = _ice(frame_bytes=frame, frames_per_flow=per_flow)
        r.set_cap(LINE / 10)
        ts, tx = 0.0, 0
        r.on_feedback(ts, [_hop(tx, ts)])
        ts, tx = _steady(r, 1.0, ts, tx, q=queued * frame)
        ts, tx = _steady(r, 1.0, ts, tx, q=queued * frame)
        # more than frames_per_flow frames per planned flow: what the plan did not foresee
        assert r.anchored is stays, (per_flow, queued)
    with pytest.raises(ValueError, match="frames_per_flow"):
        _ice(frames_per_flow=0)
    # a flow with the whole line planned shares its hop with nobody: the 10 % rule decides
    assert r.params.anchor_threshold(LINE) == pytest.approx(0.1)


def test_back_at_the_cap_once_the_queue_is_gone() -> None:
    r = _ice()
    r.set_cap(50e9)
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    for _ in range(3):
        ts, tx = _steady(r, 1.0, ts, tx, q=60_000)
    assert not r.anchored
    low = r.rate_bps()
    assert low < 40e9
    # the unplanned traffic left: the port carries this flow's half-link share only, no queue
    steps = []
    for _ in range(40):
        ts, tx = _steady(r, r.rate_bps() / LINE, ts, tx)
        steps.append(r.rate_bps())
        if r.anchored:
            break
    assert r.anchored and r.rate_bps() == 50e9
    # the queue is gone: a ramp of (1 - eta) x cap = 2.5 Gbit/s per RTT, back at the cap in
    # (cap - low) / 2.5 G steps (HPCC's multiplicative rule, U / eta > 1 on a full link, would
    # approach the cap only geometrically)
    for k in range(len(steps) - 1):
        assert steps[k] == pytest.approx(low + (k + 1) * 2.5e9)
    assert len(steps) == math.ceil((50e9 - low) / 2.5e9)


def test_the_capped_additive_step_is_derived_from_the_cap() -> None:
    p = IceParams(line_rate_bps=LINE, base_rtt_us=T)
    assert p.capped_ai_bps(20e9) == pytest.approx(0.05 * 20e9)
    assert IceParams(derived_ai=False).capped_ai_bps(20e9) == pytest.approx(0.005 * LINE)
    with pytest.raises(ValueError, match="anchor_queue_bdp must be > 0"):
        IceParams(anchor_queue_bdp=0.0)


def test_planned_flows_give_way_to_unplanned_traffic_and_return_to_their_caps() -> None:
    # Two planned flows capped at half the link each (the plan fills it), and an unplanned,
    # uncapped flow that arrives at 200 RTTs and leaves at 600 RTTs.
    cap = 50e9
    planned = [FluidFlow(make_rate_control("ice", LINE, base_rtt_us=T)) for _ in range(2)]
    for f in planned:
        f.control.set_cap(cap)
    guest = FluidFlow(
        make_rate_control("ice", LINE, base_rtt_us=T, ice=IceParams(initial_rate_fraction=0.2)),
        start_us=200 * T,
        stop_us=600 * T,
    )
    model = FluidBottleneck(LINE, [*planned, guest], dt_us=1.0, rtt_us=T)
    model.run(199 * T)
    assert all(f.rates[-1] == cap for f in planned)  # at the cap, not at eta x cap
    assert max(model.queue_trace) == 0.0
    model.run(401 * T)
    # the end side makes room: the planned flows leave their caps whenever a queue stands (a
    # cycle: HPCC's cut, the queue drains, a ramp of 5 % of the link per RTT back towards the
    # caps until a queue over 10 % of the BDP stands again); the queue stays under a quarter
    # of the BDP (10 % + the ramp's excess over the two records and one RTT of feedback
    # delay) and drains in every cycle, the guest gets its share and the link stays full
    bdp = LINE * T * 1e-6 / 8
    shared = model.queue_trace[round(250 * T) :]
    assert max(shared) < 0.25 * bdp
    assert all(
        min(shared[i : i + round(50 * T)]) == 0.0 for i in range(0, len(shared), round(50 * T))
    )
    means = model.mean_rates(200 * T)
    assert means[2] > 0.05 * LINE
    assert means[0] < 0.95 * cap
    assert sum(means) > 0.95 * LINE
    model.run(200 * T)
    # the guest left: both planned flows are back at their caps, anchored, queue empty
    assert all(f.rates[-1] == cap and f.control.anchored for f in planned)  # type: ignore[attr-defined]
    assert max(model.queue_trace[-50:]) == 0.0


def test_the_ramp_is_w_ai_per_rtt_elapsed_when_feedback_is_sparse() -> None:
    # a slow flow's sampled feedback may come several RTTs apart: the ramp back to the cap
    # still adds W_AI per RTT of elapsed time
    r = _ice()
    r.set_cap(10e9)
    ts, tx = 0.0, 0
    r.on_feedback(ts, [_hop(tx, ts)])
    for _ in range(2):
        ts, tx = _steady(r, 1.0, ts, tx, q=60_000)
    assert not r.anchored
    low = r.rate_bps()
    ts += 3 * T  # the next record comes three RTTs later, the queue gone
    tx += _bytes_at(0.9, 3 * T)
    r.on_feedback(ts, [_hop(tx, ts)])
    assert r.rate_bps() == pytest.approx(min(10e9, low + 3 * 0.05 * 10e9))
