"""The local state file as a store: the default, exactly the behaviour of a state file a primary
and its backup share on one machine (format and trust checks: :mod:`icefabric.control.daemon.state`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icefabric.control.daemon.state import StateWriteError, encode_state, load_state
from icefabric.control.store.base import Snapshot
from icefabric.private import write_private

if TYPE_CHECKING:
    from icefabric.control.daemon.state import SharedState


log = logging.getLogger(__name__)


class FileStore:
    """The shared state file (written atomically, mode 0600; an unchanged state is not
    rewritten). P4Runtime arbitration picks the primary, so it never fences."""

    kind = "file"
    elects = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._written = b""  # bytes last written

    def where(self) -> str:
        """The file's path."""
        return str(self.path)

    def save(self, snapshot: Snapshot) -> bool:
        """Write the snapshot unless the file already holds these bytes."""
        data = encode_state(
            snapshot.topology,
            snapshot.jobs,
            failed_links=snapshot.failed_links,
            failed_switches=snapshot.failed_switches,
            probe_down_links=snapshot.probe_down_links,
            flow_keys=snapshot.flow_keys,
            choices=snapshot.choices,
        )
        if data == self._written and self.path.exists():
            return False
        try:
            write_private(self.path, data)
        except OSError as exc:
            log.error("state file %s: cannot write: %s", self.path, exc.strerror or exc)
            raise StateWriteError(
                f"state file {self.path}: cannot write ({exc.strerror or exc}); the change "
                "was not applied: the switches still hold what the file says"
            ) from exc
        self._written = data
        return True

    def load(self, topology: str) -> SharedState:
        """The state file's contents for ``topology`` (empty when missing)."""
        return load_state(self.path, topology)

    def may_write(self) -> bool:
        """Always: the switches' arbitration fences a file-store primary."""
        return True

    def wait_writable(self) -> bool:
        """Always, at once."""
        return True

    def describe(self) -> dict[str, Any]:
        """Kind and path."""
        return {"kind": self.kind, "where": str(self.path)}

    def close(self) -> None:
        """Nothing to release."""
