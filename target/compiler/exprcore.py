"""The core of expression compilation: code helpers, scopes, conversions and field access.

:class:`~icefabric.target.compiler.expr.ExprGen` adds one ``e_<Node>`` method per expression
kind and the operators on top of :class:`ExprCore`.
"""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.types import (
    BOOL,
    ERROR,
    MATCH_KIND,
    Bits,
    BoolT,
    EnumT,
    IntInfT,
    StackT,
    StructT,
    T,
    is_scalar,
)
from icefabric.target.compiler.unit import Unit, err
from icefabric.target.compiler.values import Emitter, ListV, ObjV, Ref, TypeV, V
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc


def wrap(code: str, t: T) -> str:
    """Code reducing an arithmetic result to the range of ``t``."""
    if isinstance(t, Bits):
        if t.signed:
            h = 1 << (t.width - 1)
            return f"((({code}) + {h}) & {t.mask}) - {h}"
        return f"({code}) & {t.mask}"
    return code


def norm_const(val: int, t: T) -> int:
    """Reduce a constant to the range of ``t``."""
    if isinstance(t, Bits):
        val &= t.mask
        if t.signed and val >> (t.width - 1):
            val -= 1 << t.width
    return val


def slot_v(idx: str, t: T) -> V:
    """An lvalue V for one state slot."""

    def write(code: str) -> str:
        return f"S[{idx}] = {code}"

    return V(f"S[{idx}]", t, None, write)


def add_base(base: str, off: int) -> str:
    """Code for base + off, folding when base is a literal."""
    if base.isdigit():
        return str(int(base) + off)
    return f"{base} + {off}" if off else base


def _is_stable(code: str) -> bool:
    """True for code whose value cannot change before it is used: a literal or a temporary."""
    if code.startswith("_") and code[1:].isalnum():
        return True
    return code.lstrip("-").isdigit() or code in ("True", "False", "None", "")


