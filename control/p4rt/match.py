"""Match field values (exact, LPM, ternary, range, optional) and their FieldMatch encoding."""

from __future__ import annotations

from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from .codec import Value, decode_int, encode_int, mask_of_prefix, parse_value
from .errors import EncodeError
from .p4info import FieldInfo


@dataclass(slots=True, frozen=True)
class Exact:
    """An exact match value."""

    value: Value


@dataclass(slots=True, frozen=True)
class LPM:
    """A longest-prefix match: value and prefix length (bits past the prefix are cleared)."""

    value: Value
    prefix_len: int


@dataclass(slots=True, frozen=True)
class Ternary:
    """A ternary match: value and mask (value bits outside the mask are cleared)."""

    value: Value
    mask: Value


@dataclass(slots=True, frozen=True)
class Range:
    """A range match, both bounds included."""

    low: Value
    high: Value


@dataclass(slots=True, frozen=True)
class Optional:
    """An optional match: an exact value (leave the field out of the dict for "don't care")."""

    value: Value


OptionalMatch = Optional
MatchObject = Exact | LPM | Ternary | Range | Optional
MatchValue = Value | tuple[Value, Value] | MatchObject


def _to_object(field: FieldInfo, value: MatchValue, what: str) -> MatchObject:
    """Interpret a plain value according to the field's match type."""
    if isinstance(value, Exact | LPM | Ternary | Range | Optional):
        return value
    kind = field.match_type
    if isinstance(value, tuple):
        if len(value) != 2:
            raise EncodeError(f"{what}: expected a pair, got {len(value)} items")
        a, b = value
        if kind == "lpm":
            if not isinstance(b, int):
                raise EncodeError(f"{what}: LPM pair is (value, prefix_len int), got {value!r}")
            return LPM(a, b)
        if kind == "ternary":
            return Ternary(a, b)
        if kind == "range":
            return Range(a, b)
        raise EncodeError(f"{what}: a pair makes no sense for a {kind} field, got {value!r}")
    if isinstance(value, str):
        if kind == "lpm" and "/" in value:
            addr, _, plen = value.rpartition("/")
            try:
                return LPM(addr, int(plen))
            except ValueError as exc:
                raise EncodeError(f"{what}: bad prefix length in {value!r}") from exc
        if kind == "ternary" and "&&&" in value:
            v, _, m = value.partition("&&&")
            return Ternary(v.strip(), m.strip())
    if kind == "lpm":
        return LPM(value, field.bitwidth)
    if kind == "ternary":
        return Ternary(value, (1 << field.bitwidth) - 1)
    if kind == "range":
        return Range(value, value)
    if kind == "optional":
        return Optional(value)
    return Exact(value)


def encode_field_match(
    field: FieldInfo, value: MatchValue, *, table: str = ""
) -> p4runtime_pb2.FieldMatch | None:
    """Encode one match field; None when the value is "don't care" (P4Runtime omits it)."""
    what = f"table {table} match field {field.name}" if table else f"match field {field.name}"
    obj = _to_object(field, value, what)
    width = field.bitwidth
    kind = field.match_type
    fm = p4runtime_pb2.FieldMatch(field_id=field.id)
    if isinstance(obj, Exact):
        v = parse_value(obj.value, width, what=what)
        if kind == "lpm":
            obj = LPM(v, width)
        elif kind == "ternary":
            obj = Ternary(v, (1 << width) - 1)
        elif kind == "range":
            obj = Range(v, v)
        elif kind == "optional":
            obj = Optional(v)
        elif kind != "exact":
            raise EncodeError(f"{what}: cannot encode an exact value for match kind {kind!r}")
        else:
            fm.exact.value = encode_int(v, width, what=what)
            return fm
    if isinstance(obj, LPM):
        _expect(kind, "lpm", obj, what)
        mask = mask_of_prefix(obj.prefix_len, width, what=what)
        if obj.prefix_len == 0:
            return None
        v = parse_value(obj.value, width, what=what)
        encode_int(v, width, what=what)  # range check before masking
        fm.lpm.value = encode_int(v & mask, width, what=what)
        fm.lpm.prefix_len = obj.prefix_len
        return fm
    if isinstance(obj, Ternary):
        _expect(kind, "ternary", obj, what)
        v = parse_value(obj.value, width, what=what)
        m = parse_value(obj.mask, width, what=f"{what} mask")
        encode_int(v, width, what=what)
        if m == 0:
            return None
        fm.ternary.value = encode_int(v & m, width, what=what)
        fm.ternary.mask = encode_int(m, width, what=f"{what} mask")
        return fm
    if isinstance(obj, Range):
        _expect(kind, "range", obj, what)
        lo = parse_value(obj.low, width, what=f"{what} low")
        hi = parse_value(obj.high, width, what=f"{what} high")
        if lo > hi:
            raise EncodeError(f"{what}: range low {lo} is above high {hi}")
        if lo == 0 and hi == (1 << width) - 1:
            return None
        fm.range.low = encode_int(lo, width, what=f"{what} low")
        fm.range.high = encode_int(hi, width, what=f"{what} high")
        return fm
    _expect(kind, "optional", obj, what)
    fm.optional.value = encode_int(parse_value(obj.value, width, what=what), width, what=what)
    return fm


def _expect(kind: str, wanted: str, obj: MatchObject, what: str) -> None:
    if kind != wanted:
        raise EncodeError(
            f"{what}: the field is {kind or 'unknown'} match, got {type(obj).__name__}"
        )


def decode_field_match(fm: p4runtime_pb2.FieldMatch) -> int | MatchObject:
    """Decode a FieldMatch: an int for exact, LPM/Ternary/Range/Optional otherwise."""
    which = fm.WhichOneof("field_match_type")
    if which == "exact":
        return decode_int(fm.exact.value)
    if which == "lpm":
        return LPM(decode_int(fm.lpm.value), fm.lpm.prefix_len)
    if which == "ternary":
        return Ternary(decode_int(fm.ternary.value), decode_int(fm.ternary.mask))
    if which == "range":
        return Range(decode_int(fm.range.low), decode_int(fm.range.high))
    if which == "optional":
        return Optional(decode_int(fm.optional.value))
    raise EncodeError(f"match field id {fm.field_id}: unsupported match kind {which!r}")
