"""Expression compilation: P4 expressions to Python expression code with exact bit semantics."""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.types import (
    BOOL,
    ERROR,
    INT,
    MATCH_KIND,
    Bits,
    BoolT,
    EnumT,
    ErrorT,
    IntInfT,
    StackT,
    StructT,
    T,
    TupleT,
    Varbit,
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


_CMP = {"==", "!=", "<", ">", "<=", ">="}
_STRUCT_METHODS = {
    "isValid",
    "setValid",
    "setInvalid",
    "minSizeInBits",
    "minSizeInBytes",
    "maxSizeInBits",
    "maxSizeInBytes",
}


class ExprGen:
    """Compiles expressions within a scope chain; statement helpers live in subclasses."""

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
        return Ref(base, f.type, sb, ref.readonly)

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
        base = f"({add_base(ref.base, 1)} + {stride} * min({index.code}, {st.size - 1}))"
        return Ref(base, st.elem, None, ref.readonly)

    # ---- expressions -----------------------------------------------------------------------
    def expr(self, e: A.Expr, want: T | None = None) -> Any:
        """Compile one expression."""
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise err(f"unsupported expression {type(e).__name__}", e.loc)
        return m(e, want)

    def e_IntLit(self, e: A.IntLit, want: T | None) -> V:
        """Compile a IntLit expression."""
        if e.width is None:
            return V(str(e.value), INT, e.value)
        t = Bits(e.width, e.signed)
        c = norm_const(e.value, t)
        return V(str(c), t, c)

    def e_BoolLit(self, e: A.BoolLit, want: T | None) -> V:
        """Compile a BoolLit expression."""
        return V(str(e.value), BOOL, e.value)

    def e_StrLit(self, e: A.StrLit, want: T | None) -> V:
        """Compile a StrLit expression."""
        from icefabric.target.compiler.types import STRING

        return V(repr(e.value), STRING, e.value)

    def e_Name(self, e: A.Name, want: T | None) -> Any:
        """Compile a Name expression."""
        return self.lookup(e.name, e.loc, e.top)

    def e_TypeExpr(self, e: A.TypeExpr, want: T | None) -> TypeV:
        """Compile a TypeExpr expression."""
        return TypeV(self.unit.resolve_type(e.type))

    def e_DontCare(self, e: A.DontCare, want: T | None) -> V:
        """Compile a DontCare expression."""
        from icefabric.target.compiler.types import DONTCARE

        return V("None", DONTCARE, None, lambda c: f"_ = {c}")

    def e_Member(self, e: A.Member, want: T | None) -> Any:
        """Compile a Member expression."""
        base = self.expr(e.expr)
        if isinstance(base, TypeV):
            t = base.type
            if isinstance(t, ErrorT):
                if e.name not in self.unit.errors:
                    raise err(f"unknown error '{e.name}'", e.loc)
                c = self.unit.errors[e.name]
                return V(str(c), ERROR, c)
            if isinstance(t, EnumT):
                if e.name not in t.members:
                    raise err(f"enum {t.name} has no member '{e.name}'", e.loc)
                c = t.members[e.name]
                return V(str(c), t, c)
            return ObjV("type_method", t, e.name)
        if isinstance(base, Ref):
            t = base.type
            if isinstance(t, StructT):
                if t.field(e.name) is None:
                    if e.name not in _STRUCT_METHODS:
                        raise err(f"{t.kind} {t.name} has no field '{e.name}'", e.loc)
                    return ObjV("method", base, e.name)
                return self.field_of(base, e.name, e.loc)
            if isinstance(t, StackT):
                return self.stack_member(base, e.name, e.loc)
            raise err(f"type {t} has no member '{e.name}'", e.loc)
        if isinstance(base, ObjV):
            if base.kind == "apply":
                if e.name == "hit":
                    return V(f"{base.obj}[0]", BOOL)
                if e.name == "miss":
                    return V(f"(not {base.obj}[0])", BOOL)
                if e.name == "action_run":
                    return V(f"{base.obj}[1]", INT, None)
                raise err(f"table apply result has no member '{e.name}'", e.loc)
            return ObjV("method", base, e.name)
        if isinstance(base, V):
            return ObjV("method", base, e.name)
        raise err(f"cannot access member '{e.name}'", e.loc)

    def stack_member(self, ref: Ref, name: str, loc: SourceLoc) -> Any:
        """next/last/lastIndex/size of a header stack."""
        st = ref.type
        assert isinstance(st, StackT)
        nxt = f"S[{ref.base}]"
        if name == "size":
            return V(str(st.size), Bits(32), st.size)
        if name in ("lastIndex", "nextIndex"):
            code = f"(({nxt} - 1) & 0xFFFFFFFF)" if name == "lastIndex" else nxt
            return V(code, Bits(32))
        if name in ("next", "last"):
            idx = self.em.tmp("i")
            if name == "next":
                self.em.line(f"{idx} = {nxt}")
                cond = f"{idx} >= {st.size}"
            else:
                self.em.line(f"{idx} = {nxt} - 1")
                cond = f"{idx} < 0"
            with self.em.block(f"if {cond}:"):
                if self.in_parser:
                    ecode = self.unit.errors["StackOutOfBounds"]
                    self.em.line(f"raise ParserError({ecode}, pos)")
                else:
                    self.em.line(f"{idx} = {0 if name == 'last' else st.size - 1}")
            base = f"({add_base(ref.base, 1)} + {st.elem.slots} * {idx})"
            r = Ref(base, st.elem, None)
            if name == "next" and self.in_parser:
                return ObjV("stack_next", r, ref)
            return r
        return ObjV("method", ref, name)

    def e_Index(self, e: A.Index, want: T | None) -> Any:
        """Compile a Index expression."""
        base = self.expr(e.expr)
        if isinstance(base, Ref) and isinstance(base.type, StackT):
            idx = self.scalar(e.index)
            if not isinstance(idx.type, (Bits, IntInfT)):
                raise err("stack index must be an integer", e.index.loc)
            return self.stack_elem(base, idx, e.loc)
        if isinstance(base, Ref) and isinstance(base.type, TupleT):
            i = self.unit.const_int(e.index)
            tt = base.type
            off = sum(x.slots for x in tt.elems[:i])
            et = tt.elems[i]
            b = add_base(base.base, off)
            return slot_v(b, et) if is_scalar(et) else Ref(b, et, None)
        raise err("only header stacks and tuples can be indexed", e.loc)

    def e_Slice(self, e: A.Slice, want: T | None) -> V:
        """Compile a Slice expression."""
        v = self.scalar(e.expr)
        hi = self.unit.const_int(e.hi)
        lo = self.unit.const_int(e.lo)
        if not isinstance(v.type, (Bits, IntInfT)):
            raise err(f"cannot slice a value of type {v.type}", e.loc)
        width = v.type.width if isinstance(v.type, Bits) else hi + 1
        if not (0 <= lo <= hi < width):
            raise err(f"slice [{hi}:{lo}] out of range for {v.type}", e.loc)
        t = Bits(hi - lo + 1)
        m = t.mask
        if v.const is not None:
            c = (int(v.const) >> lo) & m
            return V(str(c), t, c)
        code = f"(({v.code}) >> {lo}) & {m}" if lo else f"({v.code}) & {m}"
        out = V(code, t)
        if v.write is not None and isinstance(v.type, Bits):
            vt = v.type
            keep = vt.mask & ~(m << lo)
            base_read = v.code
            base_write = v.write

            def write(c: str) -> str:
                """Store into the sliced bits of the base lvalue."""
                new = f"({base_read} & {keep}) | ((({c}) & {m}) << {lo})"
                if vt.signed:
                    h = 1 << (vt.width - 1)
                    new = f"((({new}) & {vt.mask}) ^ {h}) - {h}"
                return base_write(new)

            out.write = write
        return out

    def e_Cast(self, e: A.Cast, want: T | None) -> V:
        """Compile a Cast expression."""
        t = self.unit.resolve_type(e.type)
        inner = self.expr(e.expr, t if isinstance(e.expr, (A.ListExpr, A.StructExpr)) else None)
        if isinstance(inner, ListV):
            raise err("casting a list expression is not supported", e.loc)
        if not isinstance(inner, V):
            raise err("expected a value to cast", e.expr.loc)
        return self.cast(inner, t, e.loc)

    def e_Ternary(self, e: A.Ternary, want: T | None) -> V:
        """Compile a Ternary expression."""
        c = self.scalar(e.cond, BOOL)
        a = self.scalar(e.then)
        b = self.scalar(e.other)
        if isinstance(a.type, IntInfT) and isinstance(b.type, IntInfT) and isinstance(want, Bits):
            a, b = self.coerce(a, want, e.loc), self.coerce(b, want, e.loc)
        a, b = self.unify(a, b, e.loc)
        if c.const is not None:
            return a if c.const else b
        return V(f"({a.code} if {c.code} else {b.code})", a.type)

    def e_ListExpr(self, e: A.ListExpr, want: T | None) -> ListV:
        """Compile a ListExpr expression."""
        if isinstance(want, StructT) and len(want.fields) == len(e.items):
            return ListV([self.expr(x, f.type) for x, f in zip(e.items, want.fields, strict=True)])
        return ListV([self.expr(x) for x in e.items])

    def e_StructExpr(self, e: A.StructExpr, want: T | None) -> ListV:
        """Compile a StructExpr expression."""
        items: list[Any] = []
        names: list[str] = []
        for name, x in e.fields:
            ft = None
            if isinstance(want, StructT):
                f = want.field(name)
                ft = f.type if f else None
            items.append(self.expr(x, ft))
            names.append(name)
        return ListV(items, names)

    def e_Unary(self, e: A.Unary, want: T | None) -> V:
        """Compile a Unary expression."""
        v = self.scalar(e.expr, None if e.op != "!" else BOOL)
        t = v.type
        if e.op == "!":
            if not isinstance(t, BoolT):
                raise err(f"'!' needs a bool operand, got {t}", e.loc)
            if v.const is not None:
                return V(str(not v.const), BOOL, not v.const)
            return V(f"(not {v.code})", BOOL)
        if not isinstance(t, (Bits, IntInfT)):
            raise err(f"'{e.op}' needs an integer operand, got {t}", e.loc)
        if e.op == "~" and isinstance(t, IntInfT):
            raise err("'~' cannot be applied to an integer of unknown width", e.loc)
        if v.const is not None:
            c = -int(v.const) if e.op == "-" else ~int(v.const)
            c = norm_const(c, t)
            return V(str(c), t, c)
        if e.op == "-":
            return V(wrap(f"-({v.code})", t), t)
        assert isinstance(t, Bits)
        return V(f"(~({v.code}))" if t.signed else f"(({v.code}) ^ {t.mask})", t)

    def unify(self, a: V, b: V, loc: SourceLoc) -> tuple[V, V]:
        """Make two operands the same type (int literals take the other side's width)."""
        if isinstance(a.type, IntInfT) and not isinstance(b.type, IntInfT):
            return self.coerce(a, b.type, loc), b
        if isinstance(b.type, IntInfT) and not isinstance(a.type, IntInfT):
            return a, self.coerce(b, a.type, loc)
        if isinstance(a.type, EnumT) and a.type.underlying and isinstance(b.type, Bits):
            return V(a.code, a.type.underlying, a.const), b
        if isinstance(b.type, EnumT) and b.type.underlying and isinstance(a.type, Bits):
            return a, V(b.code, b.type.underlying, b.const)
        same = a.type == b.type or (
            isinstance(a.type, type(b.type)) and not isinstance(a.type, (Bits, EnumT))
        )
        if not same:
            raise err(f"type mismatch: {a.type} and {b.type}", loc)
        return a, b

    def e_Binary(self, e: A.Binary, want: T | None) -> Any:
        """Compile a Binary expression."""
        from icefabric.target.compiler.binops import binary

        op = e.op
        if op in ("&&", "||"):
            a = self.scalar(e.left, BOOL)
            b = self.scalar(e.right, BOOL)
            if a.const is not None and b.const is not None:
                c = (a.const and b.const) if op == "&&" else (a.const or b.const)
                return V(str(bool(c)), BOOL, bool(c))
            py = "and" if op == "&&" else "or"
            return V(f"({a.code} {py} {b.code})", BOOL)
        if op in ("==", "!=") and not self._is_scalar_expr(e.left):
            return self.composite_eq(e)
        sub = None
        a = self.scalar(e.left)
        if op in ("<<", ">>"):
            b = self.scalar(e.right)
            return binary(op, a, b, e.loc)
        b = self.scalar(e.right, a.type if not isinstance(a.type, IntInfT) else sub)
        if op == "++":
            return binary(op, a, b, e.loc)
        a, b = self.unify(a, b, e.loc)
        return binary(op, a, b, e.loc)

    def _is_scalar_expr(self, e: A.Expr) -> bool:
        saved = self.em
        self.em = Emitter()
        try:
            v = self.expr(e)
        finally:
            self.em = saved
        return isinstance(v, V)

    def composite_eq(self, e: A.Binary) -> V:
        """== / != between two headers or structs."""
        a = self.expr(e.left)
        b = self.expr(e.right)
        if not (isinstance(a, Ref) and isinstance(b, Ref)):
            raise err("comparison of composite values needs two headers or structs", e.loc)
        n = a.type.slots
        if b.type.slots != n:
            raise err(f"type mismatch: {a.type} and {b.type}", e.loc)
        sa = f"S[{a.base}:{add_base(a.base, n)}]"
        sb = f"S[{b.base}:{add_base(b.base, n)}]"
        if isinstance(a.type, StructT) and a.type.is_header:
            code = f"(S[{a.base}] == S[{b.base}] and (not S[{a.base}] or {sa} == {sb}))"
        else:
            code = f"({sa} == {sb})"
        if e.op == "!=":
            code = f"(not {code})"
        return V(code, BOOL)

    def e_Call(self, e: A.Call, want: T | None) -> Any:
        """Compile a Call expression."""
        return self.call(e, want)  # type: ignore[attr-defined]

    def e_Default(self, e: A.Default, want: T | None) -> Any:
        """Compile a Default expression."""
        raise err("'default' is only allowed in select cases and table entries", e.loc)

    def e_Mask(self, e: A.Mask, want: T | None) -> Any:
        """Compile a Mask expression."""
        raise err("'&&&' is only allowed in select cases and table entries", e.loc)

    def e_Range(self, e: A.Range, want: T | None) -> Any:
        """Compile a Range expression."""
        raise err("'..' is only allowed in select cases and table entries", e.loc)

    def e_SelectExpr(self, e: A.SelectExpr, want: T | None) -> Any:
        """Compile a SelectExpr expression."""
        raise err("select is only allowed in a transition", e.loc)

    def bits_of(self, v: Any, loc: SourceLoc) -> list[tuple[str, int]]:
        """Flatten a value into (code, width) pairs of unsigned bits, MSB first."""
        if isinstance(v, ListV):
            out: list[tuple[str, int]] = []
            for it in v.items:
                out.extend(self.bits_of(it, loc))
            return out
        if isinstance(v, V):
            t = v.type
            if isinstance(t, EnumT) and t.underlying is not None:
                t = t.underlying
            if isinstance(t, Bits):
                return [((f"({v.code}) & {t.mask}" if t.signed else v.code), t.width)]
            if isinstance(t, BoolT):
                return [(f"(1 if {v.code} else 0)", 1)]
            raise err(f"a value of type {t} has no bit representation", loc)
        if isinstance(v, Ref):
            t = v.type
            if isinstance(t, StructT):
                out = []
                for f in t.fields:
                    out.extend(self.bits_of(self.field_of(v, f.name, loc), loc))
                return out
            if isinstance(t, StackT):
                out = []
                for i in range(t.size):
                    out.extend(self.bits_of(self.stack_elem(v, V(str(i), INT, i), loc), loc))
                return out
            if isinstance(t, Varbit):
                return [(f"S[{v.base}]", f"S[{add_base(v.base, 1)}]")]  # type: ignore[list-item]
        raise err("expected a list of fields", loc)