class ExprCore:
    """The expression compiler's state: scopes, the emitter, pinned values, conversions between
    types, field and stack access, and the dispatch of :meth:`expr` to ``e_<Node>`` methods
    (in :class:`~icefabric.target.compiler.expr.ExprGen`)."""

    unit: Unit
    scopes: list[dict[str, Any]]
    em: Emitter
    in_parser: bool

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.scopes: list[dict[str, Any]] = []
        self.em = Emitter()
        self.in_parser = False

    # ---- scopes ----------------------------------------------------------------------------
    def lookup(self, name: str, loc: SourceLoc, top: bool = False) -> Any:
        """Resolve a name through the scopes, then globals."""
        if not top:
            for sc in reversed(self.scopes):
                if name in sc:
                    return sc[name]
        u = self.unit
        if name in u.consts:
            return u.consts[name]
        if name == "error":
            return TypeV(ERROR)
        if name in u.types:
            return TypeV(u.types[name])
        if name in u.actions:
            return ObjV("action", u.actions[name])
        if name in u.functions:
            return ObjV("function", u.functions[name])
        if name in u.extern_funcs:
            return ObjV("extern_func", name)
        if name in u.match_kinds:
            return V(repr(name), MATCH_KIND, name)
        raise err(f"'{name}' is not declared", loc)

    # ---- evaluation order ------------------------------------------------------------------
    # Operands compile to Python expression code that is evaluated where the whole expression
    # is used, while a call with out/inout arguments (or a table apply, a stack index) emits
    # statements first. P4 evaluates strictly left to right, so when an operand emits
    # statements, the operands before it are read into temporaries ahead of those statements.
    def mark(self) -> int:
        """Position in the current emitter (to detect statements emitted after it)."""
        return len(self.em.lines)

    def pin_before(self, vals: list[Any], mark: int) -> list[Any]:
        """Read ``vals`` into temporaries at ``mark`` when statements were emitted since."""
        if len(self.em.lines) == mark:
            return vals
        lines: list[str] = []
        out = [self._pin(v, lines) for v in vals]
        self.em.lines[mark:mark] = ["    " * self.em.level + ln for ln in lines]
        return out

    def _pin(self, v: Any, lines: list[str]) -> Any:
        if isinstance(v, V) and v.const is None and not _is_stable(v.code):
            tmp = self.em.tmp("o")
            lines.append(f"{tmp} = {v.code}")
            return V(tmp, v.type)
        if isinstance(v, ListV):
            return ListV([self._pin(x, lines) for x in v.items], v.names)
        return v

    def in_order(self, exprs: list[A.Expr], wants: list[T | None]) -> list[Any]:
        """Compile expressions left to right, each read when its turn comes."""
        vals: list[Any] = []
        for x, w in zip(exprs, wants, strict=True):
            m = self.mark()
            v = self.expr(x, w)
            vals = self.pin_before(vals, m)
            vals.append(v)
        return vals

    def take_lines(self, mark: int) -> list[str]:
        """Remove and return the lines emitted since ``mark``."""
        lines = self.em.lines[mark:]
        del self.em.lines[mark:]
        return lines

    def put_lines(self, lines: list[str]) -> None:
        """Re-emit lines taken with ``take_lines`` one level deeper (inside a block)."""
        self.em.lines.extend("    " + ln for ln in lines)

    # ---- helpers ---------------------------------------------------------------------------
    def const_value(self, e: A.Expr) -> Any:
        """Evaluate ``e`` at compile time (None when it is not constant)."""
        saved = self.em
        self.em = Emitter()
        try:
            v = self.expr(e)
        finally:
            self.em = saved
        return v.const if isinstance(v, V) else None

    def scalar(self, e: A.Expr, want: T | None = None) -> V:
        """Compile an expression that must produce a scalar value (coerced to ``want``)."""
        v = self.expr(e, want)
        if isinstance(v, ListV) and want is not None and isinstance(want, (Bits, BoolT)):
            raise err("a list cannot be used as a scalar", e.loc)
        if not isinstance(v, V):
            raise err("expected a value here", e.loc)
        if want is not None:
            return self.coerce(v, want, e.loc)
        return v

    def coerce(self, v: V, t: T, loc: SourceLoc) -> V:
        """Apply the implicit casts P4 allows, or report a type mismatch."""
        vt = v.type
        if vt is t or vt == t:
            return v
        if isinstance(t, Bits) and isinstance(vt, IntInfT):
            if v.const is None:
                raise err("expected a compile-time constant", loc)
            c = norm_const(int(v.const), t)
            return V(str(c), t, c)
        if isinstance(t, IntInfT) and isinstance(vt, Bits):
            return v
        if isinstance(vt, EnumT) and vt.underlying is not None and t == vt.underlying:
            return V(v.code, t, v.const)
        if isinstance(t, EnumT) and t.underlying is not None and isinstance(vt, IntInfT):
            c = norm_const(int(v.const), t.underlying)
            return V(str(c), t, c)
        if isinstance(t, EnumT) and isinstance(vt, EnumT) and t.name == vt.name:
            return v
        if isinstance(t, StructT) or isinstance(vt, StructT):
            raise err(f"type mismatch: expected {t}, got {vt}", loc)
        if type(t) is type(vt) and not isinstance(t, (Bits, EnumT)):
            return v
        raise err(f"type mismatch: expected {t}, got {vt}", loc)

    def cast(self, v: V, t: T, loc: SourceLoc) -> V:
        """An explicit cast ``(t) v``."""
        vt = v.type
        if isinstance(t, EnumT) and t.underlying is not None:
            inner = self.cast(v, t.underlying, loc) if not isinstance(vt, EnumT) else v
            return V(inner.code, t, inner.const)
        if isinstance(vt, EnumT) and vt.underlying is not None:
            return self.cast(V(v.code, vt.underlying, v.const), t, loc)
        if isinstance(t, Bits):
            if isinstance(vt, BoolT):
                if v.const is not None:
                    return V(str(int(v.const)), t, int(v.const))
                return V(f"(1 if {v.code} else 0)", t)
            if isinstance(vt, (Bits, IntInfT)):
                if v.const is not None:
                    c = norm_const(int(v.const), t)
                    return V(str(c), t, c)
                if isinstance(vt, Bits):
                    if vt.signed == t.signed and vt.width <= t.width and not vt.signed:
                        return V(v.code, t)
                    if not t.signed:
                        return V(f"({v.code}) & {t.mask}", t)
                    h = 1 << (t.width - 1)
                    return V(f"((({v.code}) & {t.mask}) ^ {h}) - {h}", t)
                return V(wrap(v.code, t), t)
        if isinstance(t, BoolT):
            if isinstance(vt, BoolT):
                return v
            if isinstance(vt, Bits) and vt.width == 1:
                if v.const is not None:
                    return V(str(bool(v.const)), BOOL, bool(v.const))
                return V(f"({v.code} != 0)", BOOL)
        if isinstance(t, IntInfT) and isinstance(vt, (Bits, IntInfT)):
            return v
        if type(t) is type(vt) and not isinstance(t, (Bits, EnumT, StructT)):
            return v
        raise err(f"cannot cast {vt} to {t}", loc)

    def field_of(self, ref: Ref, name: str, loc: SourceLoc | None) -> V | Ref:
        """A member of a struct-like composite value."""
        st = ref.type
        assert isinstance(st, StructT)
        f = st.field(name)
        if f is None:
            raise err(f"{st.kind} {st.name} has no field '{name}'", loc)
        base = add_base(ref.base, f.offset)
        if is_scalar(f.type):
            v = slot_v(base, f.type)
            if ref.readonly:
                v.write = None
            return v
        sb = None if ref.sbase is None else ref.sbase + f.offset
        sibs: tuple[str, ...] = ()
        if st.is_union:
            sibs = tuple(add_base(ref.base, o.offset) for o in st.fields if o.name != name)
        return Ref(base, f.type, sb, ref.readonly, sibs)

    def stack_elem(self, ref: Ref, index: V, loc: SourceLoc) -> Ref:
        """Element ``index`` of a header stack."""
        st = ref.type
        assert isinstance(st, StackT)
        stride = st.elem.slots
        if index.const is not None:
            i = int(index.const)
            if not 0 <= i < st.size:
                raise err(f"index {i} out of bounds for stack of size {st.size}", loc)
            sb = None if ref.sbase is None else ref.sbase + 1 + i * stride
            return Ref(add_base(ref.base, 1 + i * stride), st.elem, sb, ref.readonly)
        ix = self.em.tmp("ix")
        self.em.line(f"{ix} = min({index.code}, {st.size - 1})")
        base = f"({add_base(ref.base, 1)} + {stride} * {ix})"
        return Ref(base, st.elem, None, ref.readonly)

    # ---- expressions -----------------------------------------------------------------------
    def expr(self, e: A.Expr, want: T | None = None) -> Any:
        """Compile one expression."""
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise err(f"unsupported expression {type(e).__name__}", e.loc)
        return m(e, want)
