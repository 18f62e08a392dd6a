"""EnqueueDepth: the queue the bytes leaving a link met when they joined it (ice.p4's enq_qdepth)."""

from __future__ import annotations

import numpy as np
import pytest

from icefabric.sim.marks import EnqueueDepth


def _run(arrivals: list[float], serve: float, history: int, floor: float = 0.5) -> list[float]:
    """One link fed ``arrivals[t]`` bytes per step, serving ``serve`` a step (FIFO)."""
    enq = EnqueueDepth(1, history)
    arrived = departed = 0.0
    out = []
    for a in arrivals:
        arrived += a
        departed += min(arrived - departed, serve)
        q = np.array([arrived - departed])
        out.append(float(enq.update(q, np.array([departed]), np.array([floor]))[0]))
    return out


def test_a_steady_queue_is_met_by_every_byte() -> None:
    # 10 bytes of standing queue, arrivals = service: every byte waits behind 10
    depths = _run([20.0] + [1.0] * 30, serve=1.0, history=64)
    assert depths[-1] == pytest.approx(20.0 - 1.0)


def test_marks_lag_a_growing_queue_and_outlast_it_while_it_drains() -> None:
    # twice the service arrives for 10 steps, then nothing: the queue grows to 10 and drains
    depths = _run([2.0] * 10 + [0.0] * 15, serve=1.0, history=64)
    # a byte leaving while the queue grows at 2:1 met half of today's queue
    assert depths[9] == pytest.approx(5.0)
    # the last byte leaves an empty queue behind, yet it joined the queue at its deepest
    assert depths[19] == pytest.approx(10.0)
    assert depths[20:] == [0.0] * 5  # nothing leaves: the depth is the (empty) queue


def test_a_byte_older_than_the_history_counts_as_arrived_at_its_start() -> None:
    depths = _run([50.0] + [0.0] * 40, serve=1.0, history=8)
    # it waited 40 steps; the 8 kept (now and 7 before) give it the 7 served since the oldest
    assert depths[40] == pytest.approx(7.0)
    with pytest.raises(ValueError, match="history"):
        EnqueueDepth(1, 0)


def _reference(arr: np.ndarray, dep: np.ndarray, queue: np.ndarray, floor: float, h: int) -> list:
    """The enqueue depth by its definition, every kept step compared at every step."""
    steps, links = arr.shape
    last_over = np.full(links, -h - 1)
    out = []
    for t in range(steps):
        last_over[queue[t] > floor] = t + 1
        depth = queue[t].copy()
        sent = dep[t] > dep[t - 1] if t else dep[t] > 0
        for k in np.flatnonzero((t + 1 - last_over < h) & sent).tolist():
            lo = max(0, t + 1 - h)
            window = arr[lo : t + 1, k]
            before = min(int((window < dep[t, k] - 1e-9).sum()), window.size - 1)
            depth[k] = max(dep[t, k] - dep[lo + before, k], 0.0)
        out.append(depth)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_step_equals_the_definition_with_bursts_drains_and_dropped_queues(seed: int) -> None:
    # links with bursts long and short, some whose queue is dropped (a windowed row re-armed, a
    # failure's go-back-N: arrivals then fall), compared bit for bit with the definition
    rng = np.random.default_rng(seed)
    steps, links, h, floor = 400, 12, 32, 0.5
    serve = rng.uniform(0.5, 2.0, links)
    arrived = np.zeros(links)
    departed = np.zeros(links)
    arr, dep, queue = [], [], []
    for _ in range(steps):
        burst = rng.random(links) < 0.05
        arrived += np.where(burst, rng.uniform(0, 60, links), rng.uniform(0, 1.2, links) * serve)
        drop = rng.random(links) < 0.01
        arrived = np.where(drop, departed, arrived)
        departed += np.minimum(arrived - departed, serve)
        queue.append(arrived - departed)
        dep.append(departed.copy())
        arr.append(queue[-1] + dep[-1])
    a, d, q = np.array(arr), np.array(dep), np.array(queue)
    enq = EnqueueDepth(links, h)
    want = _reference(a, d, q, floor, h)
    for t in range(steps):
        got = enq.update(q[t], d[t], np.full(links, floor))
        assert np.array_equal(got, want[t]), f"step {t}"
