"""Compile-time values produced by expression compilation, and the code emitter."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from icefabric.target.compiler.types import T, VoidT


@dataclass(slots=True)
class V:
    """A scalar value: Python expression code, its type, its constant value if known."""

    code: str
    type: T
    const: Any = None
    write: Callable[[str], str] | None = None  # lvalue: code that stores an expression here


@dataclass(slots=True)
class Ref:
    """A composite value (struct/header/union/stack/tuple/varbit) at a slot base."""

    base: str
    type: T
    sbase: int | None = None  # the base index when known at compile time
    readonly: bool = False  # an `in` parameter (or inside one): no assignments
    siblings: tuple[str, ...] = ()  # a header_union member: the bases of the other members


@dataclass(slots=True)
class TypeV:
    """A type used as a namespace (enum, error) or as an argument (lookahead<T>)."""

    type: T


@dataclass(slots=True)
class ObjV:
    """A non-value object: table, extern instance, action, function, packet, apply result."""

    kind: str  # 'table','extern','action','function','packet_in','packet_out','apply','method'
    obj: Any
    extra: Any = None


@dataclass(slots=True)
class ListV:
    """A list expression ``{a, b}`` or struct expression ``{f = a}``: items are compiled values."""

    items: list[Any]
    names: list[str] | None = None


@dataclass
class Emitter:
    """Collects lines of generated Python with indentation."""

    lines: list[str] = field(default_factory=list)
    level: int = 0
    counter: list[int] = field(default_factory=lambda: [0])

    def line(self, text: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("    " * self.level + text)

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        """Emit ``head`` and indent the lines written inside the with-block."""
        self.line(head)
        self.level += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.line("pass")
            self.level -= 1

    def tmp(self, prefix: str = "t") -> str:
        """A fresh local variable name."""
        self.counter[0] += 1
        return f"_{prefix}{self.counter[0]}"


def is_void(v: object) -> bool:
    """True when a compiled call produced no value."""
    return v is None or (isinstance(v, V) and isinstance(v.type, VoidT))
