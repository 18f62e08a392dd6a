"""Turn communicators of a parsed log into a job (one phase each) with their exact rings/trees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icefabric.control.ccl.job import (
    COLLECTIVES,
    SUPPORTED,
    JobError,
    JobSpec,
    Phase,
    Rank,
    canonical_algorithm,
    canonical_collective,
    parse_job,
)
from icefabric.control.ccl.nccl.hostmap import HostMap
from icefabric.control.ccl.nccl.model import CommLog, NcclLog, ranges

VENDOR_OF_LIB = {
    "NCCL": "nvidia",
    "RCCL": "amd",
    "BCCL": "baidu",
    "MCCL": "metax",
    "IXCCL": "iluvatar",
}
MAX_JOB_CHANNELS = 64


def check_collective(collective: str, algorithm: str | None) -> tuple[str, str]:
    """(collective, algorithm) normalised; ValueError naming the option when either is wrong."""
    coll = canonical_collective(collective)
    if coll not in COLLECTIVES:
        raise ValueError(
            f"--collective: expected one of {', '.join(COLLECTIVES)}, got {collective!r}"
        )
    supported = SUPPORTED[coll]
    if not supported:
        if algorithm:
            raise ValueError(f"--algorithm: {coll} takes no algorithm, got {algorithm!r}")
        return coll, ""
    if algorithm is None:
        return coll, ""
    alg = canonical_algorithm(algorithm)
    if alg not in supported:
        raise ValueError(f"--algorithm: {coll} runs as {', '.join(supported)}, got {algorithm!r}")
    return coll, alg


def _need_ranks(comm: CommLog) -> None:
    missing = comm.missing_ranks()
    if missing:
        raise ValueError(
            f"{comm.source}: communicator {comm.key}: no init line names the host of "
            f"{len(missing)} of {comm.nranks} ranks ({ranges(missing)})"
        )


def _phase(
    comm: CommLog,
    glob: Sequence[int],
    *,
    name: str,
    coll: str,
    alg: str,
    message_bytes: int,
) -> Phase:
    """One phase over ``comm``; ``glob[r]`` is the job rank of the communicator's rank r."""
    n = comm.nranks
    if coll in ("all-to-all", "send-recv"):
        ch = min(max(comm.n_channels or 1, 1), MAX_JOB_CHANNELS)
        pairs = tuple((glob[i], glob[i + 1]) for i in range(n - 1)) if coll == "send-recv" else ()
        return Phase(
            name=name,
            collective=coll,
            algorithm="",
            channels=ch,
            message_bytes=message_bytes,
            ranks=tuple(glob),
            pairs=pairs,
        )
    if not alg:
        alg = "ring" if comm.rings else ("tree" if comm.complete_trees() else "ring")
    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[dict[int, int], ...] = ()
    if alg == "ring":
        if not comm.rings:
            raise ValueError(
                f"{comm.source}: communicator {comm.key}: no ring order in the log (neither "
                "'Channel NN/MM :' order lines listing every rank nor connection lines of "
                "every rank)"
            )
        rings = tuple(tuple(glob[r] for r in comm.rings[c]) for c in sorted(comm.rings))
        rings = rings[:MAX_JOB_CHANNELS]
        channels = len(rings)
    elif alg == "tree":
        full = comm.complete_trees()
        if not full:
            raise ValueError(
                f"{comm.source}: communicator {comm.key}: no complete tree in the log (Trees "
                "lines of every rank)"
            )
        trees = tuple(
            {glob[r]: (glob[p] if p >= 0 else -1) for r, p in sorted(t.items())}
            for t in full.values()
        )[:MAX_JOB_CHANNELS]
        channels = len(trees)
    else:
        channels = min(max(len(comm.rings), 1), MAX_JOB_CHANNELS)
    return Phase(
        name=name,
        collective=coll,
        algorithm=alg,
        channels=channels,
        message_bytes=message_bytes,
        ranks=tuple(glob),
        rings=rings,
        trees=trees,
    )


def to_job(
    comms: NcclLog | CommLog | Sequence[CommLog],
    *,
    name: str,
    collective: str,
    message_bytes: int,
    algorithm: str | None = None,
    host_map: HostMap | Mapping[str, str] | None = None,
    phase: str = "main",
) -> JobSpec:
    """A job from one communicator (one phase) or several (one phase each, ``comm0``...).

    Given a whole log, its largest communicator is used (``NcclLog.select``).

    Job ranks are processes (host, pid, device): the first communicator's ranks in order, then
    the processes only later ones name. The job is checked by the job-file validator, so what
    comes out can be written as a job file and read back.
    """
    if isinstance(comms, NcclLog):
        try:
            comms = comms.select()  # a whole log: its largest communicator
        except LookupError as e:
            raise ValueError(str(e)) from None
    group = [comms] if isinstance(comms, CommLog) else list(comms)
    if not group:
        raise ValueError("no communicator to import")
    coll, alg = check_collective(collective, algorithm)
    for c in group:
        _need_ranks(c)
    procs: dict[tuple[str, int, int], int] = {}
    infos: list[Any] = []
    globs: list[list[int]] = []
    for c in group:
        glob = []
        for r in range(c.nranks):
            info = c.ranks[r]
            key = (info.host, info.pid, info.cuda_dev)
            if key not in procs:
                procs[key] = len(procs)
                infos.append(info)
            glob.append(procs[key])
        if len(set(glob)) != len(glob):
            raise ValueError(
                f"{c.source}: communicator {c.key}: two ranks run in one process on one device"
            )
        globs.append(glob)
    if isinstance(host_map, HostMap):
        hm = host_map.resolve([i.host for i in infos])
    else:
        hm = dict(host_map or {})
    ranks = tuple(
        Rank(
            rank=g,
            host=hm.get(i.host, i.host),
            vendor=VENDOR_OF_LIB.get(i.library, i.library.lower()),
            device=f"dev{i.cuda_dev}" + (f"@{i.bus_id}" if i.bus_id else ""),
        )
        for g, i in enumerate(infos)
    )
    phases = tuple(
        _phase(
            c,
            glob,
            name=phase if len(group) == 1 else f"comm{k}",
            coll=coll,
            alg=alg,
            message_bytes=message_bytes,
        )
        for k, (c, glob) in enumerate(zip(group, globs, strict=True))
    )
    job = JobSpec(name=name, ranks=ranks, phases=phases)
    try:
        return parse_job(job.to_dict(), source=f"job {name!r} from {group[0].source}")
    except JobError as e:
        raise ValueError("; ".join(e.errors)) from None


def single_host_note(job: JobSpec) -> str:
    """A note when every rank runs on one host (no network traffic to plan), else ''."""
    hosts = job.hosts
    if len(hosts) != 1:
        return ""
    return (
        f"note: all {len(job.ranks)} ranks of job {job.name!r} run on host {hosts[0]}: their "
        "traffic stays inside the host (NVLink/PCIe), so there are no network flows to plan"
    )
