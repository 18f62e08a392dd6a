"""Following the state store's election (etcd): a won term becomes a takeover, a lost lease
stops every write at once.

:class:`Election` is handed the store, the pool, the lock, the link probing, the agent hub and
the replica records explicitly, and the Controller's takeover, job and state callables; the
store's election thread calls :meth:`Election.on_elected` and :meth:`Election.on_fenced`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from icefabric.control.controller.jobs import JobRejected
from icefabric.control.daemon.state import StateWriteError

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.controller.installer import Installer
    from icefabric.control.controller.linkfail import LinkProbing
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.store.base import StateStore

log = logging.getLogger(__name__)


class Election:
    """A replica's side of the store's election, for the Controller that owns it."""

    def __init__(
        self,
        *,
        store: StateStore | None,
        pool: SwitchPool,
        installer: Installer,
        lock: threading.RLock,
        probing: LinkProbing,
        agents: AgentHub,
        jobs: Mapping[str, JobSpec],
        startup_jobs: Callable[[], Sequence[JobSpec]],
        takeovers: list[dict[str, Any]],
        fenced: list[dict[str, Any]],
        connect_timeout: float,
        post: Callable[[Callable[[], None]], None],
        is_stopping: Callable[[], bool],
        reset_shared_state: Callable[[], None],
        set_election_id: Callable[[int], None],
        take_over: Callable[[], None],
        deactivate: Callable[[], bool],
        ensure_job: Callable[[JobSpec], str],
        last_resync: Callable[[], Mapping[str, Any]],
    ) -> None:
        self.store = store
        self.pool = pool
        self.installer = installer
        self.lock = lock
        self.probing = probing
        self.agents = agents
        self.jobs = jobs
        self.startup_jobs = startup_jobs  # --job (icectl run sets them): added if missing
        self.takeovers = takeovers
        self.fenced = fenced
        self.connect_timeout = connect_timeout
        self.post = post
        self.is_stopping = is_stopping
        self.reset_shared_state = reset_shared_state
        self.set_election_id = set_election_id
        self.take_over = take_over
        self.deactivate = deactivate  # not primary any more; whether it was
        self.ensure_job = ensure_job
        self.last_resync = last_resync

    def warm_base(self) -> None:
        """Compute base forwarding ahead (a standby): a takeover then only resyncs."""
        with self.lock:
            self.installer.base()

    def on_elected(self, term: int) -> None:
        """The store's election thread: this replica won ``term`` (queued on the worker)."""
        self.post(lambda: self._take_over(term))

    def _take_over(self, term: int) -> None:
        """Take over as the primary of ``term`` (the worker), or resign the term."""
        store = self.store
        if store is None or self.is_stopping() or getattr(store, "term", 0) != term:
            return  # lost again before the worker got here
        t0 = time.perf_counter()
        with self.lock:
            self.reset_shared_state()
            self.set_election_id(term)  # the switches follow the newest term
            try:
                self.pool.connect_all(self.connect_timeout)
                connected = time.perf_counter()
                self.take_over()
            except Exception as exc:
                log.error("term %d: takeover failed (%s); resigning the term", term, exc)
                self.pool.close_all()
                self.deactivate()
                store.resign()  # type: ignore[attr-defined]
                return
            added = []
            for job in self.startup_jobs():  # --job: idempotent, as on a restart
                try:
                    if self.ensure_job(job) != "unchanged":
                        added.append(job.name)
                except (JobRejected, StateWriteError) as exc:
                    log.error("term %d: --job %s: %s", term, job.name, exc)
            writes = sum(s.writes for s in self.last_resync().values())
            rec = {
                "term": term,
                "ms": (time.perf_counter() - t0) * 1e3,
                "connect_ms": (connected - t0) * 1e3,
                "writes": writes,
                "jobs": len(self.jobs),
                "startup_jobs_added": added,
                "at": time.time(),
            }
            self.takeovers.append(rec)
            log.warning(
                "term %d: primary on %d switches with %d job(s) in %.1f ms (%d writes)",
                term,
                len(self.pool),
                len(self.jobs),
                rec["ms"],
                writes,
            )

    def on_fenced(self, reason: str) -> None:
        """The store's election thread: stop writing now (before the lease can end)."""
        was = self.deactivate()
        self.probing.stop()
        self.pool.close_all()  # in-flight writes fail; the switches forget this controller
        server = self.agents.server
        if server is not None:  # agents move on to the new primary (this one refuses them)
            server.disconnect_all(f"standby controller: {reason}")
        self.fenced.append({"reason": reason, "was_primary": was, "at": time.time()})
        log.error("stopped writing to the switches: %s", reason)
