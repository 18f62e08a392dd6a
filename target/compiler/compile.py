"""Whole-program compilation of a v1model P4 program into Python source."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from icefabric.target.compiler.calls import RESERVED_SLOTS
from icefabric.target.compiler.controlgen import ControlGen
from icefabric.target.compiler.model import ProgramModel
from icefabric.target.compiler.types import Bits, StructT, bit_width, is_scalar
from icefabric.target.compiler.unit import Unit, err
from icefabric.target.compiler.values import Emitter, ListV, ObjV, Ref, V
from icefabric.target.p4 import ast as A

log = logging.getLogger(__name__)
V1SWITCH_BLOCKS = ("parser", "verify", "ingress", "egress", "compute", "deparser")


@dataclass
class Compiled:
    """The result of compiling one program (shared by every pipeline instance)."""

    source: str
    template: list[Any]
    model: ProgramModel
    unit: Unit
    hdr: Ref
    meta: Ref
    sm: Ref
    sm_slots: dict[str, int]
    entry: dict[str, str]  # block -> python function name
    field_lists: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    meta_paths: dict[str, int] = field(default_factory=dict)


class Compiler(ControlGen):
    """Drives the compilation of a parsed program."""

    def __init__(self, program: A.Program) -> None:
        unit = Unit(program)
        super().__init__(unit)
        unit.const_eval = self._eval_const_decl
        self.model = ProgramModel()
        self.funcs: list[str] = []
        self.global_actions: dict[int, Any] = {}
        self.functions_done: dict[int, tuple[str, Any]] = {}
        self.union_siblings: dict[str, list[str]] = {}
        self.parser_prologue: list[str] = []
        self.legacy_lists = {}

    def _eval_const_decl(self, d: Any) -> Any:
        if isinstance(d, A.ConstDecl):
            assert d.type is not None and d.value is not None
            t = self.unit.resolve_type(d.type)
            v = self.expr(d.value, t)
            if isinstance(v, V):
                v = self.coerce(v, t, d.value.loc)
                if v.const is None:
                    raise err(f"constant '{d.name}' needs a compile-time value", d.value.loc)
            elif isinstance(v, ListV):
                return self.const_composite(t, v, d.value.loc)
            return v
        return self.const_value(d)

    def compile(self) -> Compiled:
        """Compile the program; raises P4CompileError on any problem."""
        u = self.unit
        u.template.extend([None, None, None, None, None, b"", 0])
        assert len(u.template) == RESERVED_SLOTS
        u.declare_all()
        main = u.instances.get("main")
        if main is None:
            raise err("the program has no 'main' package instance", u.program.loc)
        assert main.type is not None
        if main.type.kind != "name" or main.type.name != "V1Switch":
            raise err("main must be a V1Switch(...) instance (v1model)", main.loc)
        if len(main.args) != 6:
            raise err("V1Switch takes 6 arguments", main.loc)
        blocks = [self._block_decl(a.expr) for a in main.args]
        ctors = [self._block_ctor(d, a.expr) for d, a in zip(blocks, main.args, strict=True)]
        pdecl = blocks[0]
        if not isinstance(pdecl, A.ParserDecl):
            raise err("the first V1Switch argument must be a parser", main.args[0].loc)
        if len(pdecl.params) != 4:
            raise err("the v1model parser takes 4 parameters", pdecl.loc)
        htype = self._param_type(pdecl.params[1])
        mtype = self._param_type(pdecl.params[2])
        smtype = u.types.get("standard_metadata_t")
        if not isinstance(smtype, StructT):
            raise err("standard_metadata_t is not declared: include <v1model.p4>", main.loc)
        for t, p in ((htype, pdecl.params[1]), (mtype, pdecl.params[2])):
            if not isinstance(t, StructT) or t.kind != "struct":
                raise err("headers and metadata must be structs", p.loc)
        hdr = Ref(str(u.alloc(htype)), htype, len(u.template) - htype.slots)
        meta = Ref(str(u.alloc(mtype)), mtype, len(u.template) - mtype.slots)
        sm = Ref(str(u.alloc(smtype)), smtype, len(u.template) - smtype.slots)
        self.sm_ref = sm
        self.sm_loc = main.loc
        self._unions(hdr)
        assert isinstance(smtype, StructT)
        sm_slots = {f.name: sm.sbase + f.offset for f in smtype.fields}  # type: ignore[operator]
        self.plen = f"S[{sm_slots['packet_length']}]"
        entry: dict[str, str] = {}
        # parser
        scope = {p.name: v for p, v in zip(pdecl.params, [ObjV("packet_in", None), hdr, meta, sm],
                                           strict=True)}  # fmt: skip
        scope.update(ctors[0])
        self.scopes = [scope]
        for local in pdecl.locals:
            self.parser_local(local, pdecl.name)
        entry["parser"] = u.pyname(f"P_{pdecl.name}")
        self.funcs.append(self.gen_parser_states(pdecl, entry["parser"]))
        self.scopes = []
        roles = [(1, "verify", 2), (2, "ingress", 3), (3, "egress", 3), (4, "compute", 2)]
        for idx, role, nparams in roles:
            cdecl = blocks[idx]
            if not isinstance(cdecl, A.ControlDecl) or len(cdecl.params) != nparams:
                raise err(f"V1Switch argument {idx + 1} must be a control with {nparams} "
                          "parameters", main.args[idx].loc)  # fmt: skip
            binds = dict(zip([p.name for p in cdecl.params], [hdr, meta, sm], strict=False))
            binds.update(ctors[idx])
            entry[role] = self.compile_control(cdecl, cdecl.name, binds)
        ddecl = blocks[5]
        if not isinstance(ddecl, A.ControlDecl) or len(ddecl.params) != 2:
            raise err("the deparser must be a control(packet_out, in H)", main.args[5].loc)
        entry["deparser"] = self._deparser(ddecl, hdr, ctors[5])
        self._check_unused()
        self._remove_unused()
        comp = Compiled(
            source="\n\n".join(self.funcs) + "\n",
            template=u.template,
            model=self.model,
            unit=u,
            hdr=hdr,
            meta=meta,
            sm=sm,
            sm_slots=sm_slots,
            entry=entry,
        )
        self._collect_meta(meta, "", comp)
        by_slot = {slot: path for path, slot in comp.meta_paths.items()}
        for fid, slots in self.legacy_lists.items():
            comp.field_lists[fid] = [(by_slot[s], s) for s in slots if s in by_slot]
        for t in u.types.values():
            if not isinstance(t, StructT) or not t.is_header:
                continue
            if A.anno(t.annos, "controller_header") and t not in self.model.controller_headers:
                self.model.controller_headers.append(t)
        return comp

    def _remove_unused(self) -> None:
        """Drop tables never applied and actions nothing refers to, as p4c's frontend does
        (it warns "Table ... is not used; removing"), so P4Info lists the same objects."""
        m = self.model
        for name, t in list(m.tables.items()):
            if not t.applied:
                log.warning("table %s is not used; removing", name)
                del m.tables[name]
        used = {a.name for a in m.actions.values() if a.called}
        for t in m.tables.values():
            used.update(a.name for a, _ in t.actions)
            if t.default_action is not None:
                used.add(t.default_action.name)
        for name in list(m.actions):
            if name not in used:
                del m.actions[name]
        for name, inst in list(m.externs.items()):
            if (inst.table is not None and inst.table.name not in m.tables) or (
                inst.kind in ("action_profile", "action_selector")
                and not any(t.implementation is inst for t in m.tables.values())
            ):
                del m.externs[name]

    def _check_unused(self) -> None:
        """Type-check top-level actions and functions nothing calls (p4c reports their errors
        too); they are compiled into a scratch area and left out of the program and P4Info."""
        saved_actions = dict(self.model.actions)
        saved_funcs = list(self.funcs)
        saved_scopes = self.scopes
        try:
            self.scopes = []
            for d in self.unit.actions.values():
                if id(d) not in self.global_actions:
                    self.compile_action(d, "")
            for f in self.unit.functions.values():
                if id(f) not in self.functions_done and not f.type_params:
                    self.compile_function(f)
        finally:
            self.model.actions = saved_actions
            self.funcs = saved_funcs
            self.scopes = saved_scopes

    def _param_type(self, p: A.Param) -> Any:
        assert p.type is not None
        return self.unit.resolve_type(p.type)

    def _block_ctor(self, d: Any, e: A.Expr) -> dict[str, Any]:
        args = e.args if isinstance(e, A.Call) else []
        if isinstance(e, A.Name):
            args = self.unit.instances[e.name].args
        return self.ctor_bindings(d, args, e.loc)

    def _block_decl(self, e: A.Expr) -> Any:
        if isinstance(e, A.Call) and isinstance(e.func, A.Name):
            n = e.func.name
            d = self.unit.parsers.get(n) or self.unit.controls.get(n)
            if d is not None:
                return d
        if isinstance(e, A.Name) and e.name in self.unit.instances:
            inst = self.unit.instances[e.name]
            assert inst.type is not None
            d = self.unit.parsers.get(inst.type.name) or self.unit.controls.get(inst.type.name)
            if d is not None:
                return d
        raise err("V1Switch arguments must be parser/control instantiations like P()", e.loc)

    def parser_local(self, local: Any, pname: str) -> None:
        if isinstance(local, A.VarDecl):
            t = self.unit.resolve_type(local.type)
            if local.const:
                self.s_VarDecl(local)
                return
            if local.init is not None:
                # initialised each time the parser starts, before the start state
                pro = Emitter(level=1, counter=self.em.counter)
                saved_em, saved_in = self.em, self.in_parser
                self.em, self.in_parser = pro, True
                try:
                    self.s_VarDecl(local)
                finally:
                    self.em, self.in_parser = saved_em, saved_in
                self.parser_prologue.extend(pro.lines)
                return
            base = self.unit.alloc(t)
            from icefabric.target.compiler.exprcore import slot_v

            self.scopes[-1][local.name] = (
                slot_v(str(base), t) if is_scalar(t) else Ref(str(base), t, base)
            )
        elif isinstance(local, A.ValueSetDecl):
            self.scopes[-1][local.name] = ObjV("value_set", self.value_set(local, pname))
        elif isinstance(local, A.InstanceDecl):
            from icefabric.target.compiler.controlgen import SubControl, fq_name
            from icefabric.target.compiler.types import NamedBlockT

            assert local.type is not None
            t = self.unit.resolve_type(local.type)
            if not (
                isinstance(t, NamedBlockT) and isinstance(t.decl, (A.ParserDecl, A.ControlDecl))
            ):
                raise err("only parsers and controls can be instantiated in a parser", local.loc)
            sub = SubControl(t.decl, fq_name(pname, local.name, local.annos))
            sub.ctor = self.ctor_bindings(t.decl, local.args, local.loc)
            kind = "subparser" if isinstance(t.decl, A.ParserDecl) else "subcontrol"
            self.scopes[-1][local.name] = ObjV(kind, sub)
        else:
            raise err(f"unsupported parser-local declaration {type(local).__name__}", local.loc)

    def value_set(self, d: A.ValueSetDecl, pname: str) -> Any:
        """Record a parser value set (P4Info + a runtime ValueSet per pipeline)."""
        from icefabric.target.compiler.controlgen import fq_name
        from icefabric.target.compiler.model import ValueSetInfo

        assert d.type is not None and d.size is not None
        t = self.unit.resolve_type(d.type)
        fields: list[tuple[str, int, str]] = []
        if isinstance(t, Bits):
            fields.append(("", t.width, "exact"))
        elif isinstance(t, StructT) and not t.is_header:
            for f in t.fields:
                w = bit_width(f.type)
                if w is None:
                    raise err(f"value_set field '{f.name}' must be bit<W>", d.loc)
                a = A.anno(f.annos, "match")
                kind = a.args[0].name if a and a.args and isinstance(a.args[0], A.Name) else "exact"
                fields.append((f.name, w, kind))
        else:
            raise err("value_set element type must be bit<W> or a struct of bit<W>", d.loc)
        name = fq_name(pname, d.name, d.annos)
        info = ValueSetInfo(name, self.unit.pyname(f"VS_{name}"), self.unit.const_int(d.size),
                            fields, d.annos)  # fmt: skip
        self.model.value_sets[name] = info
        return info.pyobj

    def _deparser(self, d: A.ControlDecl, hdr: Ref, ctor: dict[str, Any]) -> str:
        name = self.unit.pyname(f"D_{d.name}")
        if d.locals:
            raise err("declarations in the deparser are not supported", d.loc)
        em = self.new_func()
        saved = self.em
        self.em = em
        ro_hdr = Ref(hdr.base, hdr.type, hdr.sbase, readonly=d.params[1].direction == "in")
        self.scopes = [{d.params[0].name: ObjV("packet_out", None), d.params[1].name: ro_hdr}]
        self.scopes[0].update(ctor)
        try:
            with em.block(f"def {name}(S):"):
                em.line("acc = 0")
                em.line("nb = 0")
                assert d.body is not None
                self.block_stmts(d.body.stmts)
                em.line("return acc, nb")
        finally:
            self.em = saved
            self.scopes = []
        self.funcs.append("\n".join(em.lines))
        return name

    def _unions(self, ref: Ref) -> None:
        t = ref.type
        if isinstance(t, StructT):
            if t.is_union:
                bases = []
                for f in t.fields:
                    member = self.field_of(ref, f.name, None)
                    assert isinstance(member, Ref), "header union members are headers"
                    bases.append(member.base)
                for b in bases:
                    self.union_siblings[b] = [x for x in bases if x != b]
            elif not t.is_header:
                for f in t.fields:
                    sub = self.field_of(ref, f.name, None)
                    if isinstance(sub, Ref):
                        self._unions(sub)

    def _collect_meta(self, ref: Ref, prefix: str, comp: Compiled) -> None:
        t = ref.type
        assert isinstance(t, StructT)
        for f in t.fields:
            sub = self.field_of(ref, f.name, None)
            path = f"{prefix}{f.name}"
            if isinstance(sub, V):
                slot = int(sub.code[2:-1])
                comp.meta_paths[path] = slot
                a = A.anno(f.annos, "field_list")
                if a is not None:
                    for x in a.args:
                        if not isinstance(x, A.Expr):
                            raise err("@field_list needs integer field list ids", a.loc)
                        fid = self.unit.const_int(x)
                        comp.field_lists.setdefault(fid, []).append((path, slot))
            elif isinstance(sub, Ref) and isinstance(sub.type, StructT) and not sub.type.is_header:
                self._collect_meta(sub, path + ".", comp)
