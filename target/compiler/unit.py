"""Compilation unit: global declarations, type resolution and per-packet slot allocation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from icefabric.target.compiler.types import (
    BOOL,
    DONTCARE,
    ERROR,
    INT,
    MATCH_KIND,
    STRING,
    VOID,
    Bits,
    EnumT,
    ExternT,
    FieldInfo,
    NamedBlockT,
    StackT,
    StructT,
    T,
    TupleT,
    Varbit,
)
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import P4CompileError, SourceLoc

MAX_WIDTH = 2048


def err(msg: str, loc: SourceLoc | None) -> P4CompileError:
    """Build a compile error at a location."""
    return P4CompileError(msg, loc)


def _flat_struct(t: T) -> bool:
    """A struct whose fields are (structs of) bit/int/bool/serializable enums: allowed as a
    header field (P4_16 1.2.2)."""
    if not isinstance(t, StructT) or t.kind != "struct":
        return False
    return all(
        isinstance(f.type, Bits)
        or f.type is BOOL
        or (isinstance(f.type, EnumT) and f.type.underlying is not None)
        or _flat_struct(f.type)
        for f in t.fields
    )


@dataclass
class Unit:
    """Everything global to one program being compiled."""

    program: A.Program
    types: dict[str, T] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)  # name -> values.V
    errors: dict[str, int] = field(default_factory=dict)
    match_kinds: list[str] = field(default_factory=list)
    externs: dict[str, A.ExternDecl] = field(default_factory=dict)
    extern_funcs: dict[str, list[A.MethodProto]] = field(default_factory=dict)
    actions: dict[str, A.ActionDecl] = field(default_factory=dict)
    functions: dict[str, A.FunctionDecl] = field(default_factory=dict)
    parsers: dict[str, A.ParserDecl] = field(default_factory=dict)
    controls: dict[str, A.ControlDecl] = field(default_factory=dict)
    protos: dict[str, A.TypeProtoDecl] = field(default_factory=dict)
    instances: dict[str, A.InstanceDecl] = field(default_factory=dict)
    # slot allocation of the per-packet state list
    template: list[Any] = field(default_factory=list)
    # run-time objects created per pipeline instance: python name -> factory(env)
    factories: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    names_used: set[str] = field(default_factory=set)
    const_eval: Callable[[A.Expr], Any] | None = None
    # type parameters of the generic function being compiled (innermost last)
    tparam_scope: list[dict[str, T]] = field(default_factory=list)

    # ---- slots ---------------------------------------------------------------------------
    def alloc(self, typ: T) -> int:
        """Reserve slots for a value of ``typ`` and return the base index."""
        base = len(self.template)
        self.template.extend(self.initial(typ))
        return base

    def initial(self, typ: T) -> list[Any]:
        """Initial slot contents for a value of ``typ`` (zeros; headers invalid)."""
        if isinstance(typ, StructT):
            vals: list[Any] = [False] if typ.is_header else []
            for f in typ.fields:
                vals.extend(self.initial(f.type))
            return vals
        if isinstance(typ, StackT):
            return [0] + self.initial(typ.elem) * typ.size
        if isinstance(typ, TupleT):
            return [x for e in typ.elems for x in self.initial(e)]
        if isinstance(typ, Varbit):
            return [0, 0]
        if typ is BOOL:
            return [False]
        return [0] * typ.slots

    def pyname(self, hint: str) -> str:
        """A unique Python identifier derived from ``hint``."""
        base = "".join(c if c.isalnum() else "_" for c in hint)
        name = base
        k = 1
        while name in self.names_used:
            k += 1
            name = f"{base}_{k}"
        self.names_used.add(name)
        return name

    # ---- declarations --------------------------------------------------------------------
    def declare_all(self) -> None:
        """Register every top-level declaration (types and constants in order)."""
        for d in self.program.decls:
            self.declare(d)

    def declare(self, d: A.Decl) -> None:
        """Register one top-level declaration."""
        named = (A.ConstDecl, A.ActionDecl, A.FunctionDecl, A.ParserDecl, A.ControlDecl,
                 A.InstanceDecl, A.ExternDecl)  # fmt: skip
        if isinstance(d, named):
            seen = (self.consts, self.actions, self.functions, self.parsers, self.controls,
                    self.instances, self.externs)  # fmt: skip
            if any(d.name in table for table in seen):
                raise err(f"'{d.name}' is declared twice", d.loc)
        if isinstance(d, A.ErrorDecl):
            for m in d.members:
                self.errors.setdefault(m, len(self.errors))
        elif isinstance(d, A.MatchKindDecl):
            self.match_kinds.extend(m for m in d.members if m not in self.match_kinds)
        elif isinstance(d, A.StructDecl):
            self._check_new(d.name, d.loc)
            st = StructT(d.name, d.kind, annos=d.annos)
            self.types[d.name] = st
            for f in d.fields:
                assert f.type is not None
                ft = self.resolve_type(f.type)
                self._check_field_type(st, ft, f)
                st.fields.append(FieldInfo(f.name, ft, f.annos, 0))
            st.finish()
        elif isinstance(d, A.EnumDecl):
            self._check_new(d.name, d.loc)
            self.types[d.name] = self._enum(d)
        elif isinstance(d, A.TypedefDecl):
            self._check_new(d.name, d.loc)
            assert d.type is not None
            self.types[d.name] = self.resolve_type(d.type)
        elif isinstance(d, A.ConstDecl):
            assert self.const_eval is not None
            self.consts[d.name] = self.const_eval(d)  # type: ignore[arg-type]
        elif isinstance(d, A.ExternDecl):
            self.externs[d.name] = d
        elif isinstance(d, A.MethodProto):
            self.extern_funcs.setdefault(d.name, []).append(d)
        elif isinstance(d, A.ActionDecl):
            self.actions[d.name] = d
        elif isinstance(d, A.FunctionDecl):
            self.functions[d.name] = d
        elif isinstance(d, A.ParserDecl):
            self.parsers[d.name] = d
        elif isinstance(d, A.ControlDecl):
            self.controls[d.name] = d
        elif isinstance(d, A.TypeProtoDecl):
            self.protos[d.name] = d
        elif isinstance(d, A.InstanceDecl):
            self.instances[d.name] = d
        else:
            raise err(f"unsupported top-level declaration {type(d).__name__}", d.loc)

    def _check_new(self, name: str, loc: SourceLoc) -> None:
        if name in self.types:
            raise err(f"type '{name}' is declared twice", loc)

    def _check_field_type(self, st: StructT, ft: T, f: A.FieldDecl) -> None:
        if st.kind == "header":
            ok = isinstance(ft, (Bits, Varbit)) or ft is BOOL or _flat_struct(ft)
            ok = ok or (isinstance(ft, EnumT) and ft.underlying is not None)
            if not ok:
                raise err(f"header field '{f.name}' cannot have type {ft}", f.loc)
            if isinstance(ft, Varbit) and any(isinstance(x.type, Varbit) for x in st.fields):
                raise err("a header may contain at most one varbit field", f.loc)
        elif st.kind == "header_union" and not (isinstance(ft, StructT) and ft.is_header):
            raise err(f"header_union member '{f.name}' must be a header", f.loc)

    def _enum(self, d: A.EnumDecl) -> EnumT:
        if d.underlying is None:
            return EnumT(d.name, {m: i for i, (m, _, _) in enumerate(d.members)})
        under = self.resolve_type(d.underlying)
        if not isinstance(under, Bits):
            raise err("the underlying type of an enum must be bit<W> or int<W>", d.loc)
        members: dict[str, int] = {}
        for name, val, loc in d.members:
            if val is None:
                raise err(f"serializable enum member '{name}' needs a value", loc)
            members[name] = self.const_int(val) & under.mask
        return EnumT(d.name, members, under)

    # ---- types ---------------------------------------------------------------------------
    def const_int(self, e: A.Expr) -> int:
        """Evaluate a compile-time integer expression."""
        assert self.const_eval is not None
        v = self.const_eval(e)
        if v is None or not isinstance(v, int):
            raise err("expected a compile-time constant integer", e.loc)
        return int(v)

    def resolve_type(self, t: A.TypeRef, tparams: dict[str, T] | None = None) -> T:
        """Turn a written type into a semantic type."""
        if tparams is None and self.tparam_scope:
            tparams = self.tparam_scope[-1]
        k = t.kind
        if k in ("bit", "int", "varbit"):
            assert t.width is not None
            w = self.const_int(t.width)
            if w <= 0 or w > MAX_WIDTH:
                raise err(f"width {w} out of range 1..{MAX_WIDTH}", t.loc)
            return Varbit(w) if k == "varbit" else Bits(w, k == "int")
        simple = {
            "bool": BOOL,
            "error": ERROR,
            "void": VOID,
            "string": STRING,
            "match_kind": MATCH_KIND,
            "int_inf": INT,
            "dontcare": DONTCARE,
        }
        if k in simple:
            return simple[k]
        if k == "tuple":
            return TupleT([self.resolve_type(a, tparams) for a in t.args])
        if k == "stack":
            elem = self.resolve_type(t.args[0], tparams)
            assert t.width is not None
            size = self.const_int(t.width)
            if not isinstance(elem, StructT) or elem.kind == "struct":
                raise err("header stack elements must be headers or header unions", t.loc)
            if size <= 0:
                raise err("header stack size must be positive", t.loc)
            return StackT(elem, size)
        if k == "name":
            if tparams and t.name in tparams:
                return tparams[t.name]
            if t.name in self.types:
                return self.types[t.name]
            if t.name in self.externs:
                args = [self.resolve_type(a, tparams) for a in t.args]
                return ExternT(t.name, self.externs[t.name], args)
            if t.name in self.parsers or t.name in self.controls or t.name in self.protos:
                decl = self.parsers.get(t.name) or self.controls.get(t.name) or self.protos[t.name]
                return NamedBlockT(t.name, decl)
            raise err(f"unknown type '{t.name}'", t.loc)
        raise err(f"unsupported type '{k}'", t.loc)
