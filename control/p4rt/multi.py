"""SwitchPool: many SwitchConnections keyed by switch name, connected and closed in parallel."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .client import SwitchConnection
from .errors import P4RtError

LOG = logging.getLogger(__name__)
R = TypeVar("R")


class FabricError(P4RtError):
    """Some switches of a pool failed an operation; `.errors` maps switch name -> exception."""

    def __init__(self, operation: str, errors: Mapping[str, BaseException]) -> None:
        self.operation = operation
        self.errors = dict(errors)
        lines = [f"{operation} failed on {len(self.errors)} switch(es):"]
        lines += [f"  {name}: {err}" for name, err in sorted(self.errors.items())]
        super().__init__("\n".join(lines))


class SwitchPool(Mapping[str, SwitchConnection]):
    """SwitchConnections by switch name; `with SwitchPool(conns) as pool:` connects all."""

    def __init__(self, connections: Iterable[SwitchConnection] = (), *, workers: int = 16) -> None:
        self._conns: dict[str, SwitchConnection] = {}
        self._workers = max(1, workers)
        for conn in connections:
            self.add(conn)

    def add(self, conn: SwitchConnection) -> SwitchConnection:
        """Add a connection (names must be unique)."""
        if conn.name in self._conns:
            raise ValueError(f"switch {conn.name!r} is already in the pool")
        self._conns[conn.name] = conn
        return conn

    def remove(self, name: str) -> SwitchConnection:
        """Remove (and close) the connection of one switch."""
        conn = self._conns.pop(name)
        conn.close()
        return conn

    def __getitem__(self, name: str) -> SwitchConnection:
        try:
            return self._conns[name]
        except KeyError:
            known = ", ".join(sorted(self._conns)) or "none"
            raise KeyError(f"no switch {name!r} in the pool (known: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._conns)

    def __len__(self) -> int:
        return len(self._conns)

    def run_all(
        self,
        fn: Callable[[SwitchConnection], R],
        *,
        names: Iterable[str] | None = None,
        operation: str = "operation",
        raise_errors: bool = True,
    ) -> dict[str, R]:
        """Call fn(conn) on every (or the named) switch in parallel; results by switch name.

        Failures are collected: FabricError names every failed switch (raise_errors=False
        logs them and leaves those switches out of the result).
        """
        targets = [self[n] for n in names] if names is not None else list(self._conns.values())
        results: dict[str, R] = {}
        errors: dict[str, BaseException] = {}
        if not targets:
            return results
        with ThreadPoolExecutor(max_workers=min(self._workers, len(targets))) as pool:
            futures = {pool.submit(fn, c): c.name for c in targets}
            for fut, name in futures.items():
                try:
                    results[name] = fut.result()
                except Exception as exc:  # collected and reported per switch
                    errors[name] = exc
        if errors:
            if raise_errors:
                raise FabricError(operation, errors)
            for name, failure in errors.items():
                LOG.error("%s: %s failed: %s", name, operation, failure)
        return results

    def connect_all(self, timeout: float | None = None) -> SwitchPool:
        """Connect every switch in parallel (FabricError names those that failed)."""
        self.run_all(lambda c: c.connect(timeout), operation="connect")
        return self

    def close_all(self) -> None:
        """Close every connection (never raises)."""
        self.run_all(lambda c: c.close(), operation="close", raise_errors=False)

    def primaries(self) -> list[str]:
        """Names of the switches where this controller is primary."""
        return [n for n, c in self._conns.items() if c.is_primary]

    def __enter__(self) -> SwitchPool:
        return self.connect_all()

    def __exit__(self, *exc: object) -> None:
        self.close_all()


Fabric = SwitchPool
