"""Leader election through etcd: one lease per replica, a campaign key, fencing.

Every replica holds a **session lease** (``--lease`` seconds; etcd raises a TTL below its
minimum, 1.5 x its election timeout rounded up) and keeps it alive every quarter of its TTL. Under
that lease it publishes ``replicas/<name>`` (its API and agent addresses). To become primary it
runs a transaction: *if ``leader`` does not exist, create it under my lease*. The key's create
revision is the **term**: it only grows, so the P4Runtime election id derived from it makes the
switches follow the newest primary. A standby retries the campaign every ``poll_s``; the key
disappears when the primary resigns or when its lease runs out (SIGKILL, lost server).

**Fencing.** The primary computes its own deadline from the keepalives etcd acknowledged: the
send time of the last acknowledged keepalive + the TTL granted, less a margin (an eighth of the
TTL, at least 200 ms). etcd cannot expire the lease before that send time + TTL, so once the
deadline passes the replica stops writing (``may_write`` is False) strictly before any other
replica can win.

**Paused, not yet fenced.** At the deadline the primary only *pauses*: it keeps its term and
keeps renewing. A renewal that etcd then acknowledges proves the lease never ended (an expired
lease cannot be renewed), so the leader key under it never went away and no other replica can
have won: writes resume in the same term. That is what losing the member etcd's own leader runs
on looks like: no renewal is answered until the other members elect a leader (0.6-2 s on a
loaded host), which used to fence the primary, revoke its lease and fail the save in flight.
Writers wait through a pause (``wait_writable``). Only when no renewal has been acknowledged a
``hold`` (one TTL) past the earliest time etcd could end the lease, or etcd says the lease is
gone, is the primary **fenced**: it gives up its term, ``on_fenced`` runs (the controller lets
go of the switches and agents) and it revokes the lease once etcd answers. The store's writes are transactions guarded by the term
(``create_revision(leader) == term``), so an old primary can never overwrite a newer one's
entries in etcd; on the switches the newer primary's higher election id rejects its writes.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from icefabric.control.store.etcd_client import (
    EtcdClient,
    EtcdError,
    cmp_create_revision,
    op_get,
    op_put,
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
        self.paused_since = 0.0  # monotonic: when writes paused at the deadline (0: not paused)
        self._changed = threading.Condition(self._lock)  # the deadline moved, or fenced
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
        self.client.close()

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

    def hold_s(self) -> float:
        """How long past the earliest end of its lease a paused primary waits for a renewal
        to be acknowledged before it gives up its term (one TTL: an etcd leader election)."""
        return float(max(self.ttl, 1))

    def wait_writable(self) -> bool:
        """``may_write()``, waiting through a pause until a renewal resumes writing (True) or
        the primary is fenced (False); at most until the pause must end either way."""
        with self._changed:
            while True:
                if self.may_write():
                    return True
                now = time.monotonic()
                # the session thread fences at _expires + hold; a stopped thread never will
                end = self._expires + self.hold_s() + 0.5
                if not self.term or now >= end:
                    return False
                self._changed.wait(min(end - now, 0.05))

    # -- the session thread ----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # the session must outlive any single failure
                log.exception("etcd election: unexpected error")
            period = self.poll_s if self.term == 0 else min(self.ttl / 6, 0.25)
            self._wake.wait(period)
            self._wake.clear()

    def _tick(self) -> None:
        now = time.monotonic()
        if self.term and now >= self._deadline:
            if not self.paused_since:
                self.paused_since = now
                log.warning(
                    "etcd: %s pauses writing (term %d): lease %x not renewed for %.2f s; the "
                    "term holds while a renewal can still prove the lease alive",
                    self.name,
                    self.term,
                    self.lease,
                    now - self._last_ka,
                )
            if now >= self._expires + self.hold_s():
                self._fence(
                    f"lease {self.lease:x} not renewed for {now - self._last_ka:.2f} s "
                    "(etcd unreachable or without quorum): stopped writing to the switches"
                )
        self._revoke_stale()
        if not self.lease:
            if not self._grant():
                return
        elif now - self._last_ka >= self.ttl / 4 and not self._keepalive():
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
        t0 = time.monotonic()
        try:
            ttl = self.client.lease_keepalive(self.lease, timeout=max(0.1, self.ttl / 2))
        except EtcdError as exc:
            log.debug("etcd: keepalive failed: %s", exc)
            return False
        if ttl <= 0:
            self._lease_lost(f"lease {self.lease:x} expired in etcd")
            return False
        with self._lock:
            self._last_ka = t0
            self._expires = t0 + ttl
            if self.term:
                self._deadline = self._expires - self.margin_s()
                if self.paused_since and self.may_write():
                    # etcd renewed the lease: it never ended, nobody else can have won
                    log.warning(
                        "etcd: %s resumes writing (term %d): lease renewed after a %.2f s pause",
                        self.name,
                        self.term,
                        time.monotonic() - self.paused_since,
                    )
                    self.paused_since = 0.0
            self._changed.notify_all()
        return True

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
            if kvs:
                from icefabric.control.store.etcd_client import unb64

                try:
                    self.leader = parse_json(unb64(kvs[0].get("value", "")))
                except ValueError:
                    self.leader = {"name": "?"}
                self.leader_term = int(kvs[0].get("create_revision", 0))
            return
        with self._lock:
            # the lease was alive when the txn committed, after t0: it holds until t0 + TTL
            if self._expires < t0 + self.ttl:
                self._expires = t0 + self.ttl
            self._deadline = self._expires - self.margin_s()
            self.paused_since = 0.0
            self.term = res.revision
            self.leader = {"name": self.name, "lease": f"{self.lease:x}"}
            self.leader_term = res.revision
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
            self.paused_since = 0.0
            self._changed.notify_all()
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
