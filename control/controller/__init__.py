"""The ICE controller: P4Runtime to every switch, base forwarding, plans, failures, telemetry.

One :class:`Controller` object holds all state (no module globals). It connects to every switch
of the topology with one election id; as primary it pushes the pipeline where the switch's cookie
differs, then makes every switch hold exactly base forwarding + the planned flows (a resync: read
back, write only the difference). Started with ``backup=True`` (lower election id) it watches; when
the switches promote it (the primary died) it loads the shared state file (the jobs), replans and
resyncs, so the fabric keeps its paths. A switch that comes back after a restart is resynced the
same way. Link failures replan the flows that crossed the link and install the moved flows first,
then the base-forwarding difference (candidate groups and routes without the dead link).

The daemon (``icectl run``) wraps this in the Unix-socket API of :mod:`icefabric.control.daemon.api`;
see :mod:`icefabric.control.daemon.service`.
"""

from icefabric.control.controller.core import (
    BACKUP_ELECTION_ID,
    PRIMARY_ELECTION_ID,
    Controller,
)
from icefabric.control.controller.jobs import JobRejected
from icefabric.control.controller.statefile import StateWriteError

__all__ = [
    "BACKUP_ELECTION_ID",
    "PRIMARY_ELECTION_ID",
    "Controller",
    "JobRejected",
    "StateWriteError",
]
