"""Controls: actions, tables, extern instances, sub-controls, functions, digests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icefabric.target.compiler.exprcore import add_base, slot_v
from icefabric.target.compiler.externgen import ExternGenMixin
from icefabric.target.compiler.model import (
    ActionInfo,
    ActionParam,
    ProgramModel,
)
from icefabric.target.compiler.parsergen import ParserGen
from icefabric.target.compiler.tablegen import TableGenMixin
from icefabric.target.compiler.types import (
    VOID,
    ExternT,
    NamedBlockT,
    StackT,
    StructT,
    TupleT,
    bit_width,
    is_scalar,
)
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import Emitter, ObjV, Ref, V
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc


def fq_name(prefix: str, local: str, annos: list[A.Annotation]) -> str:
    """The P4Info name of a declaration: @name honoured, a leading '.' makes it global."""
    a = A.anno(annos, "name")
    if a is not None and a.args and isinstance(a.args[0], A.StrLit):
        n = a.args[0].value
        if n.startswith("."):
            return n[1:]
        return f"{prefix}.{n}" if prefix else n
    return f"{prefix}.{local}" if prefix else local


def _assigner(name: str) -> Any:
    def write(code: str) -> str:
        return f"{name} = {code}"

    return write


@dataclass(eq=False)
class SubControl:
    """A control instantiated inside another control."""

    decl: A.ControlDecl | A.ParserDecl
    prefix: str
    ctor: dict[str, Any] = field(default_factory=dict)  # constructor parameter values
    # compiled function and copied-in slots per way of binding the arguments
    variants: dict[tuple[str, ...], tuple[str, list[int | None]]] = field(default_factory=dict)


class ControlGen(TableGenMixin, ExternGenMixin, ParserGen):
    """Compiles controls into Python functions and records control-plane objects."""

    model: ProgramModel
    funcs: list[str]
    global_actions: dict[int, ActionInfo]
    functions_done: dict[int, tuple[str, Any]]
    plen: str = "0"

    def new_func(self) -> Emitter:
        """A fresh emitter sharing the temporary-name counter."""
        return Emitter(counter=self.em.counter)

    # ---- controls -------------------------------------------------------------------------
    def compile_control(self, decl: A.ControlDecl, prefix: str, bindings: dict[str, Any]) -> str:
        """Compile one control instance; returns the Python name of its apply function."""
        missing = [p.name for p in decl.ctor_params if p.name not in bindings]
        if missing:
            raise err(f"control {decl.name} needs constructor arguments {missing}", decl.loc)
        scope: dict[str, Any] = dict(bindings)
        saved_scopes, saved_em = self.scopes, self.em
        self.scopes = [scope]
        self.em = self.new_func()
        prologue = self.em
        try:
            for local in decl.locals:
                self.control_local(local, prefix, scope, prologue)
            fname = self.unit.pyname(f"C_{prefix}")
            body = self.new_func()
            self.em = body
            with body.block(f"def {fname}(S):"):
                for ln in prologue.lines:
                    body.line(ln)
                assert decl.body is not None
                self.body_kind = "control"
                self.block_stmts(decl.body.stmts)
            self.funcs.append("\n".join(body.lines))
        finally:
            self.scopes, self.em = saved_scopes, saved_em
        return fname

    def control_local(self, local: Any, prefix: str, scope: dict[str, Any], pro: Emitter) -> None:
        """Compile one control-local declaration into the control scope."""
        name = getattr(local, "name", None)
        if name is not None and name in scope:
            raise err(f"'{name}' is declared twice in this control", local.loc)
        if isinstance(local, A.VarDecl):
            self.em = pro
            self.s_VarDecl(local)
        elif isinstance(local, A.ActionDecl):
            info = self.compile_action(local, prefix)
            scope[local.name] = ObjV("action", info)
        elif isinstance(local, A.TableDecl):
            scope[local.name] = ObjV("table", self.compile_table(local, prefix))
        elif isinstance(local, A.InstanceDecl):
            assert local.type is not None
            t = self.unit.resolve_type(local.type)
            if isinstance(t, NamedBlockT) and isinstance(t.decl, A.ControlDecl):
                sub = SubControl(t.decl, fq_name(prefix, local.name, local.annos))
                sub.ctor = self.ctor_bindings(t.decl, local.args, local.loc)
                scope[local.name] = ObjV("subcontrol", sub)
            elif isinstance(t, ExternT):
                scope[local.name] = ObjV("extern", self.extern_instance(local, t, prefix))
            else:
                raise err(f"cannot instantiate {t} here", local.loc)
        elif isinstance(local, A.ValueSetDecl):
            raise err("value_set is not supported by this target", local.loc)
        else:
            raise err(f"unsupported control-local declaration {type(local).__name__}", local.loc)

    def ctor_bindings(
        self, decl: A.ControlDecl | A.ParserDecl, args: list[A.Arg], loc: SourceLoc
    ) -> dict[str, Any]:
        """Constant values of a parser's or control's constructor parameters."""
        params = decl.ctor_params
        by_name: dict[str, A.Expr] = {}
        for i, a in enumerate(args):
            if a.name is not None:
                by_name[a.name] = a.expr
            elif i < len(params):
                by_name[params[i].name] = a.expr
            else:
                raise err(f"{decl.name} takes {len(params)} constructor arguments", a.loc)
        out: dict[str, Any] = {}
        for p in params:
            e = by_name.get(p.name, p.default)
            if e is None:
                raise err(f"missing constructor argument '{p.name}' of {decl.name}", loc)
            assert p.type is not None
            t = self.unit.resolve_type(p.type)
            if not is_scalar(t):
                raise err(f"constructor parameter '{p.name}' must be a bit/int/bool/enum", p.loc)
            v = self.scalar(e, t)
            if v.const is None:
                raise err(f"constructor argument '{p.name}' must be a constant", e.loc)
            out[p.name] = v
        return out

    # ---- actions --------------------------------------------------------------------------
    def compile_action(self, decl: A.ActionDecl, prefix: str) -> ActionInfo:
        """Compile an action into ``def A_x(S, <control-plane params>)``."""
        name = fq_name(prefix, decl.name, decl.annos)
        fname = self.unit.pyname(f"A_{name}")
        em = self.new_func()
        saved = self.em
        self.em = em
        scope: dict[str, Any] = {}
        self.scopes.append(scope)
        params: list[ActionParam] = []
        pyargs: list[str] = ["S"]
        try:
            for p in decl.params:
                assert p.type is not None
                t = self.unit.resolve_type(p.type)
                if p.direction == "":
                    w = bit_width(t)
                    if w is None or not is_scalar(t):
                        raise err(f"action parameter '{p.name}' must be bit<W>/int<W>/bool", p.loc)
                    py = f"p_{p.name}"
                    pyargs.append(py)
                    scope[p.name] = V(py, t)
                    params.append(ActionParam(p.name, w, p.annos))
                else:
                    base = self.unit.alloc(t)
                    scope[p.name] = (
                        slot_v(str(base), t) if is_scalar(t) else Ref(str(base), t, base)
                    )
            with em.block(f"def {fname}({', '.join(pyargs)}):"):
                old_kind = self.body_kind
                self.body_kind = "action"
                assert decl.body is not None
                self.block_stmts(decl.body.stmts)
                self.body_kind = old_kind
        finally:
            self.scopes.pop()
            self.em = saved
        self.funcs.append("\n".join(em.lines))
        info = ActionInfo(name, fname, params, decl.annos, decl, decl.name)
        info.dir_params = [  # type: ignore[attr-defined]
            (p, scope[p.name]) for p in decl.params if p.direction
        ]
        if name not in self.model.actions:
            self.model.actions[name] = info
        return info

    def action_info(self, obj: Any) -> ActionInfo:
        """ActionInfo of a local action or (compiled once) of a top-level action."""
        if isinstance(obj, ActionInfo):
            return obj
        assert isinstance(obj, A.ActionDecl)
        key = id(obj)
        if key not in self.global_actions:
            saved = self.scopes
            self.scopes = []
            try:
                self.global_actions[key] = self.compile_action(obj, "")
            finally:
                self.scopes = saved
        return self.global_actions[key]

    def action_call(self, obj: Any, e: A.Call) -> V:
        """Call an action directly from a control body or action."""
        info = self.action_info(obj)
        info.called = True
        return V(self.call_with_params(info.decl.params, info.pyfunc, info, e), VOID)

    def call_with_params(self, params: list[A.Param], pyfunc: str, info: Any, e: A.Call) -> str:
        """Emit copy-in, return the call expression; copy-out lines follow via post list."""
        names = [p.name for p in params]
        by_name: dict[str, A.Expr] = {}
        for i, a in enumerate(e.args):
            if a.name is not None:
                by_name[a.name] = a.expr
            elif i < len(names):
                by_name[names[i]] = a.expr
            else:
                raise err("too many arguments", a.loc)
        args: list[V] = []
        post: list[tuple[Any, Any]] = []
        slots = dict((p.name, loc) for p, loc in getattr(info, "dir_params", []))
        start = self.mark()
        for p in params:
            if p.name not in by_name:
                if p.default is not None:
                    by_name[p.name] = p.default
                else:
                    raise err(f"missing argument for parameter '{p.name}'", e.loc)
            arg = by_name[p.name]
            assert p.type is not None
            t = self.unit.resolve_type(p.type, getattr(info, "tparams", None))
            m = self.mark()
            direction = "" if p.name in getattr(info, "byval", ()) else p.direction
            if direction == "":
                v = self.scalar(arg, t)
                args = self.pin_before(args, m)
                args.append(v)
                continue
            dst = slots[p.name]
            if p.direction in ("in", "inout"):
                if isinstance(dst, V):
                    v = self.scalar(arg, t)
                    assert dst.write is not None
                    self.em.line(self.wr(dst, v.code))
                else:
                    self.assign_value(dst, self.expr(arg, t), arg.loc)
            elif p.direction == "out" and isinstance(dst, Ref):
                self.reset_out(dst)  # not left over from an earlier call
            if p.direction in ("out", "inout"):
                post.append((self.expr(arg), dst))
            args = self.pin_before(args, m)
        call = f"{pyfunc}({', '.join(['S'] + [a.code for a in args])})"
        returns = getattr(info, "returns", False)
        if not post:
            if returns and self.mark() > start:
                # copied-in parameters live in fixed slots: call now, before another call of
                # the same function in this expression overwrites them
                tmp: str = self.em.tmp("r")
                self.em.line(f"{tmp} = {call}")
                return tmp
            return call
        if returns:
            tmp = self.em.tmp("r")
            head = f"{tmp} = {call}"
            call = tmp
        else:
            head = call
            call = "None"
        if isinstance(info, ActionInfo):
            # exit inside the action: copy-out still happens (P4_16 spec, exit statement)
            with self.em.block("try:"):
                self.em.line(head)
            with self.em.block("finally:"):
                self.copy_out(post, e.loc)
        else:
            self.em.line(head)
            self.copy_out(post, e.loc)
        return call

    def reset_out(self, ref: Ref) -> None:
        """An ``out`` argument of header (or struct, stack) type starts invalid and zeroed, as
        the spec says out parameters start uninitialised and headers among them invalid."""
        n = ref.type.slots
        self.em.line(
            f"S[{ref.base}:{add_base(ref.base, n)}] = TPL[{ref.base}:{add_base(ref.base, n)}]"
        )

    def copy_out(self, post: list[tuple[Any, Any]], loc: SourceLoc) -> None:
        """Write out/inout parameters back to the caller's l-values."""
        for target, src in post:
            if isinstance(target, V):
                if target.write is None:
                    raise err("an out/inout argument must be an l-value", loc)
                self.em.line(target.write(src.code))
            else:
                self.assign_value(target, src, loc)

    # ---- functions ------------------------------------------------------------------------
    def function_call(self, decl: A.FunctionDecl, e: A.Call) -> V | Ref:
        """Call a P4 function (compiled once, or once per type arguments when generic)."""
        key: Any = id(decl)
        tparams = None
        if decl.type_params:
            tparams = self.infer_type_args(decl, e)
            key = (id(decl), tuple(str(tparams[n]) for n in decl.type_params))
        if key not in self.functions_done:
            self.functions_done[key] = self.compile_function(decl, tparams)
        fname, info = self.functions_done[key]
        ret = info.ret
        code = self.call_with_params(decl.params, fname, info, e)
        if info.ret_ref is None:
            return V(code, ret)
        # a header/struct result: the function stores it in its return slots; copy it out at
        # once into slots of this call site, as another call would overwrite them
        if code != "None" and not code.startswith("_r"):
            self.em.line(code)
        n = ret.slots
        base = self.unit.alloc(ret)
        rb = info.ret_ref.base
        self.em.line(f"S[{base}:{base + n}] = S[{rb}:{int(rb) + n}]")
        return Ref(str(base), ret, base)

    def infer_type_args(self, decl: A.FunctionDecl, e: A.Call) -> dict[str, Any]:
        """Type arguments of a generic function call: written, or taken from the arguments."""
        if e.type_args:
            if len(e.type_args) != len(decl.type_params):
                raise err(f"{decl.name} takes {len(decl.type_params)} type arguments", e.loc)
            return {
                n: self.unit.resolve_type(t)
                for n, t in zip(decl.type_params, e.type_args, strict=True)
            }
        out: dict[str, Any] = {}
        for i, a in enumerate(e.args):
            p = next((q for q in decl.params if q.name == a.name), None) if a.name else None
            if p is None and a.name is None and i < len(decl.params):
                p = decl.params[i]
            if p is None or p.type is None or p.type.kind != "name":
                continue
            if p.type.name in decl.type_params and p.type.name not in out:
                saved = self.em
                self.em = Emitter()  # only the argument's type is wanted here
                try:
                    v = self.expr(a.expr)
                finally:
                    self.em = saved
                t = v.type if isinstance(v, (V, Ref)) else None
                if t is None or str(t) == "int":
                    raise err(f"cannot infer type argument {p.type.name} of {decl.name}", a.loc)
                out[p.type.name] = t
        missing = [n for n in decl.type_params if n not in out]
        if missing:
            raise err(f"cannot infer type arguments {missing} of {decl.name}", e.loc)
        return out

    def compile_function(
        self, decl: A.FunctionDecl, tparams: dict[str, Any] | None = None
    ) -> tuple[str, Any]:
        """Compile a P4 function into ``def F_x(S, ...)``."""
        if decl.type_params and tparams is None:
            raise err("generic function used without type arguments", decl.loc)
        fname = self.unit.pyname(f"F_{decl.name}")
        assert decl.ret is not None
        ret = self.unit.resolve_type(decl.ret, tparams)
        ret_ref = None
        if ret is not VOID and not is_scalar(ret):
            if not isinstance(ret, (StructT, StackT, TupleT)):
                raise err(f"functions cannot return {ret}", decl.loc)
            rb = self.unit.alloc(ret)
            ret_ref = Ref(str(rb), ret, rb)

        @dataclass
        class FInfo:
            ret: Any
            returns: bool
            dir_params: list[Any]
            ret_ref: Ref | None
            tparams: dict[str, Any] | None
            byval: set[str]  # `in` scalars passed as Python arguments

        info = FInfo(ret, ret is not VOID and ret_ref is None, [], ret_ref, tparams, set())
        em = self.new_func()
        saved_em, saved_scopes = self.em, self.scopes
        self.em, self.scopes = em, [{}]
        pyargs = ["S"]
        self.unit.tparam_scope.append(tparams or {})
        try:
            for p in decl.params:
                assert p.type is not None
                t = self.unit.resolve_type(p.type)
                if p.direction in ("", "in") and is_scalar(t):
                    py = f"p_{p.name}"
                    pyargs.append(py)
                    self.scopes[0][p.name] = V(py, t, None, _assigner(py))
                    info.byval.add(p.name)
                else:
                    base = self.unit.alloc(t)
                    loc = slot_v(str(base), t) if is_scalar(t) else Ref(str(base), t, base)
                    self.scopes[0][p.name] = loc
                    info.dir_params.append((p, loc))
            old = self.body_kind, self.ret_type, self.ret_ref
            self.body_kind, self.ret_type, self.ret_ref = "function", ret, ret_ref
            with em.block(f"def {fname}({', '.join(pyargs)}):"):
                assert decl.body is not None
                self.block_stmts(decl.body.stmts)
            self.body_kind, self.ret_type, self.ret_ref = old
        finally:
            self.em, self.scopes = saved_em, saved_scopes
            self.unit.tparam_scope.pop()
        self.funcs.append("\n".join(em.lines))
        return fname, info

    # ---- sub-controls ---------------------------------------------------------------------
    def subcontrol_apply(self, sub: SubControl, e: A.Call) -> V:
        """Apply a control (or parser) instantiated inside another control (or parser).

        Arguments with a fixed location are bound by reference, others copied into slots of
        the callee. An instance applied to other locations is compiled again for them (as p4c
        inlines each invocation), unless it holds tables or extern instances."""
        params = sub.decl.params
        if len(e.args) != len(params):
            raise err(f"{sub.decl.name}.apply needs {len(params)} arguments", e.loc)
        vals = [self.expr(a.expr) for a in e.args]
        kinds: list[str] = []
        for p, v, a in zip(params, vals, e.args, strict=True):
            assert p.type is not None
            t = self.unit.resolve_type(p.type)
            if isinstance(v, Ref) and v.sbase is not None:
                kinds.append(f"ref {v.base} {v.readonly or p.direction in ('in', '')}")
            elif isinstance(v, Ref):
                kinds.append("dyn")  # e.g. hdr.stack[i]: copied in and out
            elif isinstance(v, V) and v.write is not None and p.direction in ("inout", "out"):
                kinds.append(f"lv {v.code}")
            elif isinstance(v, V) and is_scalar(t):
                kinds.append("copy")
            elif isinstance(v, ObjV) and v.kind in ("packet_in", "packet_out"):
                kinds.append("obj")
            else:
                raise err(f"unsupported argument for parameter '{p.name}'", a.loc)
        sig = tuple(kinds)
        variant = sub.variants.get(sig)
        if variant is None:
            if sub.variants and any(
                not isinstance(x, (A.VarDecl, A.ActionDecl)) for x in sub.decl.locals
            ):
                raise err(
                    "a control or parser instance with tables or extern instances must always "
                    "be applied to the same arguments",
                    e.loc,
                )
            variant = self._compile_variant(sub, params, vals)
            sub.variants[sig] = variant
        func, copy_slots = variant
        copy_back: list[tuple[Ref, int]] = []
        for slot, v, a, p in zip(copy_slots, vals, e.args, params, strict=True):
            assert p.type is not None
            if p.direction == "out" and isinstance(v, Ref):
                self.reset_out(v)
            if isinstance(slot, int) and isinstance(v, Ref):
                n = v.type.slots
                if p.direction != "out":
                    self.em.line(f"S[{slot}:{slot + n}] = S[{v.base}:{add_base(v.base, n)}]")
                if p.direction in ("out", "inout"):
                    copy_back.append((v, slot))
            elif slot is not None:
                t = self.unit.resolve_type(p.type)
                assert isinstance(v, V)
                self.em.line(f"S[{slot}] = {self.coerce(v, t, a.loc).code}")
        call = (
            f"pos = {func}(S, data, nbits, pos)"
            if isinstance(sub.decl, A.ParserDecl)
            else f"{func}(S)"
        )
        if not copy_back:
            self.em.line(call)
            return V("", VOID)
        with self.em.block("try:"):
            self.em.line(call)
        with self.em.block("finally:"):  # copied back also when the control exits
            for v, slot in copy_back:
                n = v.type.slots
                self.em.line(f"S[{v.base}:{add_base(v.base, n)}] = S[{slot}:{slot + n}]")
        return V("", VOID)

    def _compile_variant(
        self, sub: SubControl, params: list[A.Param], vals: list[Any]
    ) -> tuple[str, list[int | None]]:
        bindings: dict[str, Any] = {}
        copy_slots: list[int | None] = []
        for p, v in zip(params, vals, strict=True):
            assert p.type is not None
            t = self.unit.resolve_type(p.type)
            if isinstance(v, Ref) and v.sbase is not None:
                # By reference; an `in` composite must then not be written by the callee.
                ro = v.readonly or p.direction in ("in", "")
                bindings[p.name] = Ref(v.base, v.type, v.sbase, ro)
                copy_slots.append(None)
            elif isinstance(v, V) and v.write is not None and p.direction in ("inout", "out"):
                bindings[p.name] = v
                copy_slots.append(None)
            elif isinstance(v, V):
                base = self.unit.alloc(t)
                bindings[p.name] = slot_v(str(base), t)
                copy_slots.append(base)
            elif isinstance(v, Ref):  # a location known only at run time: a copy of it
                base = self.unit.alloc(v.type)
                ro = v.readonly or p.direction in ("in", "")
                bindings[p.name] = Ref(str(base), v.type, base, ro)
                copy_slots.append(base)
            else:
                bindings[p.name] = v
                copy_slots.append(None)
        bindings.update(sub.ctor)
        saved_sm = self.sm_ref
        if isinstance(sub.decl, A.ParserDecl):
            func = self.compile_subparser(sub, bindings)
        else:
            saved_in = self.in_parser  # a control applied from a parser state
            self.in_parser = False
            try:
                func = self.compile_control(sub.decl, sub.prefix, bindings)
            finally:
                self.in_parser = saved_in
        self.sm_ref = saved_sm
        return func, copy_slots

    def compile_subparser(self, sub: SubControl, bindings: dict[str, Any]) -> str:
        """Compile a parser instantiated inside a parser (runs on the same packet cursor)."""
        decl = sub.decl
        assert isinstance(decl, A.ParserDecl)
        fname = self.unit.pyname(f"PS_{sub.prefix}")
        saved = self.scopes
        self.scopes = [dict(bindings)]
        try:
            for local in decl.locals:
                self.parser_local(local, sub.prefix)  # type: ignore[attr-defined]
            self.funcs.append(self.gen_parser_states(decl, fname, sub=True))
        finally:
            self.scopes = saved
        return fname
