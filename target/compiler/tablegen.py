"""Tables: keys, action lists, default actions, const entries and the apply function."""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.model import ActionInfo, ExternInst, KeyInfo, TableInfo
from icefabric.target.compiler.types import Bits, BoolT, ErrorT, ExternT, bit_width
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import ObjV, V
from icefabric.target.p4 import ast as A
from icefabric.target.runtime.model import ActionCall, Match, TableEntry

DEFAULT_TABLE_SIZE = 1024
ERROR_KEY_WIDTH = 32  # p4c-bm2-ss stores error values in 32-bit fields
BM_MAX_PRIORITY = (1 << 31) - 1  # PI's pivot between P4Runtime and BMv2 priorities


def expr_text(e: A.Expr) -> str:
    """Source-like text of an expression, as p4c names table keys."""
    if isinstance(e, A.Name):
        return ("." if e.top else "") + e.name
    if isinstance(e, A.Member):
        return f"{expr_text(e.expr)}.{e.name}"
    if isinstance(e, A.Index):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, A.Slice):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, A.Call):
        return f"{expr_text(e.func)}({', '.join(expr_text(a.expr) for a in e.args)})"
    if isinstance(e, A.IntLit):
        return str(e.value)
    if isinstance(e, A.Cast):
        return f"({e.type.kind}){expr_text(e.expr)}"
    if isinstance(e, A.Binary):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    return type(e).__name__


