"""Leader election through etcd: one lease per replica, a campaign key, fencing.

Every replica holds a **session lease** (``--lease`` seconds; etcd raises a TTL below its
minimum, 1.5 x its election timeout rounded up) and renews it every eighth of its TTL. Under
that lease it publishes ``replicas/<name>`` (its API and agent addresses). To become primary it
runs a transaction: *if ``leader`` does not exist, create it under my lease*. The key's create
revision is the **term**: it only grows, so the P4Runtime election id derived from it makes the
switches follow the newest primary. A standby retries the campaign every ``poll_s``; the key
disappears when the primary resigns or when its lease runs out (SIGKILL, lost server).

**Fencing.** The primary computes its own deadline from the keepalives etcd acknowledged: the
send time of the last acknowledged keepalive + the TTL granted, less a margin (an eighth of the
TTL, at least 200 ms). etcd cannot expire the lease before that send time + TTL, so once the
deadline passes the replica stops writing (``may_write`` is False, ``on_fenced`` runs) strictly
before any other replica can win. The store's writes are transactions guarded by the term
(``create_revision(leader) == term``), so an old primary can never overwrite a newer one's
entries in etcd; on the switches the newer primary's higher election id rejects its writes.

**Renewing through a member loss.** When the member etcd's own leader runs on is lost, no
keepalive is answered until the others elect a new leader (up to 2 x etcd's election timeout,
plus a vote and a commit). The fencing deadline leaves ``TTL - margin - age of the last ack``
for that, so the ack is kept young (a renewal every eighth of the TTL) and no renewal that could
still succeed is cut off: each goes to the member that answered last, and after a short hedge
delay to every other member at once, each request on its own connection and allowed to run
until the fencing deadline. A follower holds a renewal until its cluster has a leader and then
forwards it, so the first renewal etcd can answer after the election is the one that counts
(its send time, not its answer time, sets the new deadline). etcd's new leader extends every
lease by its election timeout on taking over, so nothing expires in between.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from icefabric.control.store.etcd_client import (
    EtcdClient,
    EtcdError,
    cmp_create_revision,
    op_get,
    op_put,
    unb64,
)
from icefabric.files import parse_json

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 2  # survives an etcd leader election (<= 2 x 500 ms) without fencing
MIN_MARGIN_S = 0.2


def default_replica_name() -> str:
    """``<hostname>-<pid>``: unique per process on a server."""
    return f"{socket.gethostname()}-{os.getpid()}"


class Election:
    """A replica's lease, its registration and its campaign for the ``leader`` key."""

    def __init__(
        self,
        client: EtcdClient,
        prefix: bytes,
        name: str,
        *,
        lease_s: int = DEFAULT_LEASE_S,
        poll_s: float = 0.1,
        on_elected: Callable[[int], None] | None = None,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        if not 1 <= lease_s <= 3600:
            raise ValueError(f"etcd lease: expected 1..3600 s, got {lease_s}")
        self.client = client.copy()  # its own connections: keepalives never wait behind a save
        # one client per member for renewals, so one member that hangs blocks none of the others
        self._ka_clients = [client.copy(endpoints=[ep]) for ep in client.endpoints]
        self._ka_pool: ThreadPoolExecutor | None = None
        self._ka_busy: set[int] = set()  # members with a renewal in flight
        self._ka_first = 0  # the member that answered a renewal last
        self._ka_cond = threading.Condition()
        self._ka_acks = 0  # renewals of the current lease acknowledged so far
        self._ka_lost = ""  # set by a renewal that found the lease gone
        self.prefix = prefix
        self.name = name
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.on_elected = on_elected
        self.on_fenced = on_fenced
        self.info: dict[str, Any] = {"name": name, "host": socket.gethostname(), "pid": os.getpid()}
        self.lease = 0
        self.ttl = 0  # the TTL etcd granted
        self.term = 0  # create revision of our leader key; 0 while not primary
        self.leader: dict[str, Any] = {}  # the leader key's value as last read
        self.leader_term = 0
        self.fenced_reason = ""  # why this replica last stopped writing
        self.fenced_at = 0.0
        self.elected_at = 0.0  # time.monotonic() when it last won
        self._deadline = 0.0  # monotonic: writes must stop before this
        self._expires = 0.0  # monotonic: the earliest the server may expire the lease
        self._last_ka = 0.0
        self._stale: list[int] = []  # leases to revoke when etcd answers again
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._resign = False
        self._registered: dict[str, Any] | None = None  # what replicas/<name> holds now
        self._hold_until = 0.0  # monotonic: after stepping down, let the others campaign first
        self._last_check = 0.0  # monotonic: when the primary last read the leader key

    @property
    def leader_key(self) -> bytes:
        """The campaign key."""
        return self.prefix + b"leader"

    def replica_key(self, name: str | None = None) -> bytes:
        """Where a replica publishes its addresses."""
        return self.prefix + b"replicas/" + (name or self.name).encode()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the session thread (lease, registration, campaign)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="etcd-election", daemon=True)
            self._thread.start()

    def stop(self, *, resign: bool = True) -> None:
        """Stop campaigning; with ``resign`` revoke the lease so a standby takes over at once."""
        self._resign = resign
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            lease, self.lease = self.lease, 0
            self.term = 0
        if resign and lease:
            try:
                self.client.lease_revoke(lease, timeout=1.0)
            except EtcdError as exc:
                log.warning("etcd: could not resign (lease %x): %s", lease, exc)
        if self._ka_pool is not None:
            self._ka_pool.shutdown(wait=False, cancel_futures=True)
            self._ka_pool = None
        self.client.close()
        for c in self._ka_clients:
            c.close()

    def publish(self, **info: Any) -> None:
        """Add to what ``replicas/<name>`` says (API and agent addresses); re-put at once."""
        with self._lock:
            self.info.update(info)
        self._wake.set()

    # -- state -----------------------------------------------------------------------------

    def may_write(self) -> bool:
        """Primary, and the lease certainly still holds (see the module docstring)."""
        return self.term > 0 and time.monotonic() < self._deadline

    def lease_left_s(self) -> float:
        """Seconds until this replica must stop writing (0 when not primary)."""
        return max(0.0, self._deadline - time.monotonic()) if self.term else 0.0

    def margin_s(self) -> float:
        """How long before the lease can end the primary stops writing."""
        return max(MIN_MARGIN_S, self.ttl / 8)

    def renew_s(self) -> float:
        """How often the lease is renewed: every eighth of the TTL (the ack's age is spent from
        the time the fencing deadline leaves for an etcd leader election)."""
        return max(0.05, self.ttl / 8)

    # -- the session thread ----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # the session must outlive any single failure
                log.exception("etcd election: unexpected error")
            period = self.poll_s if self.term == 0 else min(self.renew_s() / 2, 0.25)
            self._wake.wait(period)
            self._wake.clear()

    def _tick(self) -> None:
        now = time.monotonic()
        if self.term and now >= self._deadline:
            self._fence(
                f"lease {self.lease:x} not renewed for {now - self._last_ka:.2f} s "
                "(etcd unreachable or without quorum): stopped writing to the switches"
            )
        self._revoke_stale()
        if not self.lease:
            if not self._grant():
                return
        elif now - self._last_ka >= self.renew_s() and not self._keepalive():
            return
        self._register()
        if self.term:
            if now - self._last_check >= self.ttl:  # saves are term-guarded anyway: rarely
                self._last_check = now
                self._check_leader()
        elif time.monotonic() >= self._hold_until:
            self._campaign()

    def _grant(self) -> bool:
        try:
            t0 = time.monotonic()
            lease, ttl = self.client.lease_grant(self.lease_s)
        except EtcdError as exc:
            log.debug("etcd: lease grant failed: %s", exc)
            return False
        with self._lock:
            self.lease, self.ttl = lease, ttl
            self._last_ka = t0
            self._expires = t0 + ttl
            self._registered = None
        if ttl != self.lease_s:
            log.warning(
                "etcd granted a %d s lease for the %d s asked (its minimum TTL is 1.5 x its "
                "election timeout); takeover takes that much longer",
                ttl,
                self.lease_s,
            )
        return True

    def _keepalive(self) -> bool:
        """Renew the lease (see "Renewing through a member loss" above); whether a renewal was
        acknowledged before this returns (one still in flight may be acknowledged later)."""
        lease = self.lease
        with self._ka_cond:
            acks = self._ka_acks
        n = len(self._ka_clients)
        order = [(self._ka_first + i) % n for i in range(n)]
        self._renew_through(order[:1], lease)
        if self._wait_ack(acks, self.renew_s() / 2) or n == 1:
            return self._ack_result(acks)
        self._renew_through(order[1:], lease)  # the usual member is slow: ask every member
        self._wait_ack(acks, self.renew_s())
        return self._ack_result(acks)

    def _renew_through(self, members: list[int], lease: int) -> None:
        """Send one renewal of ``lease`` to each of ``members`` that has none in flight."""
        if self._ka_pool is None:
            self._ka_pool = ThreadPoolExecutor(
                max_workers=len(self._ka_clients), thread_name_prefix="etcd-renew"
            )
        # until the fencing deadline (a standby: until the lease can end): a renewal that
        # reaches etcd before then still counts, so none is cut off earlier
        end = self._deadline if self.term else self._expires
        timeout = max(0.1, end - time.monotonic())
        for i in members:
            with self._ka_cond:
                if i in self._ka_busy:
                    continue
                self._ka_busy.add(i)
            t0 = time.monotonic()
            fut = self._ka_pool.submit(self._ka_clients[i].lease_keepalive, lease, timeout=timeout)
            fut.add_done_callback(
                lambda f, i=i, t0=t0: self._renewed(i, lease, t0, f)  # type: ignore[misc]
            )

    def _renewed(self, member: int, lease: int, t0: float, fut: Future[int]) -> None:
        """A renewal came back (on a pool thread): move the deadline, or note the lease lost."""
        with self._ka_cond:
            self._ka_busy.discard(member)
            try:
                ttl = fut.result()
            except (EtcdError, RuntimeError) as exc:
                log.debug("etcd: keepalive through member %d failed: %s", member, exc)
                self._ka_cond.notify_all()
                return
            with self._lock:
                if lease != self.lease:
                    pass  # an answer for a lease this replica no longer holds
                elif ttl <= 0:
                    self._ka_lost = f"lease {lease:x} expired in etcd"
                else:
                    # etcd renewed it after t0: it cannot end before t0 + TTL
                    if t0 > self._last_ka:
                        self._last_ka = t0
                    if t0 + ttl > self._expires:
                        self._expires = t0 + ttl
                    if self.term:
                        self._deadline = self._expires - self.margin_s()
                    self._ka_first = member
                    self._ka_acks += 1
            self._ka_cond.notify_all()

    def _wait_ack(self, acks: int, timeout: float) -> bool:
        """Until a renewal after ``acks`` was acknowledged or one found the lease gone."""
        with self._ka_cond:
            return self._ka_cond.wait_for(
                lambda: self._ka_acks != acks or bool(self._ka_lost), timeout
            )

    def _ack_result(self, acks: int) -> bool:
        with self._ka_cond:
            lost, self._ka_lost = self._ka_lost, ""
            ok = self._ka_acks != acks
        if lost:
            self._lease_lost(lost)
            return False
        return ok

    def _register(self) -> None:
        with self._lock:
            info = dict(self.info)
        info["role"] = "primary" if self.term else "standby"
        info["term"] = self.term
        if info == self._registered:
            return
        try:
            self.client.put(self.replica_key(), json.dumps(info).encode(), lease=self.lease)
        except EtcdError as exc:
            log.debug("etcd: registration failed: %s", exc)
            if exc.code == 5:  # lease not found
                self._lease_lost(f"lease {self.lease:x} gone")
            return
        self._registered = info

    def _campaign(self) -> None:
        value = json.dumps({"name": self.name, "lease": f"{self.lease:x}"}).encode()
        t0 = time.monotonic()
        try:
            res = self.client.txn(
                [cmp_create_revision(self.leader_key, 0)],
                [op_put(self.leader_key, value, lease=self.lease)],
                [op_get(self.leader_key)],
                timeout=max(0.2, self.ttl / 3),
            )
        except EtcdError as exc:
            if exc.code == 5:
                self._lease_lost(f"lease {self.lease:x} gone")
            log.debug("etcd: campaign failed: %s", exc)
            return
        if not res.succeeded:
            kvs = res.responses[0].get("response_range", {}).get("kvs", []) if res.responses else []
            if kvs and int(kvs[0].get("lease", 0) or 0) == self.lease:
                # our own key: an earlier try of this campaign committed but its answer was lost
                # (a member that timed out, the request retried on another). The lease was alive
                # then; _expires (from its grant and renewals) is the only bound known for it.
                self._become_primary(int(kvs[0].get("create_revision", 0)), None)
            elif kvs:
                try:
                    self.leader = parse_json(unb64(kvs[0].get("value", "")))
                except ValueError:
                    self.leader = {"name": "?"}
                self.leader_term = int(kvs[0].get("create_revision", 0))
            return
        # the lease was alive when the txn committed, after t0: it holds until t0 + TTL
        self._become_primary(res.revision, t0)

    def _become_primary(self, term: int, alive_at: float | None) -> None:
        """Primary for ``term``; ``alive_at``: a time the lease was certainly alive after."""
        with self._lock:
            if alive_at is not None and self._expires < alive_at + self.ttl:
                self._expires = alive_at + self.ttl
            self._deadline = self._expires - self.margin_s()
            self.term = term
            self.leader = {"name": self.name, "lease": f"{self.lease:x}"}
            self.leader_term = term
            self.elected_at = time.monotonic()
            self.fenced_reason = ""
        log.warning("etcd: %s is primary (term %d)", self.name, self.term)
        self._register()
        if self.on_elected is not None:
            self.on_elected(self.term)

    def _check_leader(self) -> None:
        try:
            kv = self.client.get(self.leader_key, timeout=max(0.1, self.ttl / 3))
        except EtcdError:
            return  # the deadline decides
        if kv is None or kv.create_revision != self.term:
            self._fence(f"the leader key of term {self.term} is gone or replaced in etcd")

    def _lease_lost(self, why: str) -> None:
        if self.term:
            self._fence(why)
        with self._lock:
            self.lease = 0

    def _fence(self, why: str) -> None:
        with self._lock:
            if not self.term:
                return
            term = self.term
            self.term = 0
            self._deadline = 0.0
            self.fenced_reason = why
            self.fenced_at = time.time()
            self._hold_until = time.monotonic() + max(self.ttl, 1)
            if self.lease:
                self._stale.append(self.lease)  # revoke it: our leader key must not linger
            self.lease = 0
        log.error("etcd: %s stops being primary (term %d): %s", self.name, term, why)
        if self.on_fenced is not None:
            self.on_fenced(why)

    def _revoke_stale(self) -> None:
        while self._stale:
            lease = self._stale[0]
            try:
                self.client.lease_revoke(lease, timeout=max(0.1, self.ttl / 3 or 0.3))
            except EtcdError:
                return
            self._stale.pop(0)
