"""Independent simulations run as a sweep on Dask: a local cluster of processes by default, a
user's cluster by address (``tcp://SCHEDULER:8786``), or serially.

Every task is a call of a module-level function (importable by the workers: they need this
project installed, the same version) on picklable arguments; results come back in task order,
whatever order the workers finish in, so a sweep gives the same results serially, on a local
cluster and on many machines (the simulations are deterministic given their seeds).

A local cluster listens on 127.0.0.1 only and has no dashboard. On several machines (sim/README.md,
"Sweeps on a cluster"):

    machine A:  dask scheduler --host 0.0.0.0 --port 8786
    each other: dask worker tcp://A:8786 --nworkers 8 --nthreads 1
    here:       python -m icefabric.sim.scale --cluster tcp://A:8786 ...
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

log = logging.getLogger(__name__)

R = TypeVar("R")
CONNECT_TIMEOUT_S = 20.0  # how long to try a user's scheduler address before giving up


class SweepError(RuntimeError):
    """The sweep could not run: the message says why (an unreachable scheduler, a failed task)."""


def _progress(total: int, label: str, enabled: bool) -> Progress:
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
        disable=not enabled or total == 0,
        console=Console(stderr=True),
    )


def run_tasks(
    fn: Callable[..., R],
    tasks: Sequence[tuple[Any, ...]],
    *,
    cluster: str | None = None,
    workers: int = 2,
    serial: bool = False,
    progress: bool = True,
    label: str = "sweep",
    connect_timeout: float = CONNECT_TIMEOUT_S,
    on_done: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[fn(*t) for t in tasks]``, in task order: serially, on a local Dask cluster of
    ``workers`` processes (default), or on the Dask scheduler at ``cluster``.  ``on_done`` is
    called with each task's index and result as it finishes (in completion order), for a
    caller's own progress display or checkpoints (then pass ``progress=False``)."""
    if workers < 1:
        raise SweepError(f"sweep: workers: expected >= 1, got {workers}")
    with _progress(len(tasks), label, progress) as bar:
        job = bar.add_task(label, total=len(tasks))

        def tick(i: int, result: R) -> None:
            bar.advance(job)
            if on_done is not None:
                on_done(i, result)

        if serial or not tasks:
            out = []
            for i, t in enumerate(tasks):
                out.append(fn(*t))
                tick(i, out[-1])
            return out
        return _on_dask(fn, tasks, cluster, workers, connect_timeout, tick)


def _on_dask(
    fn: Callable[..., R],
    tasks: Sequence[tuple[Any, ...]],
    cluster: str | None,
    workers: int,
    connect_timeout: float,
    tick: Callable[[int, R], None],
) -> list[R]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as e:  # pragma: no cover - a dependency of the project
        raise SweepError(f"sweep: dask[distributed] is not installed ({e})") from None
    # distributed sets its loggers to INFO when imported: its lines would drown the progress bar
    logging.getLogger("distributed").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
    local = None
    try:
        if cluster is None:
            local = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,  # no dashboard; the scheduler's own HTTP endpoint
                # (health, metrics) on a free loopback port, not on 8787, which another
                # user's cluster on the machine may hold
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                silence_logs=logging.CRITICAL,
            )
            client = Client(local)  # type: ignore[no-untyped-call]
        else:
            try:
                client = Client(cluster, timeout=connect_timeout)  # type: ignore[no-untyped-call]
            except (OSError, TimeoutError, ValueError) as e:
                raise SweepError(
                    f"sweep: cannot reach the Dask scheduler at {cluster!r}: {e}"
                ) from None
        with client:
            futures = [client.submit(fn, *t, pure=False) for t in tasks]
            index = {f.key: i for i, f in enumerate(futures)}
            out: list[Any] = [None] * len(tasks)
            for fut in as_completed(futures):  # type: ignore[no-untyped-call]
                i = index[fut.key]
                try:
                    out[i] = fut.result()
                except Exception as e:  # a task's own error, re-raised with the task named
                    raise SweepError(f"sweep: task {i} {tasks[i]!r} failed: {e}") from e
                tick(i, out[i])
            return out
    finally:
        if local is not None:
            local.close()
