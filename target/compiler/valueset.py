"""Parser value sets (value_set<T>(size)): members written by the control plane."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from icefabric.target.runtime.errors import InvalidArgumentError, ResourceExhaustedError


class ValueSet:
    """A set of (value, mask) tuples, one pair per field of T; matched by a select case."""

    def __init__(self, name: str, size: int, fields: Sequence[tuple[str, int, str]]) -> None:
        self.name = name
        self.size = size
        self.fields = tuple(fields)  # (name, bitwidth, match kind)
        self._members: tuple[tuple[tuple[int, int], ...], ...] = ()
        self._lock = threading.Lock()

    @property
    def members(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """The current members, each a tuple of (value, mask) per field."""
        return self._members

    def set_members(self, members: Sequence[Sequence[tuple[int, int]]]) -> None:
        """Replace all members (P4Runtime writes a value set as a whole)."""
        if len(members) > self.size:
            raise ResourceExhaustedError(
                f"value set {self.name}: {len(members)} members, size is {self.size}"
            )
        norm: list[tuple[tuple[int, int], ...]] = []
        for m in members:
            if len(m) != len(self.fields):
                raise InvalidArgumentError(
                    f"value set {self.name}: a member needs {len(self.fields)} fields, got {len(m)}"
                )
            row = []
            for (value, mask), (fname, width, _) in zip(m, self.fields, strict=True):
                full = (1 << width) - 1
                if value < 0 or value > full or mask < 0 or mask > full:
                    raise InvalidArgumentError(
                        f"value set {self.name}: field {fname or 1} does not fit in {width} bits"
                    )
                row.append((value & mask, mask))
            norm.append(tuple(row))
        with self._lock:
            self._members = tuple(norm)

    def clear(self) -> None:
        """Remove every member."""
        with self._lock:
            self._members = ()

    def matches(self, key: int | tuple[int, ...]) -> bool:
        """True when the select key matches some member."""
        keys = key if isinstance(key, tuple) else (key,)
        for member in self._members:
            for k, (v, m) in zip(keys, member, strict=False):
                if k & m != v:
                    break
            else:
                return True
        return False
