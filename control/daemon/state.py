"""The state file a primary and its backup share: running jobs, failed links and the real flow
keys agents reported, written
atomically (a fresh 0600 temp file renamed into place, see ``icefabric.private.write_private``), so a standby
that takes over plans exactly what the primary planned.

A state file that is missing is empty state. One that cannot be read (truncated, not JSON, a job
that no longer validates) is reported in ``SharedState.errors`` and whatever could be read is
returned, so a takeover never stops at a bad file. A file another user owns, a symlink or a file
over ``MAX_STATE_BYTES`` is refused the same way (``icefabric.private.read_private``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefabric.control.agents.protocol import ProtocolError, key_from_dict
from icefabric.control.ccl.job import JobSpec, parse_job
from icefabric.control.flowkey import FlowKey
from icefabric.files import JsonError, parse_json
from icefabric.private import read_private, write_private
from icefabric.topo.spec import SpecError

log = logging.getLogger(__name__)

MAX_STATE_BYTES = 256 * 1024 * 1024


@dataclass(slots=True, kw_only=True)
class SharedState:
    """What a standby needs to rebuild the primary's plan."""

    jobs: list[JobSpec] = field(default_factory=list)
    failed_links: list[int] = field(default_factory=list)  # directed link ids
    failed_switches: list[str] = field(default_factory=list)
    probe_down_links: list[int] = field(default_factory=list)  # taken down by link probes
    flow_keys: dict[str, FlowKey] = field(default_factory=dict)  # real keys agents reported
    # The primary's plan: per job, each flow's candidate index in the job's flow order, so a
    # standby restores exactly these paths (its own search may end elsewhere in its time).
    choices: dict[str, list[int]] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)  # job -> running phase (etcd store)
    caps: dict[str, float] = field(default_factory=dict)  # flow id -> cap bit/s (etcd store)
    errors: list[str] = field(default_factory=list)  # what could not be read, one line each


class StateWriteError(RuntimeError):
    """The state file could not be written: the change it carried was rolled back, not applied
    to any switch (one line, names the file and the reason)."""


def encode_state(
    topology: str,
    jobs: Iterable[JobSpec],
    *,
    failed_links: Iterable[int] = (),
    failed_switches: Iterable[str] = (),
    probe_down_links: Iterable[int] = (),
    flow_keys: Mapping[str, Mapping[str, object]] | None = None,
    choices: Mapping[str, list[int]] | None = None,
) -> bytes:
    """The state file's bytes (deterministic: the same state gives the same bytes)."""
    data: dict[str, Any] = {
        "topology": topology,
        "jobs": [j.to_dict() for j in jobs],
        "failed_links": sorted(int(x) for x in failed_links),
        "failed_switches": sorted(failed_switches),
        "probe_down_links": sorted(int(x) for x in probe_down_links),
    }
    if flow_keys:
        data["flow_keys"] = {k: dict(v) for k, v in sorted(flow_keys.items())}
    if choices:
        data["choices"] = dict(choices)
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def save_state(
    path: Path,
    topology: str,
    jobs: Iterable[JobSpec],
    *,
    failed_links: Iterable[int] = (),
    failed_switches: Iterable[str] = (),
    probe_down_links: Iterable[int] = (),
) -> None:
    """Write the state of ``topology`` to ``path`` (never half-written, mode 0600)."""
    write_private(
        path,
        encode_state(
            topology,
            jobs,
            failed_links=failed_links,
            failed_switches=failed_switches,
            probe_down_links=probe_down_links,
        ),
    )


def load_state(path: Path, topology: str) -> SharedState:
    """The state saved for ``topology``: empty when the file is missing or for another topology;
    what could be read plus ``errors`` when it is damaged or untrusted."""
    try:
        raw = read_private(path, MAX_STATE_BYTES)
    except OSError as exc:
        return SharedState(errors=[f"{path}: cannot read the state file: {exc}"])
    if raw is None:
        return SharedState()
    try:
        data: Any = parse_json(raw)
    except JsonError as exc:
        return SharedState(errors=[f"{path}: not a JSON state file ({exc})"])
    if not isinstance(data, dict):
        return SharedState(errors=[f"{path}: expected a JSON object at the top level"])
    if data.get("topology") != topology:
        log.warning("%s: state of topology %r ignored", path, str(data.get("topology"))[:100])
        return SharedState()
    return state_from_data(data, str(path))


def state_from_data(data: dict[str, Any], path: str) -> SharedState:
    """A decoded state document (the file's JSON object, or the documents of the etcd store)
    checked field by field; what cannot be read goes to ``errors`` naming ``path``."""
    state = SharedState()
    jobs = data.get("jobs", [])
    if not isinstance(jobs, list):
        state.errors.append(f"{path}: jobs: expected a list")
        jobs = []
    for i, jd in enumerate(jobs):
        try:
            state.jobs.append(parse_job(jd, source=f"{path}: jobs[{i}]"))
        except SpecError as exc:
            state.errors.append(str(exc).splitlines()[0])
    state.failed_links = _ints(data, "failed_links", path, state.errors)
    state.probe_down_links = _ints(data, "probe_down_links", path, state.errors)
    keys = data.get("flow_keys", {})
    if isinstance(keys, dict):
        for fid, kd in keys.items():
            try:
                state.flow_keys[str(fid)] = key_from_dict(kd, where=f"flow_keys[{fid!r}]")
            except ProtocolError as exc:
                state.errors.append(f"{path}: {exc}")
    else:
        state.errors.append(f"{path}: flow_keys: expected an object of flow id -> key")
    ch = data.get("choices", {})
    if isinstance(ch, dict) and all(
        isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        for v in ch.values()
    ):
        state.choices = {str(k): list(v) for k, v in ch.items()}
    else:
        state.errors.append(f"{path}: choices: expected lists of path indexes per job; replanned")
    sw = data.get("failed_switches", [])
    if isinstance(sw, list) and all(isinstance(x, str) for x in sw):
        state.failed_switches = list(sw)
    else:
        state.errors.append(f"{path}: failed_switches: expected a list of switch names")
    ph = data.get("phases", {})
    if isinstance(ph, dict) and all(isinstance(v, str) for v in ph.values()):
        state.phases = {str(k): v for k, v in ph.items()}
    else:
        state.errors.append(f"{path}: phases: expected an object of job -> phase name")
    caps = data.get("caps", {})
    if isinstance(caps, dict) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in caps.values()
    ):
        state.caps = {str(k): float(v) for k, v in caps.items()}
    else:
        state.errors.append(f"{path}: caps: expected an object of flow id -> bit/s >= 0")
    return state


def _ints(data: dict[str, Any], key: str, path: str, errors: list[str]) -> list[int]:
    v = data.get(key, [])
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v)
    errors.append(f"{path}: {key}: expected a list of link ids")
    return []
