"""Semantic types of the compiler and their slot layout in the per-packet state list."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class T:
    """Base of every semantic type."""

    slots: int = 1

    def __str__(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, slots=True)
class Bits(T):
    """bit<W> (signed=False) or int<W> (signed=True)."""

    width: int
    signed: bool = False

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Number of state slots a value of this type takes."""
        return 1

    @property
    def mask(self) -> int:
        """All-ones value of this width."""
        return (1 << self.width) - 1

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True, slots=True)
class Varbit(T):
    """varbit<W>: stored as two slots (value, current width in bits)."""

    max_width: int

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Number of state slots a value of this type takes."""
        return 2

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


class _Singleton(T):
    name = ""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name


class IntInfT(_Singleton):
    name = "int"


class BoolT(_Singleton):
    name = "bool"


class ErrorT(_Singleton):
    name = "error"


class StringT(_Singleton):
    name = "string"


class VoidT(_Singleton):
    name = "void"


class MatchKindT(_Singleton):
    name = "match_kind"


class DontCareT(_Singleton):
    name = "_"


INT = IntInfT()
BOOL = BoolT()
ERROR = ErrorT()
STRING = StringT()
VOID = VoidT()
MATCH_KIND = MatchKindT()
DONTCARE = DontCareT()


@dataclass(eq=False)
class EnumT(T):
    """A plain enum (values are member indices) or a serializable enum (underlying Bits)."""

    name: str
    members: dict[str, int]
    underlying: Bits | None = None

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class FieldInfo:
    """One field of a struct-like type: its name, type, annotations and slot offset."""

    name: str
    type: T
    annos: list[Any]
    offset: int


@dataclass(eq=False)
class StructT(T):
    """struct / header / header_union; headers have a validity slot at offset 0."""

    name: str
    kind: str
    fields: list[FieldInfo] = field(default_factory=list)
    annos: list[Any] = field(default_factory=list)
    slots: int = 0

    def finish(self) -> None:
        """Compute the field offsets and the total number of slots."""
        off = 1 if self.kind == "header" else 0
        for f in self.fields:
            f.offset = off
            off += f.type.slots
        self.slots = off

    def field(self, name: str) -> FieldInfo | None:
        """Field by name or None."""
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def is_header(self) -> bool:
        """True for headers."""
        return self.kind == "header"

    @property
    def is_union(self) -> bool:
        """True for header unions."""
        return self.kind == "header_union"

    def fixed_bits(self) -> int:
        """Width of all fixed-size fields (varbit counts as 0): minSizeInBits."""
        total = 0
        for f in self.fields:
            if isinstance(f.type, Bits):
                total += f.type.width
            elif isinstance(f.type, BoolT):
                total += 1
            elif isinstance(f.type, EnumT) and f.type.underlying is not None:
                total += f.type.underlying.width
            elif isinstance(f.type, StructT):
                total += f.type.fixed_bits()
            elif isinstance(f.type, StackT):
                total += f.type.size * f.type.elem.fixed_bits()
        return total

    def has_varbit(self) -> bool:
        """True when the header has a varbit field."""
        return any(isinstance(f.type, Varbit) for f in self.fields)

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class StackT(T):
    """A header stack: slot 0 is nextIndex, then ``size`` elements."""

    elem: StructT
    size: int

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Number of state slots a value of this type takes."""
        return 1 + self.size * self.elem.slots

    def __str__(self) -> str:
        return f"{self.elem.name}[{self.size}]"


@dataclass(eq=False)
class TupleT(T):
    """tuple<...> and the type of list expressions."""

    elems: list[T]

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Number of state slots a value of this type takes."""
        return sum(e.slots for e in self.elems)

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(e) for e in self.elems) + ">"


@dataclass(eq=False)
class ExternT(T):
    """An extern object type with its type arguments."""

    name: str
    decl: Any
    args: list[T] = field(default_factory=list)

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class NamedBlockT(T):
    """The type of a parser/control/package declaration or prototype."""

    name: str
    decl: Any

    def __str__(self) -> str:
        return self.name


def is_scalar(t: T) -> bool:
    """True for types held in one slot."""
    return isinstance(t, (Bits, IntInfT, BoolT, ErrorT, EnumT, MatchKindT))


def same_type(a: T, b: T) -> bool:
    """Structural type equality."""
    if a is b:
        return True
    if isinstance(a, Bits) and isinstance(b, Bits):
        return a == b
    if isinstance(a, Varbit) and isinstance(b, Varbit):
        return a.max_width == b.max_width
    if isinstance(a, StackT) and isinstance(b, StackT):
        return a.size == b.size and same_type(a.elem, b.elem)
    if isinstance(a, TupleT) and isinstance(b, TupleT):
        return len(a.elems) == len(b.elems) and all(
            same_type(x, y) for x, y in zip(a.elems, b.elems, strict=True)
        )
    return type(a) is type(b) and isinstance(a, _Singleton)


def bit_width(t: T) -> int | None:
    """Width in bits of a serializable scalar type, or None."""
    if isinstance(t, Bits):
        return t.width
    if isinstance(t, BoolT):
        return 1
    if isinstance(t, EnumT) and t.underlying is not None:
        return t.underlying.width
    return None
