"""The virtual-time engine delivers the controller's caps through the agent channel's framing,
one control delay after they were pushed."""

from __future__ import annotations

import math

import pytest

from icefabric.experiment.virtual_fabric import VirtualConfig, VirtualFabric
from icefabric.topo.generators import leaf_spine


def test_caps_arrive_through_the_channel_after_the_control_delay() -> None:
    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1)
    fab = VirtualFabric(spec, VirtualConfig(kind="ice"))  # hosts only: no switch is started
    key = fab.open_flow("h1", "h2")
    other = fab.open_flow("h2", "h1")
    agent = fab.host("h1").agent
    line = agent.line_rate_bps
    fab.push_caps({key: line / 4}, delay_us=500.0)
    fab.run_until(499)
    assert agent.flow(key).cap_bps is None and agent.rate_bps(key) == line
    fab.run_until(500)
    assert agent.flow(key).cap_bps == line / 4 and agent.rate_bps(key) == line / 4
    # every host got its complete set (h2's is empty: its flow has no cap), as frames
    assert fab.channel.pushes == 2 and fab.channel.applied == 2 and fab.channel.bytes > 0
    assert fab.host("h2").agent.flow(other).cap_bps is None
    # the next set replaces the whole set: no cap for the flow it leaves out
    fab.push_caps({other: line / 2}, delay_us=0.0)
    fab.run_until(500)
    assert agent.flow(key).cap_bps is None
    assert fab.host("h2").agent.flow(other).cap_bps == line / 2
    with pytest.raises(ValueError, match="delay_us must be >= 0"):
        fab.push_caps({}, delay_us=-1.0)


def test_a_cap_raised_mid_gap_acts_at_once() -> None:
    """The engine re-paces a host after its agent's events (``Endpoint.repace``): a flow capped
    to 1/100 of the line and then uncapped sends its next frame after what is left of its gap at
    the line rate, not after the whole gap of the old rate (the packet level lagged the
    simulator so on all-to-all)."""
    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1)
    fab = VirtualFabric(spec, VirtualConfig(kind="ice"))  # hosts only: frames go nowhere
    key = fab.open_flow("h1", "h2")
    ep = fab.host("h1").endpoint
    line = ep.agent.line_rate_bps
    gap = ep.frame_bytes * 8 / line * 1e6  # one full frame at line rate, us
    fab.push_caps({key: line / 100}, delay_us=0.0)
    fab.run_until(0)
    fab.post(key, 64 * ep.mtu, tag=1)
    fab.run_until(0)
    stats = ep.tx[key].stats
    assert stats.packets_sent == 1
    t0 = stats.first_tx_us
    assert t0 is not None
    fab.run_until(math.ceil(t0 + 25 * gap))
    assert stats.packets_sent == 1  # a quarter into the 100-gap wait
    fab.push_caps({key: line}, delay_us=0.0)  # the cap rises to the line (anchored: at once)
    fab.run_until(math.ceil(t0 + 25 * gap + gap) + 1)
    assert stats.packets_sent >= 2
    assert stats.last_tx_us is not None and stats.last_tx_us < t0 + 30 * gap
