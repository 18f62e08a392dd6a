"""An immutable, hashable mapping for the dict-valued fields of frozen entity objects."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(Mapping[K, V], Generic[K, V]):
    """A read-only dict: equal to a dict with the same items, hashable when its values are."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[K, V] | None = None, /, **kwargs: V) -> None:
        merged: dict[Any, V] = dict(data or {})
        merged.update(kwargs)
        self._data: dict[K, V] = merged
        self._hash: int | None = None

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __repr__(self) -> str:
        return repr(self._data)


def empty() -> FrozenDict[Any, Any]:
    """A new empty FrozenDict (a dataclass default_factory)."""
    return FrozenDict()


def freeze(data: Mapping[K, V] | None) -> FrozenDict[K, V]:
    """Return `data` as a FrozenDict (the same object when it already is one)."""
    if isinstance(data, FrozenDict):
        return data
    return FrozenDict(data or {})
