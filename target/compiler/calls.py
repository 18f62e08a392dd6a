"""Method and extern-function calls: header/stack methods, packet I/O, v1model externs."""

from __future__ import annotations

import re
from typing import Any

from icefabric.target.compiler.expr import ExprGen
from icefabric.target.compiler.exprcore import add_base, wrap
from icefabric.target.compiler.types import (
    BOOL,
    INT,
    VOID,
    Bits,
    EnumT,
    StackT,
    StructT,
    Varbit,
)
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import Emitter, ListV, ObjV, Ref, V
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc

# Fixed slots of the per-packet state list holding side results of a pass.
R_CLONE, R_RESUBMIT, R_RECIRC, R_TRUNC, R_DIGESTS, R_PAYLOAD, R_LEN_DELTA = range(7)
RESERVED_SLOTS = 7
LEGACY_FIELD_LIST_BASE = 1 << 16  # ids of field lists made for resubmit(data) & co.


def packed(fields: list[tuple[str, Any]]) -> tuple[str, str]:
    """Code concatenating (code, width) fields MSB first into one int, and the total width.

    Widths are ints, or code strings for varbit fields (their current width)."""
    if all(isinstance(w, int) for _, w in fields):
        total = sum(w for _, w in fields)
        parts: list[str] = []
        shift = total
        for code, w in fields:
            shift -= w
            parts.append(f"(({code}) << {shift})" if shift else f"({code})")
        return (" | ".join(parts) or "0"), str(total)
    expr = "0"
    for code, w in fields:
        val = f"({code})" if isinstance(w, int) else f"(({code}) & ((1 << {w}) - 1))"
        expr = f"(({expr}) << {w}) | {val}"
    const = sum(w for _, w in fields if isinstance(w, int))
    dyn = " + ".join(str(w) for _, w in fields if not isinstance(w, int))
    return expr, f"({const} + {dyn})"


_GUARD = re.compile(r"\((\d+) if (S\[[^\]]+\]) else 0\)")


def _packed_guarded(fields: list[tuple[str, Any]]) -> tuple[str, str]:
    """``packed`` for a checksum field list: runs of fields guarded by the validity of the
    same header (the usual `{ hdr.ipv4.version, ... }`) are packed with constant shifts under
    one condition instead of field by field."""
    segments: list[tuple[str | None, list[tuple[str, Any]]]] = []
    for code, w in fields:
        m = _GUARD.fullmatch(w) if isinstance(w, str) else None
        guard = m.group(2) if m else None
        item = (code, int(m.group(1))) if m else (code, w)
        if segments and guard is not None and segments[-1][0] == guard:
            segments[-1][1].append(item)
        else:
            segments.append((guard, [item]))
    if all(g is None for g, _ in segments):
        return packed(fields)
    parts: list[tuple[str, Any]] = []
    for guard, seg in segments:
        if guard is None:
            parts.extend(seg)
            continue
        code, total = packed(seg)
        parts.append((f"({code} if {guard} else 0)", f"({total} if {guard} else 0)"))
    if len(parts) == 1:
        return parts[0][0], str(parts[0][1])
    return packed(parts)


