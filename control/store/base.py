"""The store interface: what a controller saves after every change and loads when it takes over.

A :class:`StateStore` is an object the Controller owns. It saves a :class:`Snapshot` (running
jobs, failed links and switches, the links the probes took down, real flow keys from agents,
each job's path choices, the jobs' phases and the caps) and loads it back as a
:class:`~icefabric.control.daemon.state.SharedState`. Two implementations:

* :class:`~icefabric.control.store.filestore.FileStore`: the local state file a primary and its
  backup share on one machine (the default; P4Runtime arbitration picks the primary);
* :class:`~icefabric.control.store.etcd.EtcdStore`: an etcd cluster shared by replicas on
  different servers; it also elects the primary (a lease and a campaign key) and fences it.

A store that elects (``elects`` True) tells the controller when it became primary (with a
term, from which the P4Runtime election id follows) and when it must stop writing (``may_write``
turns False before its lease can end).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.daemon.state import SharedState


class StoreError(Exception):
    """The store cannot be reached or refused a request (one line, names the store)."""


class StoreFenced(StoreError):
    """This replica is no longer the primary: it must not write to the store or the switches."""


@dataclass(slots=True, kw_only=True)
class Snapshot:
    """Everything a standby needs to rebuild the primary's plan (what a save writes)."""

    topology: str
    jobs: list[JobSpec] = field(default_factory=list)
    failed_links: list[int] = field(default_factory=list)  # directed link ids
    failed_switches: list[str] = field(default_factory=list)
    probe_down_links: list[int] = field(default_factory=list)
    flow_keys: dict[str, dict[str, Any]] = field(default_factory=dict)  # flow id -> agent key
    choices: dict[str, list[int]] = field(default_factory=dict)  # job -> path index per flow
    phases: dict[str, str] = field(default_factory=dict)  # job -> its running phase
    caps: dict[str, float] = field(default_factory=dict)  # flow id -> cap (bit/s)


class StateStore(Protocol):
    """A store a controller saves its shared state in (see the module docstring)."""

    kind: str  # "file" or "etcd"
    elects: bool  # whether the store, not P4Runtime arbitration, picks the primary

    def where(self) -> str:
        """Where the state lives (a path or the etcd endpoints), for messages."""
        ...

    def save(self, snapshot: Snapshot) -> bool:
        """Write the snapshot (atomically); False when nothing changed. StoreFenced when this
        replica may no longer write; StoreError when the store cannot be reached."""
        ...

    def load(self, topology: str) -> SharedState:
        """The last saved state of ``topology`` (what could be read plus ``errors``)."""
        ...

    def may_write(self) -> bool:
        """Whether this replica may write to the switches now (its lease holds)."""
        ...

    def wait_writable(self) -> bool:
        """``may_write()``, after waiting out a pause in which the store cannot yet tell
        (etcd: a lease renewal unanswered while etcd elects a leader)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Plain data for ``icectl status``: kind, where, term, replicas."""
        ...

    def close(self) -> None:
        """Release the store (an elected replica resigns)."""
        ...
