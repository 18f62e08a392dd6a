"""The state file a primary and its backup share: running jobs and failed links, written
atomically (temp file + rename), so a standby that takes over plans exactly what the primary
planned."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from icefabric.control.ccl.job import JobSpec, parse_job

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class SharedState:
    """What a standby needs to rebuild the primary's plan."""

    jobs: list[JobSpec] = field(default_factory=list)
    failed_links: list[int] = field(default_factory=list)  # directed link ids
    failed_switches: list[str] = field(default_factory=list)
    probe_down_links: list[int] = field(default_factory=list)  # taken down by link probes


def save_state(
    path: Path,
    topology: str,
    jobs: Iterable[JobSpec],
    *,
    failed_links: Iterable[int] = (),
    failed_switches: Iterable[str] = (),
    probe_down_links: Iterable[int] = (),
) -> None:
    """Write the state of ``topology`` to ``path`` (never half-written)."""
    data = {
        "topology": topology,
        "jobs": [j.to_dict() for j in jobs],
        "failed_links": sorted(int(x) for x in failed_links),
        "failed_switches": sorted(failed_switches),
        "probe_down_links": sorted(int(x) for x in probe_down_links),
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)


def load_state(path: Path, topology: str) -> SharedState:
    """The state saved for ``topology`` (empty when the file is missing or for another one)."""
    if not path.exists():
        return SharedState()
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("topology") != topology:
        log.warning("%s: state of topology %r ignored", path, data.get("topology"))
        return SharedState()
    return SharedState(
        jobs=[parse_job(jd, source=str(path)) for jd in data.get("jobs", [])],
        failed_links=[int(x) for x in data.get("failed_links", [])],
        failed_switches=[str(x) for x in data.get("failed_switches", [])],
        probe_down_links=[int(x) for x in data.get("probe_down_links", [])],
    )
