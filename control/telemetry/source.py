"""What ``/metrics`` reads of one controller, handed to its collectors explicitly.

The Controller builds one (:meth:`Controller.metrics_source`) from the objects it owns; the
collectors of :mod:`.metrics` and :mod:`.fabric_metrics` read only this, never the Controller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.ccl.job import JobSpec
    from icefabric.control.congestion.allocator import RateAllocator
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.install import ChangeReport
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.telemetry.reports import ReportLog
    from icefabric.control.telemetry.store import TelemetryStore
    from icefabric.control.topology import Topology


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsSource:
    """One controller's state as the metrics collectors read it (shared objects, kept current
    by the controller, and callables for what it computes or replaces)."""

    topo: Topology
    pool: SwitchPool
    lock: threading.RLock
    telemetry: TelemetryStore
    reports: ReportLog
    flows: Mapping[str, Flow]  # the planned flows
    jobs: Mapping[str, JobSpec]
    agents: AgentHub
    rates: RateAllocator
    history: Sequence[ChangeReport]  # every change replanned and installed
    events: EventLog
    failed_switches: AbstractSet[str]
    status: Callable[[], dict[str, Any]]  # what icectl status shows (health, links, switches)
    is_active: Callable[[], bool]  # this controller is the primary
