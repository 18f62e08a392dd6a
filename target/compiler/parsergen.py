"""Parser and deparser code generation: extract/lookahead/advance/select and emit."""

from __future__ import annotations

from typing import Any

from icefabric.target.compiler.exprcore import add_base
from icefabric.target.compiler.stmt import StmtGen
from icefabric.target.compiler.types import (
    BOOL,
    INT,
    VOID,
    Bits,
    BoolT,
    EnumT,
    StackT,
    StructT,
    Varbit,
)
from icefabric.target.compiler.unit import err
from icefabric.target.compiler.values import Emitter, ObjV, Ref, V
from icefabric.target.p4 import ast as A


def _field_layout(t: StructT, base: int = 0) -> list[tuple[Any, int, int]]:
    """(FieldInfo, width or -1 for varbit, slot offset) per field of a header; the fields of a
    struct-typed header field are laid out in place, in order (as p4c flattens them)."""
    out = []
    for f in t.fields:
        ft = f.type
        if isinstance(ft, StructT):
            out.extend(_field_layout(ft, base + f.offset))
        elif isinstance(ft, Varbit):
            out.append((f, -1, base + f.offset))
        elif isinstance(ft, Bits):
            out.append((f, ft.width, base + f.offset))
        elif isinstance(ft, BoolT):
            out.append((f, 1, base + f.offset))
        elif isinstance(ft, EnumT) and ft.underlying is not None:
            out.append((f, ft.underlying.width, base + f.offset))
        else:
            raise AssertionError(ft)
    return out


def _from_bits(code: str, ft: Any) -> str:
    if isinstance(ft, BoolT):
        return f"(({code}) != 0)"
    if isinstance(ft, EnumT) and ft.underlying is not None:
        ft = ft.underlying
    if isinstance(ft, Bits) and ft.signed:
        h = 1 << (ft.width - 1)
        return f"((({code}) ^ {h}) - {h})"
    return code


def _to_bits(code: str, ft: Any) -> str:
    if isinstance(ft, BoolT):
        return f"(1 if {code} else 0)"
    if isinstance(ft, EnumT) and ft.underlying is not None:
        ft = ft.underlying
    if isinstance(ft, Bits) and ft.signed:
        return f"(({code}) & {ft.mask})"
    return code


