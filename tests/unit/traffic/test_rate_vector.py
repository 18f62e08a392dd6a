"""The array forms of DCQCN and ICE equal the per-flow classes, event by event."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from icefabric.traffic.rate import Dcqcn, DcqcnParams, HopSample, IceParams, IceRate
from icefabric.traffic.rate.vector import DcqcnArray, IceArray

N = 12


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dcqcn_array_equals_scalar(seed: int) -> None:
    rng = random.Random(seed)
    params = DcqcnParams().scaled(100e9)
    scalars = [Dcqcn(params) for _ in range(N)]
    arr = DcqcnArray(N, params)
    now = 0.0
    for step in range(3000):
        now += rng.uniform(0.0, 8.0)
        ev = rng.random()
        if ev < 0.25:
            rows = sorted(rng.sample(range(N), rng.randint(1, N)))
            for r in rows:
                scalars[r].on_cnp(now)
            arr.on_cnp(np.array(rows, dtype=np.int64), now)
        elif ev < 0.6:
            rows = sorted(rng.sample(range(N), rng.randint(1, N)))
            nb = [rng.randint(0, 3_000_000) for _ in rows]
            for r, b in zip(rows, nb, strict=True):
                scalars[r].on_bytes_sent(now, b)
            arr.on_bytes_sent(np.array(rows, dtype=np.int64), np.array(nb, dtype=np.float64))
        elif ev < 0.97:
            for s in scalars:
                s.on_timer(now)
            arr.on_timer(now)
        else:
            rows = sorted(rng.sample(range(N), 2))
            caps = [rng.choice([None, rng.uniform(5e9, 100e9)]) for _ in rows]
            for r, c in zip(rows, caps, strict=True):
                scalars[r].set_cap(c)
            arr.set_caps(
                np.array([np.inf if c is None else c for c in caps]), np.array(rows, dtype=np.int64)
            )
        rates = arr.rates()
        for i, s in enumerate(scalars):
            assert _close(s.rate_bps(), rates[i]), (step, i, s.rate_bps(), rates[i])
            assert _close(s.alpha, arr.alpha[i]) or s.cnps == 0
            nt = s.next_timer_us()
            assert (nt is None and np.isnan(arr.next_timer[i])) or _close(
                nt or 0.0, arr.next_timer[i]
            )
    assert sum(s.decreases for s in scalars) > 50  # the sequence exercised decreases


@pytest.mark.parametrize(
    ("seed", "max_queue", "variant"),
    [
        (1, 200_000, {}),
        (2, 200_000, {}),
        # queues around the anchored regime's threshold (10 % of 100 KB): both regimes and the
        # switches between them, often
        (3, 20_000, {}),
        (4, 20_000, {}),
        (5, 20_000, {"anchor": False}),
        (6, 20_000, {"derived_ai": False}),
        # the burst allowance of B / cap frames (caps of 5-100 % of the line: 1-20 frames)
        (7, 60_000, {"frame_bytes": 2_000}),
        (8, 60_000, {"frame_bytes": 2_000}),
    ],
)
def test_ice_array_equals_scalar(seed: int, max_queue: int, variant: dict[str, Any]) -> None:
    rng = random.Random(seed)
    hops = 4
    params = IceParams(**variant).scaled(100e9, base_rtt_us=8.0)
    scalars = [IceRate(params) for _ in range(N)]
    arr = IceArray(N, hops, params)
    tx = [[0] * hops for _ in range(N)]
    paths = [[rng.randrange(3) for _ in range(hops)] for _ in range(N)]
    lengths = [rng.choice([2, 4]) for _ in range(N)]
    now = 0.0
    anchored_seen = switches = held = moved_seen = 0
    before = [False] * N
    for step in range(1500):
        now += rng.uniform(0.5, 6.0)
        if rng.random() < 0.03:
            rows = sorted(rng.sample(range(N), 2))
            picks = [
                rng.choice([None, rng.uniform(5e9, 100e9), rng.uniform(5e9, 120e9), "same"])
                for _ in rows
            ]
            caps = [  # "same": the cap the flow has already (a re-sent cap set)
                (None if math.isinf(arr.cap[r]) else float(arr.cap[r])) if c == "same" else c
                for r, c in zip(rows, picks, strict=True)
            ]
            for r, c in zip(rows, caps, strict=True):
                held += c is not None and scalars[r].queued  # a cap that does not lift it
                scalars[r].set_cap(c)
            arr.set_caps(
                np.array([np.inf if c is None else c for c in caps]), np.array(rows, dtype=np.int64)
            )
        if step < 30 or rng.random() < 0.01:  # a start table (only flows with no reaction yet)
            rows = sorted(rng.sample(range(N), 3))
            starts = [rng.choice([0.0, rng.uniform(1e9, 150e9)]) for _ in rows]
            for r, b in zip(rows, starts, strict=True):
                scalars[r].start_at(b)
            arr.start_at(np.array(rows, dtype=np.int64), np.array(starts))
        rows = sorted(rng.sample(range(N), rng.randint(1, N)))
        hop_id = np.full((len(rows), hops), -1, dtype=np.int64)
        bps = np.zeros((len(rows), hops))
        txa = np.zeros((len(rows), hops))
        ts = np.zeros((len(rows), hops))
        q = np.zeros((len(rows), hops))
        for k, r in enumerate(rows):
            # a path change: another switch at some hop (1 % of records: a capped flow whose
            # path moved stays off its cap until its next cap, so moves must leave room for
            # the anchored regime; path lengths changing below move paths too)
            if rng.random() < 0.01:
                paths[r][rng.randrange(hops)] = rng.randrange(3)
            if rng.random() < 0.05:
                lengths[r] = rng.choice([2, 4])
            samples = []
            for h in range(lengths[r]):
                tx[r][h] += rng.randint(0, 120_000)
                sample = HopSample(
                    switch_id=paths[r][h] + 1,
                    port=h,
                    link_bps=rng.choice([100e9, 100e9, 400e9, 0.0]) if h == 3 else 100e9,
                    tx_bytes=tx[r][h],
                    ts_us=now - rng.uniform(0, 0.4),
                    qdepth_bytes=rng.choice([0, rng.randint(0, max_queue)]),
                )
                samples.append(sample)
                hop_id[k, h] = sample.switch_id * 1000 + sample.port
                bps[k, h] = sample.link_bps
                txa[k, h] = sample.tx_bytes
                ts[k, h] = sample.ts_us
                q[k, h] = sample.qdepth_bytes
            scalars[r].on_feedback(now, samples)
        arr.on_feedback(np.array(rows, dtype=np.int64), now, hop_id, bps, txa, ts, q)
        rates = arr.rates()
        for i, s in enumerate(scalars):
            assert _close(s.rate_bps(), rates[i]), (step, i, s.rate_bps(), rates[i])
            assert _close(s.utilisation, arr.u[i])
            assert s.anchored == arr.anchored[i], (step, i)
            assert s.queued == arr.queued[i], (step, i)
            assert s.moved == arr.moved[i], (step, i)
        anchored_seen += sum(s.anchored for s in scalars)
        moved_seen += sum(s.moved for s in scalars)
        switches += sum(s.anchored != a for s, a in zip(scalars, before, strict=True))
        before = [s.anchored for s in scalars]
    assert sum(s.feedbacks for s in scalars) > 1000
    if variant.get("anchor", True) and max_queue < 100_000:
        # (records T or more apart leave the anchored regime on one record over the threshold)
        assert anchored_seen > 250 and switches > 50, (anchored_seen, switches)
        assert held > 5, held  # caps arriving while a queue stands
        assert moved_seen > 100, moved_seen  # path moves of capped flows, and caps after them


@pytest.mark.parametrize(("seed", "variant"), [(1, {}), (2, {"frame_bytes": 2_000}), (3, {})])
def test_ice_array_link_records_equal_hop_records(seed: int, variant: dict[str, Any]) -> None:
    """on_link_feedback (the simulator's per-link records) leaves the same state, bit for bit,
    as on_feedback given the same records gathered per hop: rows getting records every call,
    skipping calls, changing links, reset to a new QP's state, and under caps."""
    rng = np.random.default_rng(seed)
    n, hops, nl = 40, 5, 23
    params = IceParams(**variant).scaled(100e9, base_rtt_us=8.0)
    pristine = IceArray(n, hops, params)
    a = IceArray(n, hops, params)  # hop records
    b = IceArray(n, hops, params)  # link records
    paths = rng.integers(0, nl, size=(n, hops))
    paths[rng.random((n, hops)) < 0.2] = -1  # absent hops
    tx = np.zeros(nl)
    bps = np.where(rng.random(nl) < 0.1, 0.0, rng.choice([100e9, 400e9], size=nl))
    now = 0.0
    fresh_calls = 0
    for step in range(600):
        now += float(rng.choice([0.0, rng.uniform(0.5, 12.0)], p=[0.02, 0.98]))
        tx = tx + rng.integers(0, 150_000, size=nl)
        q = np.where(rng.random(nl) < 0.5, 0.0, rng.integers(0, 60_000, size=nl).astype(float))
        ev = rng.random()
        if ev < 0.05:  # links change for some rows
            r = rng.choice(n, size=3, replace=False)
            paths[r, rng.integers(0, hops)] = rng.integers(-1, nl, size=3)
        elif ev < 0.08:  # some rows start over as new QPs (sim/window.py reset_rows)
            r = np.sort(rng.choice(n, size=4, replace=False))
            for arr in (a, b):
                for name, val in vars(arr).items():
                    if isinstance(val, np.ndarray) and val.shape[:1] == (n,):
                        val[r] = getattr(pristine, name)[r]
        elif ev < 0.12:
            caps = np.where(rng.random(n) < 0.3, np.inf, rng.uniform(5e9, 120e9, size=n))
            a.set_caps(caps)
            b.set_caps(caps)
        rows = (
            np.arange(n)
            if rng.random() < 0.6
            else np.sort(rng.choice(n, size=int(rng.integers(1, n)), replace=False))
        )
        hop = paths[rows]
        present = hop >= 0
        ts = now - 0.25
        a.on_feedback(rows, now, hop, bps[hop], tx[hop], np.where(present, ts, 0.0), q[hop])
        fresh_calls += int(b.prev_in_rec[rows].sum())
        b.on_link_feedback(rows, now, hop, bps, tx, q, ts)
        for name in (
            "rate",
            "ref",
            "u",
            "stage",
            "anchored",
            "queued",
            "moved",
            "last_ref_update",
            "feedbacks",
            "cap",
        ):
            assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), (step, name)
    assert fresh_calls > 5000  # most records took the per-link path
    assert int(a.feedbacks.sum()) > 5000 and a.anchored.any()
