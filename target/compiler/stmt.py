"""Statement compilation (assignments, if, switch, blocks, variables, exit/return)."""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.calls import R_LEN_DELTA, CallGen
from icefabric.target.compiler.exprcore import add_base, slot_v
from icefabric.target.compiler.model import TableInfo
from icefabric.target.compiler.types import BOOL, BoolT, StructT, TupleT, is_scalar
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import Emitter, ListV, ObjV, Ref, V
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc


class StmtGen(CallGen):
    """Adds statements on top of expressions and calls."""

    # What `return` means in the body being compiled: 'action', 'control', 'function'.
    body_kind = "control"
    ret_type: Any = None
    ret_ref: Ref | None = None  # where a function returning a header/struct puts its result

    def stmt(self, s: A.Stmt) -> None:
        """Compile one statement into the current emitter."""
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None:
            raise err(f"unsupported statement {type(s).__name__}", s.loc)
        m(s)

    def block_stmts(self, stmts: list[A.Stmt]) -> None:
        """Compile statements in a new scope."""
        self.scopes.append({})
        try:
            for s in stmts:
                self.stmt(s)
        finally:
            self.scopes.pop()

    def s_Block(self, s: A.Block) -> None:
        """Compile a Block statement."""
        self.block_stmts(s.stmts)

    def s_Empty(self, s: A.Empty) -> None:
        """Compile a Empty statement."""
        return

    def s_Exit(self, s: A.Exit) -> None:
        """Compile a Exit statement."""
        if self.in_parser:
            raise err("exit is not allowed in a parser", s.loc)
        self.em.line("raise ExitControl()")

    def s_Return(self, s: A.Return) -> None:
        """Compile a Return statement."""
        if self.in_parser:
            raise err("return is not allowed in a parser state", s.loc)
        if self.body_kind == "function":
            if s.value is None:
                self.em.line("return None")
            elif self.ret_ref is not None:
                self.assign_value(self.ret_ref, self.expr(s.value, self.ret_ref.type), s.loc)
                self.em.line("return None")
            else:
                v = self.scalar(s.value, self.ret_type)
                self.em.line(f"return {v.code}")
        else:
            if s.value is not None:
                raise err("return with a value outside a function", s.loc)
            self.em.line("return")

    def s_VarDecl(self, s: A.VarDecl) -> None:
        """Compile a VarDecl statement."""
        t = self.unit.resolve_type(s.type)
        if s.const:
            assert s.init is not None
            if not is_scalar(t):
                val = self.expr(s.init, t)
                if not isinstance(val, ListV):
                    raise err("a constant of this type needs an initializer list", s.init.loc)
                self.scopes[-1][s.name] = self.const_composite(t, val, s.init.loc)
                return
            v = self.scalar(s.init, t)
            if v.const is None:
                raise err("constant initializer is not a compile-time constant", s.init.loc)
            self.scopes[-1][s.name] = v
            return
        base = self.unit.alloc(t)
        if is_scalar(t):
            target: Any = slot_v(str(base), t)
        else:
            target = Ref(str(base), t, base)
            n = t.slots
            self.em.line(f"S[{base}:{base + n}] = TPL[{base}:{base + n}]")
        self.scopes[-1][s.name] = target
        if s.init is not None:
            self.assign_to(target, s.init, s.loc)
        elif is_scalar(t):
            self.em.line(target.write("False" if t is BOOL else "0"))

    def _pin_reads(self, v: Any, lines: list[str]) -> Any:
        """``v`` with every element that reads packet state read into a temporary first."""
        if isinstance(v, V) and v.const is None and "S[" in v.code:
            tmp = self.em.tmp("o")
            lines.append(f"{tmp} = {v.code}")
            return V(tmp, v.type)
        if isinstance(v, ListV):
            return ListV([self._pin_reads(x, lines) for x in v.items], v.names)
        return v

    def const_composite(self, t: Any, val: ListV, loc: SourceLoc) -> Ref:
        """A struct/header/tuple constant: read-only slots whose initial contents hold it."""
        base = self.unit.alloc(t)
        self._fill_const(base, t, val, loc)
        return Ref(str(base), t, base, readonly=True)

    def _fill_const(self, base: int, t: Any, val: Any, loc: SourceLoc) -> None:
        tpl = self.unit.template
        if is_scalar(t):
            if not isinstance(val, V):
                raise err(f"expected a constant of type {t}", loc)
            v = self.coerce(val, t, loc)
            if v.const is None:
                raise err("constant initializer is not a compile-time constant", loc)
            tpl[base] = bool(v.const) if t is BOOL else int(v.const)
            return
        if not isinstance(val, ListV):
            raise err(f"expected an initializer list for {t}", loc)
        if isinstance(t, StructT):
            names = val.names or [f.name for f in t.fields]
            if len(names) != len(t.fields) or len(val.items) != len(t.fields):
                raise err(f"initializer for {t} needs {len(t.fields)} fields", loc)
            for name, item in zip(names, val.items, strict=True):
                f = t.field(name)
                if f is None:
                    raise err(f"{t} has no field '{name}'", loc)
                self._fill_const(base + f.offset, f.type, item, loc)
            if t.is_header:
                tpl[base] = True
            return
        if isinstance(t, TupleT) and len(t.elems) == len(val.items):
            off = 0
            for et, item in zip(t.elems, val.items, strict=True):
                self._fill_const(base + off, et, item, loc)
                off += et.slots
            return
        raise err(f"cannot make a constant of type {t}", loc)

    def s_Assign(self, s: A.Assign) -> None:
        """Compile a Assign statement.

        The right-hand side runs first and the target is located after it, as p4c-bm2-ss
        compiles `a[i] = f(i)` (the spec would fix `a[i]` first): BMv2 writes `a[i]` with
        the `i` that `f` left."""
        saved = self.em
        self.em = Emitter()  # the target's type only
        try:
            probe = self.expr(s.lhs)
        finally:
            self.em = saved
        if isinstance(probe, ObjV) and probe.kind == "stack_next":
            raise err("assignment to .next is not supported", s.loc)
        if isinstance(probe, V) and probe.write is not None:
            v = self.scalar(s.rhs, probe.type)
            target = self.expr(s.lhs)
            self.em.line(target.write(v.code))
            return
        if isinstance(probe, Ref) and not probe.readonly:
            val = self.expr(s.rhs, probe.type)
            self.assign_value(self.expr(s.lhs), val, s.loc)
            return
        self.assign_to(self.expr(s.lhs), s.rhs, s.loc)

    def assign_to(self, target: Any, rhs: A.Expr, loc: SourceLoc) -> None:
        """Store the value of ``rhs`` into an lvalue."""
        if isinstance(target, V):
            if target.write is None:
                raise err("cannot assign to this expression", loc)
            v = self.scalar(rhs, target.type)
            self.em.line(target.write(v.code))
            return
        if isinstance(target, Ref):
            if target.readonly:
                raise err("cannot assign to an 'in' parameter", loc)
            val = self.expr(rhs, target.type)
            self.assign_value(target, val, loc)
            return
        raise err("cannot assign to this expression", loc)

    def assign_value(self, target: Ref, val: Any, loc: SourceLoc) -> None:
        """Store a compiled composite value (Ref or ListV) into ``target``."""
        if target.readonly:
            raise err("cannot assign to an 'in' parameter", loc)
        t = target.type
        if isinstance(val, Ref):
            if val.type.slots != t.slots or type(val.type) is not type(t):
                raise err(f"type mismatch: cannot assign {val.type} to {t}", loc)
            n = t.slots
            self.em.line(f"S[{target.base}:{add_base(target.base, n)}] = "
                         f"S[{val.base}:{add_base(val.base, n)}]")  # fmt: skip
            if target.siblings:  # a valid header assigned to a union member: the others go
                with self.em.block(f"if S[{target.base}]:"):
                    self.invalidate_siblings(target, True)
            return
        if isinstance(val, ListV):
            # every element is read before the first store: `m = { m.y, m.x }` swaps
            lines: list[str] = []
            val = self._pin_reads(val, lines)
            for ln in lines:
                self.em.line(ln)
            if isinstance(t, StructT):
                names = val.names or [f.name for f in t.fields]
                if len(names) != len(t.fields) or len(val.items) != len(t.fields):
                    raise err(f"initializer for {t} needs {len(t.fields)} fields", loc)
                for name, item in zip(names, val.items, strict=True):
                    sub = self.field_of(target, name, loc)
                    self.store(sub, item, loc)
                if t.is_header:
                    self.em.line(f"S[{target.base}] = True")
                    self.invalidate_siblings(target, True)
                return
            if isinstance(t, TupleT):
                off = 0
                for et, item in zip(t.elems, val.items, strict=True):
                    b = add_base(target.base, off)
                    sub = slot_v(b, et) if is_scalar(et) else Ref(b, et, None)
                    self.store(sub, item, loc)
                    off += et.slots
                return
        if isinstance(val, ObjV) and val.kind == "invalid_header":
            # `h = {#}` is h.setInvalid() (a union: every member)
            if isinstance(t, StructT) and (t.is_header or t.is_union):
                heads = [target] if t.is_header else [
                    self.field_of(target, f.name, loc) for f in t.fields
                ]  # fmt: skip
                for h in heads:
                    assert isinstance(h, Ref) and isinstance(h.type, StructT)
                    with self.em.block(f"if S[{h.base}]:"):
                        self.em.line(f"S[{h.base}] = False")
                        self.em.line(f"S[{R_LEN_DELTA}] -= {h.type.fixed_bits() // 8}")
                return
            raise err(f"{{#}} can only be assigned to a header or header union, not {t}", loc)
        raise err(f"cannot assign this value to {t}", loc)

    def store(self, target: Any, item: Any, loc: SourceLoc) -> None:
        """Store one already compiled value into an lvalue."""
        if isinstance(target, V):
            if not isinstance(item, V):
                raise err(f"expected a value of type {target.type}", loc)
            item = self.coerce(item, target.type, loc)
            assert target.write is not None
            self.em.line(target.write(item.code))
        else:
            self.assign_value(target, item, loc)

    def s_CallStmt(self, s: A.CallStmt) -> None:
        """Compile a CallStmt statement."""
        v = self.call(s.call, None, stmt=True)
        if isinstance(v, V) and v.code and v.code != "None":
            self.em.line(v.code)
        elif isinstance(v, ObjV) and v.kind == "apply":
            self.em.line(str(v.obj))

    def s_If(self, s: A.If) -> None:
        """Compile a If statement."""
        c = self.scalar(s.cond)
        if not isinstance(c.type, BoolT):
            raise err(f"if condition must be bool, got {c.type}", s.cond.loc)
        if c.const is not None:
            branch = s.then if c.const else s.other
            if branch is not None:
                self.block_stmts([branch])
            return
        with self.em.block(f"if {c.code}:"):
            self.block_stmts([s.then])
        if s.other is not None:
            with self.em.block("else:"):
                self.block_stmts([s.other])

    def s_Switch(self, s: A.Switch) -> None:
        """Compile a Switch statement."""
        sel = self.expr(s.expr)
        table = None
        if isinstance(s.expr, A.Member) and s.expr.name == "action_run":
            table = self.apply_table_of(s.expr.expr)
        if not isinstance(sel, V):
            raise err("switch needs a table's action_run or a value", s.expr.loc)
        tmp = self.em.tmp("sw")
        self.em.line(f"{tmp} = {sel.code}")
        groups: list[tuple[list[str], A.Block]] = []
        pending: list[str] = []
        for case in s.cases:
            for label in case.labels:
                if isinstance(label, A.Default):
                    pending.append("True")
                elif table is not None:
                    if not isinstance(label, A.Name):
                        raise err("switch on action_run needs action names as labels", label.loc)
                    pending.append(f"{tmp} == {self.action_label(table, label)!r}")
                else:
                    lv = self.scalar(label, sel.type)
                    if lv.const is None:
                        raise err("switch labels must be constants", label.loc)
                    pending.append(f"{tmp} == {lv.code}")
            if case.body is None:
                continue
            groups.append((pending, case.body))
            pending = []
        # `default` is taken only when no label matches, wherever it is written (p4c makes a
        # value switch a table and BMv2 maps action_run labels to their actions)
        groups.sort(key=lambda g: "True" in g[0])
        for i, (conds, body) in enumerate(groups):
            if "True" in conds:
                head = "if True:" if i == 0 else "else:"
            else:
                head = f"{'if' if i == 0 else 'elif'} {' or '.join(conds)}:"
            with self.em.block(head):
                self.block_stmts(body.stmts)

    def apply_table_of(self, e: A.Expr) -> TableInfo | None:
        """The table of a ``t.apply()`` expression, if any."""
        if isinstance(e, A.Call) and isinstance(e.func, A.Member) and e.func.name == "apply":
            obj = self.expr(e.func.expr)
            if isinstance(obj, ObjV) and obj.kind == "table":
                table: TableInfo = obj.obj
                return table
        return None

    def action_label(self, table: TableInfo, label: A.Name) -> str:
        """The P4Info name of an action used as a switch label."""
        for act, _ in table.actions:
            if act.local_name == label.name or act.name == label.name:
                return act.name
        raise err(f"'{label.name}' is not an action of table {table.name}", label.loc)