class ParserGen(StmtGen):
    """packet_in / packet_out methods and whole parser functions."""

    parser_prologue: list[str]  # lines initialising parser-local variables

    def perr(self, name: str) -> int:
        """The numeric code of a P4 error."""
        return self.unit.errors[name]

    # ---- packet_in ------------------------------------------------------------------------------
    def packet_in_method(self, name: str, e: A.Call, want: Any) -> Any:
        """extract/lookahead/advance/length on packet_in."""
        if not self.in_parser:
            raise err("packet_in methods can only be called in a parser", e.loc)
        decl = self.unit.externs.get("packet_in")
        protos = [m for m in decl.methods if m.name == name] if decl is not None else []
        if not protos:
            raise err(f"packet_in has no method '{name}'", e.loc)
        self.check_arity(f"packet_in.{name}", protos, e)
        em = self.em
        if name == "extract":
            if len(e.args) not in (1, 2):
                raise err("extract takes one or two arguments", e.loc)
            tgt = self.expr(e.args[0].expr)
            stack = None
            if isinstance(tgt, ObjV) and tgt.kind == "stack_next":
                tgt, stack = tgt.obj, tgt.extra
            if not isinstance(tgt, Ref) or not isinstance(tgt.type, StructT):
                raise err("extract needs a header", e.args[0].loc)
            if not tgt.type.is_header:
                raise err("extract needs a header (not a struct or union)", e.args[0].loc)
            nbits = self.scalar(e.args[1].expr, Bits(32)) if len(e.args) == 2 else None
            if nbits is None and tgt.type.has_varbit():
                raise err("extracting a header with a varbit field needs a size", e.loc)
            if nbits is not None and not tgt.type.has_varbit():
                raise err("two-argument extract needs a header with a varbit field", e.loc)
            self.gen_extract(tgt, tgt.type, nbits, advance=True)
            if stack is not None:
                em.line(f"S[{stack.base}] += 1")
            return V("", VOID)
        if name == "lookahead":
            if len(e.type_args) != 1:
                raise err("lookahead needs one type argument", e.loc)
            t = self.unit.resolve_type(e.type_args[0])
            if isinstance(t, Bits):
                code = f"lookahead_bits(data, pos, nbits, {t.width})"
                if t.signed:
                    h = 1 << (t.width - 1)
                    code = f"(({code} ^ {h}) - {h})"
                return V(code, t)
            flat = isinstance(t, StructT) and all(
                isinstance(f.type, (Bits, BoolT))
                or (isinstance(f.type, EnumT) and f.type.underlying is not None)
                for f in t.fields
            )
            if (
                isinstance(t, StructT)
                and (t.is_header or (flat and not t.is_union))
                and (not t.has_varbit())
            ):
                base = self.unit.alloc(t)
                ref = Ref(str(base), t, base)
                self.gen_extract(ref, t, None, advance=False)
                return ref
            raise err(f"lookahead of type {t} is not supported", e.loc)
        if name == "advance":
            n = self.scalar(e.args[0].expr, Bits(32))
            adv = em.tmp("adv")
            em.line(f"{adv} = {n.code}")
            # BMv2 advances whole bytes: another amount is ParserInvalidArgument
            with em.block(f"if {adv} & 7:"):
                em.line(f"raise ParserError({self.perr('ParserInvalidArgument')}, pos)")
            # as BMv2: a failed advance leaves the cursor, the rest is payload
            with em.block(f"if pos + {adv} > nbits:"):
                em.line(f"raise ParserError({self.perr('PacketTooShort')}, pos)")
            em.line(f"pos += {adv}")
            return V("", VOID)
        if name == "length":
            return V("(nbits >> 3)", Bits(32))
        raise err(f"packet_in has no method '{name}'", e.loc)

    def gen_extract(self, ref: Ref, t: StructT, nbits: V | None, *, advance: bool) -> None:
        """Emit code reading one header from the packet at ``pos``."""
        em = self.em
        layout = _field_layout(t)
        fixed = t.fixed_bits()
        end = em.tmp("e")
        val = em.tmp("v")
        if nbits is not None:
            n = em.tmp("n")
            vb = next(f for f, w, _ in layout if w < 0)
            assert isinstance(vb.type, Varbit)
            # BMv2 (extract_VL): a size that is not whole bytes is ParserInvalidArgument; then
            # a packet too short is PacketTooShort before a size over the maximum is
            # HeaderTooShort.
            em.line(f"{n} = {nbits.code}")
            with em.block(f"if {n} & 7:"):
                em.line(f"raise ParserError({self.perr('ParserInvalidArgument')}, pos)")
            em.line(f"{end} = pos + {fixed} + {n}")
            total = f"({fixed} + {n})"
        else:
            n = "0"
            em.line(f"{end} = pos + {fixed}")
            total = str(fixed)
        with em.block(f"if {end} > nbits:"):
            em.line(f"raise ParserError({self.perr('PacketTooShort')}, pos)")
        if nbits is not None:
            with em.block(f"if {n} > {vb.type.max_width}:"):
                em.line(f"raise ParserError({self.perr('HeaderTooShort')}, pos)")
        em.line(f"{val} = int.from_bytes(data[pos >> 3:({end} + 7) >> 3], 'big') >> (-{end} & 7)")
        if nbits is not None:
            em.line(f"{val} &= (1 << {total}) - 1")
        else:
            em.line(f"{val} &= {(1 << fixed) - 1}")
        # Walk fields from the least significant end.
        shift_const = 0
        after_varbit = False
        for f, w, off in reversed(layout):
            slot = add_base(ref.base, off)
            sh = f"{shift_const} + {n}" if after_varbit else str(shift_const)
            if w < 0:
                em.line(f"S[{slot}] = ({val} >> {sh}) & ((1 << {n}) - 1)")
                em.line(f"S[{add_base(slot, 1)}] = {n}")
                after_varbit = True
                continue
            m = (1 << w) - 1
            raw = f"({val} >> ({sh})) & {m}" if sh != "0" else f"{val} & {m}"
            em.line(f"S[{slot}] = {_from_bits(raw, f.type)}")
            shift_const += w
        if advance:
            em.line(f"S[{ref.base}] = True")
            self.invalidate_siblings(ref, True)
            em.line(f"pos = {end}")
        elif t.is_header:  # lookahead<header>: a valid copy; a struct has no validity
            em.line(f"S[{ref.base}] = True")

    # ---- packet_out ----------------------------------------------------------------------------
    def packet_out_method(self, name: str, e: A.Call) -> Any:
        """emit() on packet_out."""
        if name != "emit" or len(e.args) != 1:
            raise err("packet_out only supports emit(header)", e.loc)
        v = self.expr(e.args[0].expr)
        if not isinstance(v, Ref):
            raise err("emit needs a header, header stack, union or struct", e.args[0].loc)
        self.gen_emit(v, e)
        return V("", VOID)

    def gen_emit(self, ref: Ref, e: A.Call) -> None:
        """Emit code appending a header (or every header inside a struct/stack) to the output."""
        t = ref.type
        em = self.em
        if isinstance(t, StackT):
            for i in range(t.size):
                self.gen_emit(self.stack_elem(ref, V(str(i), INT, i), e.loc), e)
            return
        if not isinstance(t, StructT):
            raise err(f"cannot emit a value of type {t}", e.loc)
        if not t.is_header:
            for f in t.fields:
                sub = self.field_of(ref, f.name, e.loc)
                if not isinstance(sub, Ref):
                    raise err(f"emit of a struct with a scalar field '{f.name}'", e.loc)
                self.gen_emit(sub, e)
            return
        layout = _field_layout(t)
        with em.block(f"if S[{ref.base}]:"):
            if not t.has_varbit():
                parts = []
                shift = t.fixed_bits()
                for f, w, off in layout:
                    shift -= w
                    c = _to_bits(f"S[{add_base(ref.base, off)}]", f.type)
                    parts.append(f"({c} << {shift})" if shift else c)
                em.line(f"acc = (acc << {t.fixed_bits()}) | " + " | ".join(parts))
                em.line(f"nb += {t.fixed_bits()}")
                return
            for f, w, off in layout:
                slot = add_base(ref.base, off)
                if w < 0:
                    em.line(f"acc = (acc << S[{add_base(slot, 1)}]) | S[{slot}]")
                    em.line(f"nb += S[{add_base(slot, 1)}]")
                else:
                    em.line(f"acc = (acc << {w}) | {_to_bits(f'S[{slot}]', f.type)}")
                    em.line(f"nb += {w}")

    # ---- parser states ------------------------------------------------------------------------
    def gen_parser_states(self, decl: A.ParserDecl, func: str, *, sub: bool = False) -> str:
        """Generate ``def func(S, data, nbits)`` running the parser; returns the source.

        A sub-parser gets ``def func(S, data, nbits, pos)`` and returns the new position."""
        names = {s.name: i for i, s in enumerate(decl.states)}
        if "start" not in names:
            raise err(f"parser {decl.name} has no start state", decl.loc)
        em = Emitter(counter=self.em.counter)
        saved = self.em
        self.em = em
        self.in_parser = True
        try:
            with em.block(f"def {func}(S, data, nbits{', pos' if sub else ''}):"):
                if not sub:
                    em.line("pos = 0")
                em.lines.extend(self.parser_prologue)  # parser-local initialisers
                self.parser_prologue = []
                em.line(f"st = {names['start']}")
                with em.block("while True:"):
                    for i, s in enumerate(decl.states):
                        head = "if" if i == 0 else "elif"
                        with em.block(f"{head} st == {i}:"):
                            # names declared in the state are visible in its select too
                            self.scopes.append({})
                            try:
                                for st in s.stmts:
                                    self.stmt(st)
                                self.gen_transition(s, names)
                            finally:
                                self.scopes.pop()
                    with em.block("else:"):
                        em.line("raise ParserError(-1, pos)")
        finally:
            self.em = saved
            self.in_parser = sub
        return "\n".join(em.lines)

    def goto(self, target: str, names: dict[str, int], loc: Any) -> str:
        """Code for a transition to a state."""
        if target == "accept":
            return "return pos"
        if target == "reject":
            return "raise ParserError(-1, pos)"
        if target not in names:
            raise err(f"unknown parser state '{target}'", loc)
        return f"st = {names[target]}"

    def gen_transition(self, s: A.StateDecl, names: dict[str, int]) -> None:
        """Emit the transition of a parser state."""
        em = self.em
        tr = s.transition
        if isinstance(tr, A.Name):
            em.line(self.goto(tr.name, names, tr.loc))
            return
        if not isinstance(tr, A.SelectExpr):
            raise err("unsupported transition", s.loc)
        keys: list[V] = []
        for k in tr.keys:
            kv = self.scalar(k)
            tmp = em.tmp("k")
            em.line(f"{tmp} = {kv.code}")
            keys.append(V(tmp, kv.type))
        first = True
        matched_all = False
        for case in tr.cases:
            items = case.keyset.items if isinstance(case.keyset, A.ListExpr) else [case.keyset]
            vs = self.value_set_ref(items[0]) if len(items) == 1 and len(keys) > 1 else None
            if vs is not None:
                tup = "(" + "".join(f"{k.code}, " for k in keys) + ")"
                with em.block(f"{'if' if first else 'elif'} {vs}.matches({tup}):"):
                    em.line(self.goto(case.state, names, case.loc))
                first = False
                continue
            if len(items) == 1 and len(keys) > 1 and isinstance(items[0], A.Default):
                items = items * len(keys)
            if len(items) != len(keys):
                raise err(f"select has {len(keys)} keys but the case has {len(items)}", case.loc)
            conds = [self.keyset_cond(k, it) for k, it in zip(keys, items, strict=True)]
            conds = [c for c in conds if c != "True"]
            cond = " and ".join(conds) if conds else "True"
            if cond == "True":
                if first:
                    em.line(self.goto(case.state, names, case.loc))
                else:
                    with em.block("else:"):
                        em.line(self.goto(case.state, names, case.loc))
                matched_all = True
                break
            with em.block(f"{'if' if first else 'elif'} {cond}:"):
                em.line(self.goto(case.state, names, case.loc))
            first = False
        if not matched_all:
            nm = f"raise ParserError({self.perr('NoMatch')}, pos)"
            if first:
                em.line(nm)
            else:
                with em.block("else:"):
                    em.line(nm)

    def value_set_ref(self, item: A.Expr) -> str | None:
        """The Python name of a value set used as a keyset, or None."""
        if isinstance(item, A.Name):
            obj = self.lookup(item.name, item.loc)
            if isinstance(obj, ObjV) and obj.kind == "value_set":
                return str(obj.obj)
        return None

    def keyset_cond(self, key: V, item: A.Expr) -> str:
        """Python condition for one select keyset element."""
        if isinstance(item, A.Default):
            return "True"
        want = key.type if not isinstance(key.type, BoolT) else BOOL
        if isinstance(item, A.Mask):
            v = self.scalar(item.value, want)
            m = self.scalar(item.mask, want)
            return f"({key.code} & {m.code}) == ({v.code} & {m.code})"
        if isinstance(item, A.Range):
            lo = self.scalar(item.low, want)
            hi = self.scalar(item.high, want)
            return f"{lo.code} <= {key.code} <= {hi.code}"
        vs = self.value_set_ref(item)
        if vs is not None:
            return f"{vs}.matches({key.code})"
        v = self.scalar(item, want)
        return f"{key.code} == {v.code}"
