"""The agent's start table: a flow of no job with no cap that has not sent yet starts at its
destination prefix's rate (longest match); a job's flows, capped flows, flows that sent, and
bad entries are left alone."""

from __future__ import annotations

import pytest

from icefabric.traffic.agent import Agent
from icefabric.traffic.rate import HopSample
from icefabric.traffic.rate.dcqcn import Dcqcn, DcqcnParams
from icefabric.traffic.rate.ice import IceParams, IceRate

LINE = 100e9


@pytest.mark.parametrize("kind", ["ice", "dcqcn"])
def test_unstarted_uncapped_flows_take_their_prefix_rate(kind: str) -> None:
    agent = Agent("h1", "10.0.1.1", line_rate_bps=LINE, kind=kind, base_rtt_us=10.0)
    a = agent.open_flow("10.0.2.1")
    b = agent.open_flow("10.0.2.9")
    c = agent.open_flow("10.0.3.1")
    capped = agent.open_flow("10.0.2.2")
    sent = agent.open_flow("10.0.2.3")
    planned = agent.open_flow("10.0.2.4", job="j", flow_id="j/p/c0/r0->r1")
    agent.apply_caps({capped: 70e9})
    agent.on_bytes_sent(sent, 0.0, 4096)
    agent.apply_starts([("10.0.2.0/24", 40e9), ("10.0.2.9/32", 10e9), ("bad", 1.0)])
    assert agent.rate_bps(a) == 40e9
    assert agent.rate_bps(b) == 10e9  # the longest prefix wins
    assert agent.rate_bps(c) == LINE  # no prefix: the algorithm's own start
    assert agent.rate_bps(capped) == 70e9
    assert agent.rate_bps(sent) == LINE  # already running: its algorithm governs it
    assert agent.rate_bps(planned) == LINE  # a job's flow: planned, its caps follow
    assert agent.stats.starts_invalid == 1 and agent.stats.starts_applied == 2
    # a flow opened later starts at the table's rate too; a new table replaces the old one
    late = agent.open_flow("10.0.2.5")
    assert agent.rate_bps(late) == 40e9
    agent.apply_starts([])
    assert agent.start_rate("10.0.2.5") is None


def test_start_is_clamped_and_ignored_after_the_first_reaction() -> None:
    p = IceParams(line_rate_bps=LINE)
    ice = IceRate(p)
    ice.start_at(0.0)
    assert ice.rate_bps() == p.min_rate_bps
    ice.start_at(10 * LINE)
    assert ice.rate_bps() == LINE
    for ts in (1.0, 20.0):  # the first record primes the hop, the second is a reaction
        hop = HopSample(
            switch_id=1, port=1, link_bps=LINE, tx_bytes=int(ts * 1e4), ts_us=ts, qdepth_bytes=0
        )
        ice.on_feedback(ts, [hop])
    reacted = ice.rate_bps()
    ice.start_at(1e9)
    assert ice.rate_bps() == reacted
    with pytest.raises(ValueError, match="start_at"):
        ice.start_at(-1.0)
    d = Dcqcn(DcqcnParams(line_rate_bps=LINE))
    d.start_at(30e9)
    assert d.rate_bps() == 30e9
    d.on_cnp(0.0)
    cut = d.rate_bps()
    d.start_at(LINE)
    assert d.rate_bps() == cut
