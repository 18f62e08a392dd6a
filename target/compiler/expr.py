"""Expression compilation: P4 expressions to Python expression code with exact bit semantics."""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.exprcore import ExprCore, add_base, norm_const, slot_v, wrap
from icefabric.target.compiler.types import (
    BOOL,
    ERROR,
    INT,
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
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import Emitter, ListV, ObjV, Ref, TypeV, V
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc

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


class ExprGen(ExprCore):
    """Compiles expressions within a scope chain; statement helpers live in subclasses."""

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

    def e_InvalidHeader(self, e: A.InvalidHeader, want: T | None) -> ObjV:
        """Compile ``{#}`` (only assignable to a header or header union)."""
        return ObjV("invalid_header", None)

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
        if isinstance(base, ObjV) and base.kind == "stack_next":
            # hdr.stack.next.member (a stack of unions): extracting it still advances the stack
            elem = base.obj
            if isinstance(elem.type, StructT) and elem.type.field(e.name) is not None:
                sub = self.field_of(elem, e.name, e.loc)
                return ObjV("stack_next", sub, base.extra) if isinstance(sub, Ref) else sub
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

    def e_Cast(self, e: A.Cast, want: T | None) -> V | ListV:
        """Compile a Cast expression."""
        t = self.unit.resolve_type(e.type)
        if isinstance(e.expr, A.InvalidHeader):
            return self.e_InvalidHeader(e.expr, t)  # type: ignore[return-value]
        inner = self.expr(e.expr, t if isinstance(e.expr, (A.ListExpr, A.StructExpr)) else None)
        if isinstance(inner, ListV):
            if isinstance(t, (StructT, TupleT)):
                return inner  # (T){...}: the list, typed by where it is stored
            raise err(f"cannot cast a list expression to {t}", e.loc)
        if not isinstance(inner, V):
            raise err("expected a value to cast", e.expr.loc)
        return self.cast(inner, t, e.loc)

    def e_Ternary(self, e: A.Ternary, want: T | None) -> V | Ref:
        """Compile a Ternary expression."""
        c = self.scalar(e.cond, BOOL)
        if not self._is_scalar_expr(e.then) and not isinstance(e.then, (A.ListExpr, A.StructExpr)):
            return self.composite_ternary(c, e)
        ma = self.mark()
        a = self.scalar(e.then)
        mb = self.mark()
        b = self.scalar(e.other)
        if isinstance(a.type, IntInfT) and isinstance(b.type, IntInfT) and isinstance(want, Bits):
            a, b = self.coerce(a, want, e.loc), self.coerce(b, want, e.loc)
        a, b = self.unify(a, b, e.loc)
        if ma == self.mark():
            if c.const is not None:
                return a if c.const else b
            return V(f"({a.code} if {c.code} else {b.code})", a.type)
        # A branch emitted statements: only the chosen branch may run them.
        b_lines = self.take_lines(mb)
        a_lines = self.take_lines(ma)
        if c.const is not None:
            self.em.lines.extend(a_lines if c.const else b_lines)
            return a if c.const else b
        tmp = self.em.tmp("c")
        with self.em.block(f"if {c.code}:"):
            self.put_lines(a_lines)
            self.em.line(f"{tmp} = {a.code}")
        with self.em.block("else:"):
            self.put_lines(b_lines)
            self.em.line(f"{tmp} = {b.code}")
        return V(tmp, a.type)

    def composite_ternary(self, c: V, e: A.Ternary) -> Ref:
        """``c ? x : y`` on headers/structs: the chosen one is copied into a temporary."""
        branches: list[tuple[list[str], Any]] = []
        for x in (e.then, e.other):
            m = self.mark()
            v = self.expr(x)
            branches.append((self.take_lines(m), v))
        (la, a), (lb, b) = branches
        if not (isinstance(a, Ref) and isinstance(b, Ref)) or not self._same_shape(a.type, b.type):
            raise err("the branches of ?: must have the same type", e.loc)
        n = a.type.slots
        tmp = self.unit.alloc(a.type)
        for cond, lines, v in ((f"if {c.code}:", la, a), ("else:", lb, b)):
            with self.em.block(cond):
                self.put_lines(lines)
                self.em.line(f"S[{tmp}:{tmp + n}] = S[{v.base}:{add_base(v.base, n)}]")
        return Ref(str(tmp), a.type, tmp, readonly=True)

    def e_ListExpr(self, e: A.ListExpr, want: T | None) -> ListV:
        """Compile a ListExpr expression."""
        if isinstance(want, StructT) and len(want.fields) == len(e.items):
            return ListV(self.in_order(e.items, [f.type for f in want.fields]))
        return ListV(self.in_order(e.items, [None] * len(e.items)))

    def e_StructExpr(self, e: A.StructExpr, want: T | None) -> ListV:
        """Compile a StructExpr expression."""
        names: list[str] = []
        wants: list[T | None] = []
        for name, _ in e.fields:
            ft = None
            if isinstance(want, StructT):
                f = want.field(name)
                ft = f.type if f else None
            wants.append(ft)
            names.append(name)
        return ListV(self.in_order([x for _, x in e.fields], wants), names)

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
            return self.short_circuit(e)
        if op in ("==", "!=") and not self._is_scalar_expr(e.left):
            return self.composite_eq(e)
        sub = None
        a = self.scalar(e.left)
        m = self.mark()
        if op in ("<<", ">>"):
            b = self.scalar(e.right)
            (a,) = self.pin_before([a], m)
            return binary(op, a, b, e.loc)
        want_b = a.type if not isinstance(a.type, IntInfT) and op != "++" else sub
        b = self.scalar(e.right, want_b)
        (a,) = self.pin_before([a], m)
        if op == "++":
            return binary(op, a, b, e.loc)
        a, b = self.unify(a, b, e.loc)
        return binary(op, a, b, e.loc)

    def short_circuit(self, e: A.Binary) -> V:
        """``&&`` / ``||``: the right operand is evaluated only when the left one decides not."""
        a = self.scalar(e.left, BOOL)
        m = self.mark()
        b = self.scalar(e.right, BOOL)
        is_and = e.op == "&&"
        if a.const is not None and bool(a.const) != is_and:
            del self.em.lines[m:]  # decided by the left operand: the right one never runs
            return V(str(bool(a.const)), BOOL, bool(a.const))
        if a.const is not None:
            return b
        if m == self.mark():
            if b.const is not None and bool(b.const) == is_and:
                return a
            return V(f"({a.code} {'and' if is_and else 'or'} {b.code})", BOOL)
        b_lines = self.take_lines(m)
        tmp = self.em.tmp("sc")
        self.em.line(f"{tmp} = {a.code}")
        with self.em.block(f"if {tmp}:" if is_and else f"if not {tmp}:"):
            self.put_lines(b_lines)
            self.em.line(f"{tmp} = {b.code}")
        return V(tmp, BOOL)

    def _is_scalar_expr(self, e: A.Expr) -> bool:
        saved = self.em
        self.em = Emitter()
        try:
            v = self.expr(e)
        finally:
            self.em = saved
        return isinstance(v, V)

    def composite_eq(self, e: A.Binary) -> V:
        """== / != between two headers, unions, stacks or structs (validity included)."""
        a = self.expr(e.left)
        b = self.expr(e.right, a.type if isinstance(a, Ref) else None)
        if isinstance(a, Ref) and isinstance(b, ListV):
            tmp = Ref(str(self.unit.alloc(a.type)), a.type, None)
            self.assign_value(tmp, b, e.right.loc)  # type: ignore[attr-defined]
            b = tmp
        if isinstance(a, ListV) and isinstance(b, ListV):
            code = self._list_eq(a, b, e.loc)
            return V(f"(not {code})" if e.op == "!=" else code, BOOL)
        if not (isinstance(a, Ref) and isinstance(b, Ref)):
            raise err("comparison of composite values needs two headers or structs", e.loc)
        if not self._same_shape(a.type, b.type):
            raise err(f"type mismatch: {a.type} and {b.type}", e.loc)
        code = self._eq_code(a.base, b.base, a.type)
        if e.op == "!=":
            code = f"(not {code})"
        return V(code, BOOL)

    def _list_eq(self, a: ListV, b: ListV, loc: SourceLoc) -> str:
        """Code comparing two list (tuple) expressions element by element."""
        from icefabric.target.compiler.binops import binary

        if len(a.items) != len(b.items):
            raise err("comparing lists of different lengths", loc)
        parts: list[str] = []
        for x, y in zip(a.items, b.items, strict=True):
            if isinstance(x, ListV) and isinstance(y, ListV):
                parts.append(self._list_eq(x, y, loc))
            elif isinstance(x, V) and isinstance(y, V):
                x, y = self.unify(x, y, loc)
                parts.append(binary("==", x, y, loc).code)
            elif isinstance(x, Ref) and isinstance(y, Ref) and self._same_shape(x.type, y.type):
                parts.append(self._eq_code(x.base, y.base, x.type))
            else:
                raise err("list elements of different kinds cannot be compared", loc)
        return "(" + " and ".join(parts or ["True"]) + ")"

    def _same_shape(self, x: T, y: T) -> bool:
        if isinstance(x, StructT) and isinstance(y, StructT):
            return x.kind == y.kind and x.name == y.name
        return x == y or (isinstance(x, StackT) and isinstance(y, StackT) and
                          x.size == y.size and self._same_shape(x.elem, y.elem))  # fmt: skip

    def _eq_code(self, a: str, b: str, t: T) -> str:
        """Code comparing two values of type ``t`` at slot bases ``a`` and ``b``.

        Two headers are equal when both are invalid, or both valid with equal fields; two
        unions when every member compares equal; structs and stacks member by member."""
        n = t.slots
        if isinstance(t, StructT) and t.is_header:
            if n == 1:
                return f"(S[{a}] == S[{b}])"
            fa = f"S[{add_base(a, 1)}:{add_base(a, n)}]"
            fb = f"S[{add_base(b, 1)}:{add_base(b, n)}]"
            return f"(S[{a}] == S[{b}] and (not S[{a}] or {fa} == {fb}))"
        if isinstance(t, StructT) and (t.is_union or self._holds_headers(t)):
            parts = [self._eq_code(add_base(a, f.offset), add_base(b, f.offset), f.type)
                     for f in t.fields]  # fmt: skip
            return "(" + " and ".join(parts or ["True"]) + ")"
        if isinstance(t, StackT):
            k = t.elem.slots
            parts = [
                self._eq_code(add_base(a, 1 + i * k), add_base(b, 1 + i * k), t.elem)
                for i in range(t.size)
            ]
            return "(" + " and ".join(parts) + ")"
        if isinstance(t, TupleT):
            parts = []
            off = 0
            for et in t.elems:
                parts.append(self._eq_code(add_base(a, off), add_base(b, off), et))
                off += et.slots
            return "(" + " and ".join(parts or ["True"]) + ")"
        return f"(S[{a}:{add_base(a, n)}] == S[{b}:{add_base(b, n)}])"

    def _holds_headers(self, t: T) -> bool:
        if isinstance(t, StructT):
            return t.is_header or t.is_union or any(self._holds_headers(f.type) for f in t.fields)
        return isinstance(t, (StackT, TupleT))

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