class TableGenMixin:
    """Table compilation (mixed into ControlGen)."""

    def compile_table(self: Any, decl: A.TableDecl, prefix: str) -> TableInfo:
        """Compile a table: keys, actions, properties and its apply function."""
        from icefabric.target.compiler.controlgen import fq_name

        name = fq_name(prefix, decl.name, decl.annos)
        info = TableInfo(name, self.unit.pyname(f"TBL_{name}"), self.unit.pyname(f"T_{name}"), decl)
        em = self.new_func()
        saved = self.em
        self.em = em
        try:
            with em.block(f"def {info.pyfunc}(S):"):
                key_codes = self._table_keys(decl, info)
                self._table_actions(decl, info)
                self._table_props(decl, info, prefix)
                key = "(" + "".join(f"{c}, " for c in key_codes) + ")"
                em.line(f"a, h = {info.pyobj}.lookup({key}, {self.plen})")
                em.line("n = a.name")
                em.line(f"AF_{info.pyobj}[n](S, *a.params)")
                em.line("return h, n")
        finally:
            self.em = saved
        self.funcs.append("\n".join(em.lines))
        disp = ", ".join(f"{a.name!r}: {info.bound.get(a.name, a.pyfunc)}" for a, _ in info.actions)
        if info.default_action is not None and all(
            a is not info.default_action for a, _ in info.actions
        ):
            disp += f", {info.default_action.name!r}: {info.default_action.pyfunc}"
        self.funcs.append(f"AF_{info.pyobj} = {{{disp}}}")
        self.model.tables[name] = info
        return info

    def _table_keys(self: Any, decl: A.TableDecl, info: TableInfo) -> list[str]:
        prop = decl.prop("key")
        codes: list[str] = []
        if prop is None:
            return codes
        for k in prop.value:
            v = self.scalar(k.expr)
            if k.match_kind not in self.unit.match_kinds:
                raise err(f"unknown match kind '{k.match_kind}'", k.loc)
            w = bit_width(v.type)
            p4w = None
            if isinstance(v.type, ErrorT):
                # BMv2 matches the error's code (32 bits); p4c's P4Info says bitwidth 0
                w, p4w = ERROR_KEY_WIDTH, 0
            if w is None:
                raise err(f"table key of type {v.type} is not supported", k.expr.loc)
            code = v.code
            if isinstance(v.type, BoolT):
                code = f"(1 if {code} else 0)"
            elif isinstance(v.type, Bits) and v.type.signed:
                code = f"(({code}) & {v.type.mask})"
            a = A.anno(k.annos, "name")
            kname = (
                a.args[0].value
                if a is not None and a.args and isinstance(a.args[0], A.StrLit)
                else expr_text(k.expr)
            )
            info.keys.append(KeyInfo(kname, k.match_kind, w, code, k.annos, p4w))
            codes.append(code)
        return codes

    def _resolve_action(self: Any, ref: A.ActionRef) -> ActionInfo:
        obj = self.lookup(ref.name, ref.loc, ref.top)
        if not isinstance(obj, ObjV) or obj.kind != "action":
            raise err(f"'{ref.name}' is not an action", ref.loc)
        info: ActionInfo = self.action_info(obj.obj)
        return info

    def _bound_action(self: Any, info: TableInfo, act: ActionInfo, ref: A.ActionRef) -> str:
        """A wrapper running ``act`` with the directional arguments the actions list binds
        (evaluated each time the table runs the action) and the control-plane data."""
        dirs = [p for p in act.decl.params if p.direction]
        cps = [p for p in act.decl.params if not p.direction]
        if len(ref.args) > len(dirs):
            raise err(
                f"{act.local_name}: an actions list binds only the directional parameters "
                f"({len(dirs)}), the others are action data",
                ref.loc,
            )
        if any(a.name is not None for a in ref.args):
            raise err("named arguments are not supported in an actions list", ref.loc)
        scope: dict[str, Any] = {}
        args = list(ref.args)
        for p in cps:
            assert p.type is not None
            scope[f" {p.name}"] = V(f"p_{p.name}", self.unit.resolve_type(p.type))
            args.append(A.Arg(ref.loc, None, A.Name(ref.loc, f" {p.name}")))
        call = A.Call(ref.loc, A.Name(ref.loc, ref.name, ref.top), [], args)
        fname: str = self.unit.pyname(f"AB_{info.name}_{act.local_name}")
        em = self.new_func()
        saved = self.em
        self.em = em
        self.scopes.append(scope)
        try:
            with em.block(f"def {fname}({', '.join(['S'] + [f'p_{p.name}' for p in cps])}):"):
                code: str = self.call_with_params(act.decl.params, act.pyfunc, act, call)
                if code != "None":
                    em.line(code)
        finally:
            self.scopes.pop()
            self.em = saved
        self.funcs.append("\n".join(em.lines))
        return fname

    def _const_args(self: Any, ref: A.ActionRef, act: ActionInfo) -> tuple[int, ...]:
        dparams = [p for p in act.decl.params if p.direction == ""]
        nd = len(act.decl.params) - len(dparams)
        if nd and len(ref.args) == len(act.decl.params):
            # the directional arguments repeat what the actions list binds
            ref = A.ActionRef(ref.loc, ref.name, ref.args[nd:], ref.annos, ref.top)
        if len(ref.args) != len(dparams):
            raise err(f"action {act.local_name} needs {len(dparams)} arguments", ref.loc)
        vals: list[int] = []
        for p, a in zip(dparams, ref.args, strict=True):
            assert p.type is not None
            v = self.scalar(a.expr, self.unit.resolve_type(p.type))
            if v.const is None:
                raise err("action arguments here must be constants", a.loc)
            c = int(v.const)
            w = bit_width(v.type) or 0
            vals.append(c & ((1 << w) - 1) if w else c)
        return tuple(vals)

    def _table_actions(self: Any, decl: A.TableDecl, info: TableInfo) -> None:
        prop = decl.prop("actions")
        if prop is None:
            raise err(f"table {decl.name} has no actions property", decl.loc)
        for ref in prop.value:
            act = self._resolve_action(ref)
            if ref.args:
                info.bound[act.name] = self._bound_action(info, act, ref)
            info.actions.append((act, ref.annos))
        dprop = decl.prop("default_action")
        if dprop is not None:
            ref = dprop.value
            act = self._resolve_action(ref)
            if all(a is not act for a, _ in info.actions):
                raise err(f"default action {ref.name} is not in the table's actions", ref.loc)
            info.default_action = act
            info.default_args = self._const_args(ref, act)
            info.const_default = dprop.const
        else:
            info.default_action = self.action_info(self.unit.actions["NoAction"])

    def _table_props(self: Any, decl: A.TableDecl, info: TableInfo, prefix: str) -> None:
        for prop in decl.props:
            n = prop.name
            if n in ("key", "actions", "default_action"):
                continue
            if n == "size":
                info.size = self.unit.const_int(prop.value)
            elif n == "entries":
                if prop.const:
                    info.has_const_entries = True
                    info.const_entries = self._entries(prop.value, info, True)
                else:  # P4_16 1.2.4 initial entries: installed at start, then mutable
                    info.initial_entries = self._entries(prop.value, info, False)
            elif n in ("implementation", "counters", "meters"):
                inst = self._table_extern(prop.value, info, prefix, n)
                if n == "implementation":
                    if inst.kind not in ("action_profile", "action_selector"):
                        raise err("implementation must be an action_profile/selector", prop.loc)
                    info.implementation = inst
                elif n == "counters":
                    if inst.kind != "direct_counter":
                        raise err("counters must be a direct_counter", prop.loc)
                    info.direct_counter = inst
                    inst.table = info
                else:
                    if inst.kind != "direct_meter":
                        raise err("meters must be a direct_meter", prop.loc)
                    info.direct_meter = inst
                    inst.table = info
            elif n == "support_timeout":
                info.idle_timeout = bool(self.const_value(prop.value))
            elif n in ("largest_priority_wins", "priority_delta"):
                continue
            else:
                raise err(f"table property '{n}' is not supported", prop.loc)

    def _table_extern(self: Any, value: A.Expr, info: TableInfo, prefix: str, what: str) -> Any:
        if isinstance(value, A.Call) and isinstance(value.func, A.Name):
            d = A.InstanceDecl(value.loc, info.decl.name, [], A.TypeRef(value.loc, "name",
                               name=value.func.name), value.args)  # fmt: skip
            t = self.unit.resolve_type(d.type)
            if not isinstance(t, ExternT):
                raise err(f"{what} must instantiate an extern", value.loc)
            return self.extern_instance(d, t, prefix)
        obj = self.expr(value)
        if not isinstance(obj, ObjV) or obj.kind != "extern":
            raise err(f"{what} must name an extern instance", value.loc)
        inst: ExternInst = obj.obj
        return inst

    def _entries(
        self: Any, entries: list[A.EntryDecl], info: TableInfo, const: bool
    ) -> list[TableEntry]:
        out: list[TableEntry] = []
        needs_prio = any(k.match_kind in ("ternary", "range", "optional") for k in info.keys)
        with_prio = next((e for e in entries if e.priority is not None), None)
        if with_prio is not None and with_prio.priority is not None:
            # p4c's front end (EntryPriorities) rules for the `priority =` syntax
            if const:
                raise err("a table with 'const' entries cannot have priorities", with_prio.loc)
            if not needs_prio:
                raise err("the key match kinds of this table do not use priorities", with_prio.loc)
            if entries[0].priority is None:
                raise err("the first entry must have a priority", entries[0].loc)
        for i, ent in enumerate(entries):
            keys = ent.keys
            if len(keys) == 1 and isinstance(keys[0], A.Default) and len(info.keys) > 1:
                keys = keys * len(info.keys)
            if len(keys) != len(info.keys):
                raise err(f"entry has {len(keys)} keys, table has {len(info.keys)}", ent.loc)
            match = tuple(self._match(k, ki) for k, ki in zip(keys, info.keys, strict=True))
            act = self._resolve_action(ent.action)
            args = self._const_args(ent.action, act)
            if ent.priority is not None:
                self.unit.const_int(ent.priority)  # checked, then unused: see below
            prio = 0
            if needs_prio:
                # p4c-bm2-ss 1.2.4.8 gives BMv2 each entry's @priority(N) or else its position
                # (1, 2, ...), lower first, and ignores `priority =`; BMv2's P4Runtime shows
                # priority INT32_MAX - that value, highest first, as this table stores it.
                bm = i + 1
                a = A.anno(ent.annos, "priority")
                if a is not None:
                    if len(a.args) != 1 or not isinstance(a.args[0], A.Expr):
                        raise err("@priority needs one constant integer", a.loc)
                    bm = self.unit.const_int(a.args[0])
                if not 0 <= bm < BM_MAX_PRIORITY:
                    raise err(f"entry priority {bm} out of range 0..{BM_MAX_PRIORITY - 1}", ent.loc)
                prio = BM_MAX_PRIORITY - bm
            out.append(TableEntry(match=match, priority=prio, action=ActionCall(act.name, args)))
        return out

    def _match(self: Any, k: A.Expr, ki: KeyInfo) -> Match:
        want = Bits(ki.bitwidth)
        full = (1 << ki.bitwidth) - 1

        def c(e: A.Expr) -> int:
            """A constant key value of the entry, reduced to the key width."""
            v = self.scalar(e)
            if isinstance(v.type, ErrorT) and v.const is not None:
                v = V(str(v.const), want, v.const)
            if isinstance(v.type, BoolT):
                v = V(str(int(bool(v.const))), want, int(bool(v.const)))
            v = self.coerce(v, want, e.loc) if not isinstance(v.type, Bits) else v
            if v.const is None:
                raise err("table entry keys must be constants", e.loc)
            return int(v.const) & full

        mk = ki.match_kind
        if isinstance(k, A.Default):
            if mk == "exact":
                raise err("an exact key cannot be a wildcard", k.loc)
            return Match.dont_care()
        if isinstance(k, A.Mask):
            val, mask = c(k.value), c(k.mask)
            if mk == "lpm":
                plen = bin(mask).count("1")
                if mask != (full >> (ki.bitwidth - plen) << (ki.bitwidth - plen)) & full:
                    raise err("lpm mask must be a prefix", k.loc)
                return Match.lpm(val & mask, plen)
            if mk != "ternary":
                raise err(f"'&&&' is not valid for a {mk} key", k.loc)
            return Match.ternary(val & mask, mask)
        if isinstance(k, A.Range):
            if mk != "range":
                raise err(f"'..' is not valid for a {mk} key", k.loc)
            return Match.range(c(k.low), c(k.high))
        val = c(k)
        if mk == "exact":
            return Match.exact(val)
        if mk == "lpm":
            return Match.lpm(val, ki.bitwidth)
        if mk == "ternary":
            return Match.ternary(val, full)
        if mk == "range":
            return Match.range(val, val)
        if mk == "optional":
            return Match.optional(val)
        raise err(f"match kind {mk} is not supported in entries", k.loc)

    def table_apply(self: Any, info: TableInfo) -> str:
        """Code applying a table (returns (hit, action name))."""
        info.applied = True
        return f"{info.pyfunc}(S)"
