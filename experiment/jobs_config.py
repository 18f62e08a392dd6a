"""The workload and jobs sections of an experiment file (``experiment/config.py`` is the
file as a whole; experiment/README.md, "Experiment files", the format): one job from a job file,
an NCCL log or the collective shorthand, and the list of more jobs sharing the fabric."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from icefabric.control.ccl.job import JobError, JobSpec, load_job, parse_job, parse_size
from icefabric.experiment.spec import ROOT
from icefabric.topo.spec import TopologySpec


def resolve(value: str, base: Path | None) -> Path:
    """``value`` as a path: absolute as given, else relative to ``base`` (the experiment
    file's folder) if it exists there, then to the repository."""
    p = Path(value)
    if p.is_absolute():
        return p
    for root in (base, ROOT):
        if root is not None and (root / p).exists():
            return root / p
    return (base or ROOT) / p


_WORKLOAD_KEYS = {
    "job",
    "nccl_log",
    "collective",
    "algorithm",
    "channels",
    "message_bytes",
    "hosts",
    "slices",
    "name",
}


MAX_JOBS = 8  # jobs in one experiment, the workload's included
MAX_START_US = 10_000_000  # a job's arrival, in the spec's microseconds (10 s)


def more_jobs(
    raw: Any,
    first: JobSpec | None,
    topo: TopologySpec | None,
    base: Path | None,
    err: Any,
    ref: str | None,
) -> tuple[tuple[tuple[JobSpec, int], ...], dict[str, float]]:
    """The ``jobs`` list: each entry a workload mapping, as (job, slices), and the arrival
    time (``start_us``, spec microseconds) of every job that does not start with the workload;
    ``err(key, msg)`` gets every problem."""
    if not isinstance(raw, list) or len(raw) > MAX_JOBS - 1:
        err("jobs", f"expected a list of at most {MAX_JOBS - 1} workload mappings")
        return (), {}
    out: list[tuple[JobSpec, int]] = []
    starts: dict[str, float] = {}
    names = [first.name] if first is not None else []
    for i, entry in enumerate(raw):
        key = f"jobs[{i}]"

        def sub(k: str, msg: str, key: str = key) -> None:
            err(key + k[len("workload") :] if k.startswith("workload") else k, msg)

        start = 0.0
        if isinstance(entry, Mapping) and "start_us" in entry:
            v = entry["start_us"]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= MAX_START_US:
                err(f"{key}.start_us", f"expected a number 0..{MAX_START_US} (us), got {v!r}")
            else:
                start = float(v)
            entry = {k: v for k, v in entry.items() if k != "start_us"}
        job, slices = workload(entry, topo, base, sub, ref, key=key)
        if job is None:
            continue
        if job.name in names:
            err(f"{key}.name", f"job name {job.name!r} is taken: every job needs its own name")
            continue
        names.append(job.name)
        out.append((job, slices))
        if start > 0:
            starts[job.name] = start
    return tuple(out), starts


def workload(
    raw: Any,
    topo: TopologySpec | None,
    base: Path | None,
    err: Any,
    ref: str | None = None,
    *,
    key: str = "workload",
) -> tuple[JobSpec | None, int]:
    """The ``workload`` mapping (or one entry of ``jobs``, errors named ``key``): the job and
    its slices, None where it has errors (each given to ``err``)."""
    if not isinstance(raw, Mapping):
        err("workload", "expected a mapping with job, nccl_log or collective")
        return None, 1
    for k in raw:
        if k not in _WORKLOAD_KEYS:
            err(
                f"workload.{k}",
                f"unknown key (expected one of {', '.join(sorted(_WORKLOAD_KEYS))})",
            )
    slices = raw.get("slices", 1)
    if isinstance(slices, bool) or not isinstance(slices, int) or not 1 <= slices <= 64:
        err("workload.slices", f"expected an integer 1..64, got {slices!r}")
        slices = 1
    given = [k for k in ("job", "nccl_log", "collective") if k in raw]
    if len(given) != 1:
        err("workload", f"expected exactly one of job, nccl_log, collective; got {given or 'none'}")
        return None, slices
    job: JobSpec | None = None
    try:
        if given[0] == "job":
            v = raw["job"]
            if isinstance(v, str):
                job = load_job(resolve(v, base), referenced_from=ref)
            else:
                job = parse_job(v, source=f"{key}.job")
        elif given[0] == "nccl_log":
            job = _from_nccl_log(raw["nccl_log"], base, err, ref)
        else:
            job = _shorthand(raw, topo, err, key)
    except JobError as e:
        for line in e.errors:
            err(f"workload.{given[0]}", line)
        return None, slices
    if job is not None and topo is not None:
        known = {h.name for h in topo.hosts}
        for r in job.ranks:
            if r.host not in known:
                err(
                    f"workload.{given[0]}",
                    f"rank {r.rank}: no host {r.host!r} in topology {topo.name!r}",
                )
    return job, slices


def _from_nccl_log(v: Any, base: Path | None, err: Any, ref: str | None) -> JobSpec | None:
    from icefabric.control.ccl.nccl_log import load_nccl_log, to_job

    if not isinstance(v, Mapping) or not isinstance(v.get("file"), str):
        err("workload.nccl_log", "expected {file: PATH, collective, message_bytes, host_map}")
        return None
    allowed = {"file", "collective", "algorithm", "message_bytes", "host_map", "name"}
    for k in v:
        if k not in allowed:
            err(
                f"workload.nccl_log.{k}",
                f"unknown key (expected one of {', '.join(sorted(allowed))})",
            )
    try:
        size = parse_size(v.get("message_bytes", "8MiB"))
    except ValueError as e:
        err("workload.nccl_log.message_bytes", str(e))
        return None
    hm = v.get("host_map", {})
    if not isinstance(hm, Mapping):
        err("workload.nccl_log.host_map", "expected {log host: topology host}")
        return None
    path = resolve(v["file"], base)
    try:
        parsed = load_nccl_log(path, referenced_from=ref)
        return to_job(
            parsed,
            name=str(v.get("name", path.stem.replace("_", "-")))[:64],
            collective=str(v.get("collective", "all-reduce")),
            algorithm=v.get("algorithm"),
            message_bytes=size,
            host_map={str(a): str(b) for a, b in hm.items()},
        )
    except (OSError, ValueError) as e:
        err("workload.nccl_log.file", str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


def _shorthand(
    raw: Mapping[str, Any], topo: TopologySpec | None, err: Any, key: str = "workload"
) -> JobSpec | None:
    hosts_raw = raw.get("hosts", "interleaved")
    if topo is None:
        return None
    if hosts_raw == "interleaved":
        hosts = topo.interleaved_hosts()
    elif hosts_raw == "all":
        hosts = [h.name for h in topo.hosts]
    elif isinstance(hosts_raw, list) and all(isinstance(h, str) for h in hosts_raw):
        hosts = list(hosts_raw)
    else:
        err(
            "workload.hosts",
            f"expected interleaved, all or a list of host names, got {hosts_raw!r}",
        )
        return None
    phase: dict[str, Any] = {
        "name": str(raw["collective"]).replace("_", "-"),
        "collective": raw["collective"],
        "channels": raw.get("channels", 1),
        "message_bytes": raw.get("message_bytes", "8MiB"),
    }
    if "algorithm" in raw:
        phase["algorithm"] = raw["algorithm"]
    return parse_job(
        {"name": raw.get("name", "job"), "hosts": hosts, "phases": [phase]},
        source=key,
    )
