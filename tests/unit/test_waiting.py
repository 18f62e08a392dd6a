"""icefabric/waiting.py: polled predicates, condition variables and deadlines."""

from __future__ import annotations

import threading

from icefabric.waiting import Deadline, poll_until, wait_on


def test_poll_until_reports_whether_the_predicate_held() -> None:
    calls = iter([False, False, True])
    assert poll_until(lambda: next(calls), 5, 0.001)
    assert not poll_until(lambda: False, 0.02, 0.005)


def test_deadline_counts_down_to_zero() -> None:
    d = Deadline(60)
    assert 59 < d.left() <= 60 and not d.expired
    gone = Deadline(-1)
    assert gone.left() == 0 and gone.expired


def test_wait_on_wakes_on_notify_and_gives_up_at_the_deadline() -> None:
    cond = threading.Condition()
    box: list[int] = []

    def put() -> None:
        with cond:
            box.append(1)
            cond.notify_all()

    t = threading.Timer(0.05, put)
    t.start()
    try:
        # the recheck interval is longer than the whole wait: only the notify can end it early
        assert wait_on(cond, lambda: bool(box), 30, 30)
    finally:
        t.join()
    assert not wait_on(cond, lambda: len(box) > 1, 0.05, 0.01)
