"""The election's lease renewal through an etcd leader election, and a campaign whose answer was
lost: the renewal paths with stand-in members (each member's client replaced), the campaign
against a real 3-member etcd."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from icefabric.control.store.election import Election
from icefabric.control.store.etcd_client import EtcdClient, EtcdUnavailable
from icefabric.control.store.localcluster import LocalEtcdCluster
from icefabric.waiting import poll_until

TTL = 2


class Member:
    """A member's renewal endpoint: down (refuses at once), answering, or holding each renewal
    until ``release`` is set (a follower waiting for its cluster's new leader)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.release = threading.Event()
        self.sent: list[float] = []

    def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int:
        self.sent.append(time.monotonic())
        if self.mode == "down":
            raise EtcdUnavailable("connection refused")
        if self.mode == "hold" and not self.release.wait(timeout):
            raise EtcdUnavailable("timed out")
        return TTL

    def close(self) -> None:
        self.release.set()


@pytest.fixture
def primary() -> Iterator[Election]:
    """An election that holds lease 7 and term 41, its last renewal acknowledged just now, with
    no session thread: the tests call its renewal the way the thread does."""
    el = Election(EtcdClient("etcd://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"), b"/t/", "r1")
    now = time.monotonic()
    el.lease, el.ttl, el.term = 7, TTL, 41
    el._last_ka, el._expires = now, now + TTL
    el._deadline = el._expires - el.margin_s()
    yield el
    for m in el._ka_clients:
        m.close()
    el.stop(resign=False)


def members(el: Election, *modes: str) -> list[Member]:
    ms = [Member(m) for m in modes]
    el._ka_clients = ms  # type: ignore[assignment]
    return ms


def test_a_renewal_a_member_holds_through_an_etcd_election_counts_from_its_send_time(
    primary: Election,
) -> None:
    el = primary
    dead, a, b = members(el, "down", "hold", "hold")  # etcd's leader lost, no new one yet
    old_deadline = el._deadline
    assert el._keepalive() is False  # nothing answered yet; the held renewals stay in flight
    assert dead.sent and a.sent and b.sent  # the member that answered last, then every other
    assert el.term == 41 and el.may_write()
    a.release.set()  # etcd has a leader again: the held renewal is forwarded and answered
    assert poll_until(lambda: el._deadline > old_deadline, 5)
    assert el._deadline == pytest.approx(a.sent[0] + TTL - el.margin_s())
    assert el._ka_first == 1  # the next renewal goes to the member that answered
    assert el.term == 41


def test_a_hanging_member_delays_no_renewal_through_the_others(primary: Election) -> None:
    el = primary
    el._ka_first = 1
    _, hung, ok = members(el, "answer", "hold", "answer")
    assert el._keepalive() is True  # asked the hanging member first, then the rest
    assert hung.sent and ok.sent
    assert el._keepalive() is True  # now straight to a member that answers
    assert len(hung.sent) == 1  # its first renewal is still in flight: not asked twice
    assert el._ka_first in (0, 2)


def test_a_renewal_renews_only_the_lease_it_was_sent_for(primary: Election) -> None:
    el = primary
    (m,) = members(el, "hold")
    assert el._keepalive() is False
    el.lease = 8  # fenced and granted a new lease meanwhile
    before = el._deadline
    m.release.set()
    assert poll_until(lambda: not el._ka_busy, 5)
    assert el._deadline == before  # lease 7's renewal moved nothing for lease 8


def test_renewals_come_every_eighth_of_the_lease(primary: Election) -> None:
    assert primary.renew_s() == TTL / 8  # the ack is at most this old when etcd's leader dies
    assert primary.renew_s() + primary.margin_s() < TTL / 2  # the rest is for etcd's election


def test_a_campaign_whose_answer_was_lost_finds_its_own_key_and_leads(
    etcd3: LocalEtcdCluster,
) -> None:
    elected: list[int] = []
    el = Election(EtcdClient(etcd3.url), b"/t/", "r1", on_elected=elected.append)
    try:
        assert el._grant()
        # the first try committed (the key under our lease) but its answer never came back
        rev = el.client.put(el.leader_key, b'{"name": "r1"}', lease=el.lease)
        el._campaign()
        assert el.term == rev and elected == [rev] and el.may_write()
        other = Election(EtcdClient(etcd3.url), b"/t/", "r2")
        try:
            assert other._grant()
            other._campaign()  # someone else's key: r2 stays a standby and names the leader
            assert other.term == 0 and other.leader_term == rev
        finally:
            other.stop()
    finally:
        el.stop()
