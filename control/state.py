"""The state file a primary and its backup share: the running jobs, written atomically."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from icefabric.control.ccl.job import JobSpec, parse_job

log = logging.getLogger(__name__)


def save_jobs(path: Path, topology: str, jobs: Iterable[JobSpec]) -> None:
    """Write the jobs of ``topology`` to ``path`` (temp file + rename: never half-written)."""
    data = {"topology": topology, "jobs": [j.to_dict() for j in jobs]}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)


def load_jobs(path: Path, topology: str) -> list[JobSpec]:
    """The jobs saved for ``topology`` (none when the file is missing or for another topology)."""
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("topology") != topology:
        log.warning("%s: state of topology %r ignored", path, data.get("topology"))
        return []
    return [parse_job(jd, source=str(path)) for jd in data.get("jobs", [])]
