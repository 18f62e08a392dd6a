"""Digests and extern instances (registers, counters, meters, action profiles) of controls,
mixed into :class:`~icefabric.target.compiler.controlgen.ControlGen` as ``TableGenMixin`` is."""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.calls import R_DIGESTS
from icefabric.target.compiler.exprcore import wrap
from icefabric.target.compiler.model import DigestInfo, ExternInst
from icefabric.target.compiler.types import VOID, Bits, ExternT, StructT, bit_width
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import ListV, Ref, V
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc


class ExternGenMixin:
    """digest() and extern instances and their methods (mixed into ControlGen)."""

    # ---- digests --------------------------------------------------------------------------
    def digest_call(
        self: Any, args: list[A.Expr], loc: SourceLoc, type_args: list[A.TypeRef] | None = None
    ) -> V:
        """digest(receiver, data): record the digest, sampled at the end of ingress."""
        want = self.unit.resolve_type(type_args[0]) if type_args else None
        data = self.expr(args[1], want)
        if isinstance(data, ListV):
            if not isinstance(want, StructT):
                raise err("digest of a list needs its struct type: digest<T>(receiver, {...})", loc)
            # as p4c: the list is stored in a temporary struct at the call, and that is sampled
            tmp = self.unit.alloc(want)
            data_ref = Ref(str(tmp), want, tmp)
            self.assign_value(data_ref, data, args[1].loc)
            data = data_ref
        if not isinstance(data, Ref) or not isinstance(data.type, StructT):
            raise err("digest data must be a struct", args[1].loc)
        st = data.type
        fields = self.bits_of(data, loc)
        name = st.name
        if name not in self.model.digests:
            pyobj = self.unit.pyname(f"DG_{name}")
            widths = [w for _, w in fields]
            self.model.digests[name] = DigestInfo(name, st, pyobj, widths)
        # BMv2 (generate_digest) keeps one learn list per packet, the last one called, and
        # samples its fields at the end of ingress, not at the call.
        vals = "(" + "".join(f"{c}, " for c, _ in fields) + ")"
        fn = self.unit.pyname(f"DGV_{name}")
        self.funcs.append(f"def {fn}(S):\n    return {vals}")
        self.em.line(f"S[{R_DIGESTS}] = [({name!r}, {fn})]")
        return V("", VOID)

    # ---- extern instances -----------------------------------------------------------------
    def extern_instance(self: Any, d: A.InstanceDecl, t: ExternT, prefix: str) -> ExternInst:
        """Record an extern instance (register, counter, meter, profile ...)."""
        from icefabric.target.compiler.controlgen import fq_name

        name = fq_name(prefix, d.name, d.annos)
        ctor = next((m for m in t.decl.methods if m.name == t.name), None)
        if ctor is None:
            raise err(f"extern {t.name} has no constructor", d.loc)
        cands = [m for m in t.decl.methods if m.name == t.name and len(m.params) == len(d.args)]
        if not cands:
            raise err(f"{t.name} takes {len(ctor.params)} constructor arguments", d.loc)
        ctor = cands[0]
        args: dict[str, Any] = {}
        for p, a in zip(ctor.params, d.args, strict=False):
            v = self.expr(a.expr)
            if isinstance(v, V) and v.const is not None:
                args[p.name] = v
            else:
                raise err(f"constructor argument '{p.name}' must be a constant", a.loc)
        inst = ExternInst(name, t.name, self.unit.pyname(f"X_{name}"), t.args, args, d.annos)
        if t.name not in ("register", "counter", "meter", "direct_counter", "direct_meter",
                          "action_profile", "action_selector"):  # fmt: skip
            raise err(f"extern {t.name} is not supported by this target", d.loc)
        self.model.externs[name] = inst
        return inst

    def extern_method(self: Any, inst: ExternInst, name: str, e: A.Call) -> Any:
        """A method call on an extern instance."""
        decl = self.unit.externs.get(inst.kind)
        protos = [m for m in decl.methods if m.name == name] if decl is not None else []
        if not protos:
            raise err(f"{inst.kind} has no method '{name}'", e.loc)
        self.check_arity(f"{inst.kind}.{name}", protos, e)
        args = [a.expr for a in e.args]
        k = inst.kind
        obj = inst.pyobj
        if k == "register":
            vt = inst.type_args[0] if inst.type_args else Bits(32)
            it = inst.type_args[1] if len(inst.type_args) > 1 else Bits(32)
            if name == "read" and len(args) == 2:
                dst = self.lvalue(args[0])
                idx = self.scalar(args[1], it)
                self.em.line(self.wr(dst, self.reg_value(f"{obj}.read({idx.code})", vt)))
                return V("", VOID)
            if name == "read" and len(args) == 1:
                idx = self.scalar(args[0], it)
                return V(self.reg_value(f"{obj}.read({idx.code})", vt), vt)
            if name == "write":
                idx = self.scalar(args[0], it)
                val = self.scalar(args[1], vt)
                w = bit_width(vt) or 32
                self.em.line(f"{obj}.write({idx.code}, ({val.code}) & {(1 << w) - 1})")
                return V("", VOID)
        if k == "counter" and name == "count":
            idx = self.scalar(args[0])
            self.em.line(f"{obj}.count({idx.code}, {self.plen})")
            return V("", VOID)
        if k == "meter" and name == "execute_meter":
            idx = self.scalar(args[0])
            dst = self.lvalue(args[1])
            self.em.line(self.wr(dst, wrap(f"{obj}.execute({idx.code}, {self.plen})", dst.type)))
            return V("", VOID)
        if k == "direct_counter" and name == "count":
            return V("", VOID)
        if k == "direct_meter" and name == "read":
            dst = self.lvalue(args[0])
            # BMv2 writes the colour only when the table hit (its meter ran)
            c = self.em.tmp("col")
            self.em.line(f"{c} = {obj}_owner.direct_meter_color()")
            with self.em.block(f"if {c} is not None:"):
                self.em.line(self.wr(dst, wrap(c, dst.type)))
            return V("", VOID)
        raise err(f"{k} has no method '{name}' on this target", e.loc)

    def reg_value(self: Any, code: str, vt: Any) -> str:
        """Convert a register cell to the register type."""
        if isinstance(vt, Bits) and vt.signed:
            h = 1 << (vt.width - 1)
            return f"(({code} ^ {h}) - {h})"
        if vt.__class__.__name__ == "BoolT":
            return f"({code} != 0)"
        return code