class CallGen(ExprGen):
    """Call dispatch; hooks for actions, tables and sub-controls come from the control compiler."""

    sm_ref: Ref | None = None
    legacy_lists: dict[int, list[int]]

    def args_of(self, e: A.Call, params: list[str]) -> list[A.Expr]:
        """Match positional/named arguments to parameter names."""
        out: dict[str, A.Expr] = {}
        for i, a in enumerate(e.args):
            if a.name is not None:
                out[a.name] = a.expr
            elif i < len(params):
                out[params[i]] = a.expr
            else:
                raise err("too many arguments", a.loc)
        return [out[p] for p in params if p in out]

    def call(self, e: A.Call, want: Any, stmt: bool = False) -> Any:
        """Compile a call; returns its value (V/Ref/ObjV) or None."""
        f = self.expr(e.func)
        if isinstance(f, ObjV):
            if f.kind == "method":
                return self.method_call(f.obj, f.extra, e, want)
            if f.kind == "action":
                return self.action_call(f.obj, e)  # type: ignore[attr-defined]
            if f.kind == "function":
                return self.function_call(f.obj, e)  # type: ignore[attr-defined]
            if f.kind == "extern_func":
                return self.extern_func(f.obj, e, want)
            if f.kind == "type_method":
                return self.type_method(f.obj, f.extra, e.loc)
        raise err("this expression cannot be called", e.loc)

    def type_method(self, t: Any, name: str, loc: SourceLoc) -> V:
        """minSizeInBits()/minSizeInBytes() on a header type."""
        if isinstance(t, StructT) and name in ("minSizeInBits", "minSizeInBytes"):
            bits = t.fixed_bits()
            val = bits if name == "minSizeInBits" else (bits + 7) // 8
            return V(str(val), INT, val)
        raise err(f"type {t} has no method '{name}'", loc)

    # ---- methods on values -------------------------------------------------------------------
    def method_call(self, obj: Any, name: str, e: A.Call, want: Any) -> Any:
        """Dispatch a method call by receiver kind."""
        if isinstance(obj, Ref):
            t = obj.type
            if isinstance(t, StructT):
                return self.header_method(obj, t, name, e)
            if isinstance(t, StackT):
                return self.stack_method(obj, t, name, e)
        if isinstance(obj, ObjV):
            if obj.kind == "packet_in":
                return self.packet_in_method(name, e, want)  # type: ignore[attr-defined]
            if obj.kind == "packet_out":
                return self.packet_out_method(name, e)  # type: ignore[attr-defined]
            if obj.kind == "table":
                if name != "apply" or e.args:
                    raise err(f"table method '{name}' is not supported", e.loc)
                return ObjV("apply", self.table_apply(obj.obj), obj.obj)  # type: ignore[attr-defined]
            if obj.kind == "extern":
                return self.extern_method(obj.obj, name, e)  # type: ignore[attr-defined]
            if obj.kind in ("subcontrol", "subparser"):
                if name != "apply":
                    raise err(f"control instances only have apply(), not '{name}'", e.loc)
                return self.subcontrol_apply(obj.obj, e)  # type: ignore[attr-defined]
        raise err(f"unknown method '{name}'", e.loc)

    def header_method(self, ref: Ref, t: StructT, name: str, e: A.Call) -> Any:
        """isValid/setValid/setInvalid/minSizeIn* on a header or union."""
        if name in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
            bits = t.fixed_bits()
            if name.startswith("max"):
                bits += sum(f.type.max_width for f in t.fields if isinstance(f.type, Varbit))
            val = bits if name.endswith("Bits") else (bits + 7) // 8
            return V(str(val), INT, val)
        if t.is_union:
            heads = [self.field_of(ref, f.name, e.loc) for f in t.fields]
            bases = [h.base for h in heads if isinstance(h, Ref)]
            if name == "isValid":
                return V("(" + " or ".join(f"S[{b}]" for b in bases) + ")", BOOL)
            raise err(f"header_union has no method '{name}'", e.loc)
        if not t.is_header:
            raise err(f"struct {t.name} has no method '{name}'", e.loc)
        if name == "isValid":
            return V(f"S[{ref.base}]", BOOL)
        nbytes = t.fixed_bits() // 8
        if name in ("setValid", "setInvalid") and ref.readonly:
            raise err(f"cannot call {name}() on an 'in' parameter", e.loc)
        if name == "setValid":
            # BMv2 (add_header): an invalid header becomes valid with every field zeroed and
            # the packet grows by its size (seen in egress standard_metadata.packet_length);
            # a valid header is left as it is.
            first = add_base(ref.base, 1)
            end = add_base(ref.base, t.slots)
            with self.em.block(f"if not S[{ref.base}]:"):
                if t.slots > 1:
                    self.em.line(f"S[{first}:{end}] = TPL[{first}:{end}]")
                self.em.line(f"S[{ref.base}] = True")
                self.em.line(f"S[{R_LEN_DELTA}] += {nbytes}")
            self.invalidate_siblings(ref, True)
            return V("", VOID)
        if name == "setInvalid":
            # BMv2 (remove_header): the packet shrinks by the header's size.
            with self.em.block(f"if S[{ref.base}]:"):
                self.em.line(f"S[{ref.base}] = False")
                self.em.line(f"S[{R_LEN_DELTA}] -= {nbytes}")
            return V("", VOID)
        raise err(f"header has no method '{name}'", e.loc)

    def invalidate_siblings(self, ref: Ref, valid: bool) -> None:
        """Making one member of a header_union valid invalidates the others (hook)."""
        sib = ref.siblings or getattr(self, "union_siblings", {}).get(ref.base)
        if sib and valid:
            for b in sib:
                self.em.line(f"S[{b}] = False")

    def stack_method(self, ref: Ref, t: StackT, name: str, e: A.Call) -> Any:
        """push_front/pop_front on a header stack."""
        if name not in ("push_front", "pop_front"):
            raise err(f"header stack has no method '{name}'", e.loc)
        if len(e.args) != 1:
            raise err(f"{name} takes one argument", e.loc)
        if ref.readonly:
            raise err(f"cannot call {name}() on an 'in' parameter", e.loc)
        n = self.unit.const_int(e.args[0].expr)
        stride = t.elem.slots
        first = int(add_base(ref.base, 1)) if ref.base.isdigit() else None
        if first is None:
            raise err(f"{name} on a dynamically indexed stack is not supported", e.loc)
        end = first + t.size * stride
        if n <= 0:
            return V("", VOID)
        k = min(n, t.size)
        blank = f"TPL[{first}:{first + stride}] * {k}"
        if name == "push_front":
            self.em.line(f"S[{first}:{end}] = {blank} + S[{first}:{end - k * stride}]")
            self.em.line(f"S[{ref.base}] = min(S[{ref.base}] + {n}, {t.size})")
        else:
            self.em.line(f"S[{first}:{end}] = S[{first + k * stride}:{end}] + {blank}")
            self.em.line(f"S[{ref.base}] = max(S[{ref.base}] - {n}, 0)")
        return V("", VOID)

    # ---- extern functions ----------------------------------------------------------------------
    def sm_field(self, name: str) -> str:
        """Code reading a standard_metadata field."""
        assert self.sm_ref is not None
        f = self.field_of(self.sm_ref, name, self.sm_loc)
        assert isinstance(f, V)
        return f.code

    sm_loc: SourceLoc | None = None

    def enum_name(self, e: A.Expr, enum: str) -> str:
        """The member name of a constant enum argument."""
        v = self.scalar(e)
        if not isinstance(v.type, EnumT) or v.type.name != enum or v.const is None:
            raise err(f"expected a constant {enum}", e.loc)
        for k, val in v.type.members.items():
            if val == v.const:
                return k
        raise err(f"bad {enum} value", e.loc)

    def calc_fields(self, e: A.Expr, checksum: bool) -> list[tuple[str, Any]]:
        """A hash/checksum field list as (code, width) pairs, as p4c-bm2-ss and BMv2 build it:
        a whole header in the list counts only while it is valid (BufBuilder skips invalid
        headers); a single field of a header too in a checksum (referenced directly), but not
        in a hash, whose fields p4c copies into metadata first. A skipped item's width is
        code: ``(w if S[valid] else 0)``."""
        if isinstance(e, (A.ListExpr, A.StructExpr)):
            items = e.items if isinstance(e, A.ListExpr) else [x for _, x in e.fields]
            out: list[tuple[str, Any]] = []
            for x in items:
                out.extend(self.calc_fields(x, checksum))
            return out
        if checksum and isinstance(e, A.Member):
            saved = self.em
            self.em = Emitter()  # only the kind of the base is wanted here
            try:
                base = self.expr(e.expr)
            finally:
                self.em = saved
            if isinstance(base, Ref) and isinstance(base.type, StructT) and base.type.is_header:
                return self._guarded(self.bits_of(self.expr(e), e.loc), base.base)
        v = self.expr(e)
        if isinstance(v, Ref) and isinstance(v.type, StructT) and v.type.is_header:
            return self._guarded(self.bits_of(v, e.loc), v.base)
        if isinstance(v, ListV):
            return self.bits_of(v, e.loc)
        if isinstance(v, Ref) and isinstance(v.type, StructT) and not v.type.is_union:
            out = []
            for f in v.type.fields:
                sub = self.field_of(v, f.name, e.loc)
                if isinstance(sub, Ref) and isinstance(sub.type, StructT) and sub.type.is_header:
                    out.extend(self._guarded(self.bits_of(sub, e.loc), sub.base))
                else:
                    out.extend(self.bits_of(sub, e.loc))
            return out
        return self.bits_of(v, e.loc)

    @staticmethod
    def _guarded(fields: list[tuple[str, Any]], valid: str) -> list[tuple[str, Any]]:
        return [(c, f"({w} if S[{valid}] else 0)") for c, w in fields]

    def fields_arg(self, e: A.Expr) -> list[tuple[str, int]]:
        """A field-list argument as (code, width) pairs."""
        v = self.expr(e)
        return self.bits_of(v, e.loc)

    def check_arity(self, what: str, protos: list[A.MethodProto], e: A.Call) -> None:
        """The call must match one declared overload by argument count."""
        n = len(e.args)
        for p in protos:
            required = sum(1 for q in p.params if q.default is None)
            if required <= n <= len(p.params):
                return
        counts = sorted({len(p.params) for p in protos})
        raise err(f"{what} takes {' or '.join(map(str, counts))} arguments, got {n}", e.loc)

    def extern_func(self, name: str, e: A.Call, want: Any) -> Any:
        """A call of a v1model/core extern function."""
        args = [a.expr for a in e.args]
        loc = e.loc
        n = len(args)
        self.check_arity(name, self.unit.extern_funcs.get(name, []), e)
        if name == "mark_to_drop":
            self.em.line(f"{self.sm_field('egress_spec')} = 511")
            self.em.line(f"{self.sm_field('mcast_grp')} = 0")
            return V("", VOID)
        if name == "verify":
            if not self.in_parser:
                raise err("verify() is only allowed in a parser", loc)
            c = self.scalar(args[0], BOOL)
            code = self.scalar(args[1])
            self.em.line(f"if not ({c.code}): raise ParserError({code.code}, pos)")
            return V("", VOID)
        if name in ("static_assert",):
            c = self.scalar(args[0], BOOL)
            if c.const is not True:
                msg = self.scalar(args[1]).const if n > 1 else "static assertion failed"
                raise err(str(msg), loc)
            return V("True", BOOL, True)
        if name in ("assert", "assume"):
            c = self.scalar(args[0], BOOL)
            where = f"{loc.file}:{loc.line}"
            self.em.line(f"if not ({c.code}): raise AssertFailed({where!r})")
            return V("", VOID)
        if name == "random":
            dst = self.lvalue(args[0])
            lo = self.scalar(args[1], dst.type)
            hi = self.scalar(args[2], dst.type)
            self.em.line(self.wr(dst, f"RNG.randint({lo.code}, max({lo.code}, {hi.code}))"))
            return V("", VOID)
        if name == "hash":
            dst = self.lvalue(args[0])
            algo = self.enum_name(args[1], "HashAlgorithm")
            base = self.scalar(args[2])
            fields = self.calc_fields(args[3], checksum=False)
            mx = self.scalar(args[4])
            flist = "(" + "".join(f"({c}, {w}), " for c, w in fields) + ")"
            h = f"HASH({algo!r}, {flist})"
            if mx.const is not None:
                # BMv2 (simple_switch 1.15.5): base + hash % max, a max of 0 taken as 1
                expr = f"{h} % {int(mx.const)}" if int(mx.const) else "0"
            else:
                expr = f"(lambda h, m: h % m if m else 0)({h}, {mx.code})"
            if base.const != 0:
                expr = f"({base.code}) + ({expr})"
            self.em.line(self.wr(dst, wrap(expr, dst.type)))
            return V("", VOID)
        if name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                    "update_checksum_with_payload"):  # fmt: skip
            return self.checksum_call(name, args, loc)
        if name in ("clone", "clone3", "clone_preserving_field_list"):
            kind = self.enum_name(args[0], "CloneType")
            sess = self.scalar(args[1], Bits(32))
            fl = self.unit.const_int(args[2]) if name == "clone_preserving_field_list" else None
            if name == "clone3":
                fl = self.legacy_field_list(args[2])
            self.em.line(f"S[{R_CLONE}] = ({kind!r}, {sess.code}, {fl})")
            return V("", VOID)
        if name in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            fl = self.unit.const_int(args[0])
            slot = R_RESUBMIT if name.startswith("resubmit") else R_RECIRC
            self.em.line(f"S[{slot}] = {fl}")
            return V("", VOID)
        if name in ("resubmit", "recirculate"):
            slot = R_RESUBMIT if name == "resubmit" else R_RECIRC
            self.em.line(f"S[{slot}] = {self.legacy_field_list(args[0])}")
            return V("", VOID)
        if name == "truncate":
            ln = self.scalar(args[0], Bits(32))
            self.em.line(f"S[{R_TRUNC}] = {ln.code}")
            return V("", VOID)
        if name == "log_msg":
            fmt = self.scalar(args[0])
            if fmt.const is None:
                raise err("log_msg needs a string literal", loc)
            vals = self.fields_arg(args[1]) if n > 1 else []
            items = "[" + ", ".join(c for c, _ in vals) + "]"
            self.em.line(f"LOG_MSG(format_log({fmt.code}, {items}))")
            return V("", VOID)
        if name == "digest":
            return self.digest_call(args, loc, e.type_args)  # type: ignore[attr-defined]
        raise err(f"extern function '{name}' is not supported by this target", loc)

    def legacy_field_list(self, e: A.Expr) -> int:
        """A field list id for the deprecated resubmit/recirculate/clone3(data) forms: the
        user-metadata fields named in ``data`` are preserved (others are not)."""
        slots: list[int] = []
        for code, _ in self.fields_arg(e):
            if code.startswith("S[") and code.endswith("]") and code[2:-1].isdigit():
                slots.append(int(code[2:-1]))
        fid = LEGACY_FIELD_LIST_BASE + len(self.legacy_lists)
        self.legacy_lists[fid] = slots
        return fid

    def wr(self, dst: V, code: str) -> str:
        """Code storing ``code`` into the lvalue ``dst``."""
        assert dst.write is not None
        return dst.write(code)

    def lvalue(self, e: A.Expr) -> V:
        """Compile an expression that must be an assignable scalar."""
        v = self.expr(e)
        if not isinstance(v, V) or v.write is None:
            raise err("expected an assignable scalar (an l-value)", e.loc)
        return v

    def checksum_call(self, name: str, args: list[A.Expr], loc: SourceLoc) -> V:
        """verify_checksum/update_checksum (+ _with_payload)."""
        cond = self.scalar(args[0], BOOL)
        fields = self.calc_fields(args[1], checksum=True)
        algo = self.enum_name(args[3], "HashAlgorithm")
        target = self.expr(args[2])
        if not isinstance(target, V) or not isinstance(target.type, Bits):
            raise err("the checksum must be a bit<W> field", args[2].loc)
        code, total = _packed_guarded(fields)
        payload = name.endswith("_with_payload")
        if algo == "csum16":
            call = f"csum16_int({code}, {total}, S[{R_PAYLOAD}] if {payload} else b'')"
            if not payload:
                call = f"csum16_int({code}, {total})"
        else:
            call = f"hash_int({algo!r}, {code}, {total}, S[{R_PAYLOAD}] if {payload} else b'')"
        value = wrap(call, target.type)
        if name.startswith("update"):
            if target.write is None:
                raise err("the checksum argument must be an l-value", args[2].loc)
            with self.em.block(f"if {cond.code}:"):
                self.em.line(target.write(value))
        else:
            with self.em.block(f"if {cond.code} and ({value}) != {target.code}:"):
                self.em.line(f"{self.sm_field('checksum_error')} = 1")
        return V("", VOID)
