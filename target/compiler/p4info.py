"""P4Info generation as p4c does it: names, aliases, IDs (jenkins hash + type prefix), @id."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2 as P

from icefabric.target.compiler.model import ActionInfo, ExternInst, TableInfo
from icefabric.target.compiler.types import Bits, BoolT, EnumT, StructT, T, bit_width
from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import P4CompileError

if TYPE_CHECKING:
    from icefabric.target.compiler.program import Program

PREFIX = {
    "action": P.P4Ids.ACTION,
    "table": P.P4Ids.TABLE,
    "value_set": P.P4Ids.VALUE_SET,
    "controller_header": P.P4Ids.CONTROLLER_HEADER,
    "action_profile": P.P4Ids.ACTION_PROFILE,
    "counter": P.P4Ids.COUNTER,
    "direct_counter": P.P4Ids.DIRECT_COUNTER,
    "meter": P.P4Ids.METER,
    "direct_meter": P.P4Ids.DIRECT_METER,
    "register": P.P4Ids.REGISTER,
    "digest": P.P4Ids.DIGEST,
}
_SKIP_ANNOS = {"name", "id", "brief", "description", "hidden"}
_MATCH = {
    "exact": P.MatchField.EXACT,
    "lpm": P.MatchField.LPM,
    "ternary": P.MatchField.TERNARY,
    "range": P.MatchField.RANGE,
    "optional": P.MatchField.OPTIONAL,
}
_COUNTER_UNIT = {
    "packets": P.CounterSpec.PACKETS,
    "bytes": P.CounterSpec.BYTES,
    "packets_and_bytes": P.CounterSpec.BOTH,
}
_METER_UNIT = {"packets": P.MeterSpec.PACKETS, "bytes": P.MeterSpec.BYTES}


def jenkins_one_at_a_time(name: str) -> int:
    """Bob Jenkins' one-at-a-time hash of a UTF-8 string (32 bits), as p4c uses it."""
    h = 0
    for c in name.encode():
        h = (h + c) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class SymbolTable:
    """Assigns P4Runtime IDs: @id first, then hashed names in sorted order with linear probing."""

    def __init__(self, hash_bits: int = 24) -> None:
        self.tables: dict[str, dict[str, int | None]] = {}
        self.assigned: set[int] = set()
        self.hash_mask = (1 << hash_bits) - 1
        self.suffixes: dict[tuple[str, ...], int] = {}
        self.all_names: set[str] = set()

    def add(self, kind: str, name: str, annos: Iterable[A.Annotation] = ()) -> None:
        """Register a symbol (duplicates are ignored, as in p4c)."""
        table = self.tables.setdefault(kind, {})
        if name in table:
            return
        table[name] = self._external_id(kind, name, annos)
        if name not in self.all_names:
            self.all_names.add(name)
            parts = name.split(".")
            for i in range(len(parts)):
                key = tuple(parts[i:])
                self.suffixes[key] = self.suffixes.get(key, 0) + 1

    def _external_id(self, kind: str, name: str, annos: Iterable[A.Annotation]) -> int | None:
        a = A.anno(list(annos), "id")
        if a is None or not a.args:
            return None
        arg = a.args[0]
        if not isinstance(arg, A.IntLit):
            raise P4CompileError("@id must be an unsigned integer", a.loc)
        ident: int = arg.value
        prefix = PREFIX[kind] << 24
        if ident & 0xFF000000 and ident & 0xFF000000 != prefix:
            raise P4CompileError(f"@id of '{name}' has the wrong 8-bit prefix", a.loc)
        ident |= prefix
        if ident in self.assigned:
            raise P4CompileError(f"@id {ident} is assigned to multiple declarations", a.loc)
        self.assigned.add(ident)
        return ident

    def compute(self) -> None:
        """Give every symbol without an @id a hashed ID."""
        for kind, table in self.tables.items():
            prefix = PREFIX[kind] << 24
            for name in sorted(
                (n for n, i in table.items() if i is None), key=lambda s: s.encode()
            ):
                start = jenkins_one_at_a_time(name)
                value = start
                while True:
                    ident = prefix | (value & self.hash_mask)
                    if ident not in self.assigned:
                        break
                    value = (value + 1) & 0xFFFFFFFF
                    if value == start:
                        raise P4CompileError(f"no available id to represent {name} in P4Runtime")
                self.assigned.add(ident)
                table[name] = ident

    def id(self, kind: str, name: str) -> int:
        """The ID of a registered symbol."""
        ident = self.tables[kind][name]
        assert ident is not None
        return ident

    def alias(self, name: str) -> str:
        """Shortest unique dot-suffix of a name."""
        parts = name.split(".")
        for i in range(len(parts) - 1, -1, -1):
            if self.suffixes.get(tuple(parts[i:]), 0) < 2:
                return ".".join(parts[i:])
        return name


def anno_text(a: A.Annotation) -> str:
    """Render an annotation in P4 syntax as p4c writes it into P4Info."""
    if not a.args:
        return f"@{a.name}"
    parts: list[str] = []
    for x in a.args:
        if isinstance(x, A.StrLit):
            parts.append('"' + x.value.replace("\\", "\\\\").replace('"', '\\"') + '"')
        elif isinstance(x, A.IntLit):
            parts.append(str(x.value))
        elif isinstance(x, A.BoolLit):
            parts.append("true" if x.value else "false")
        elif isinstance(x, A.Name):
            parts.append(x.name)
        elif isinstance(x, str):
            parts.append(x)
        else:
            parts.append(type(x).__name__)
    if all(isinstance(x, str) for x in a.args):
        return f"@{a.name}({''.join(parts)})"
    return f"@{a.name}({', '.join(parts)})"


def _preamble(pre: P.Preamble, syms: SymbolTable, kind: str, name: str, annos: list[Any]) -> None:
    pre.id = syms.id(kind, name)
    pre.name = name
    pre.alias = syms.alias(name)
    for a in annos:
        if a.name not in _SKIP_ANNOS:
            pre.annotations.append(anno_text(a))
    for doc in ("brief", "description"):
        d = A.anno(annos, doc)
        if d is not None and d.args and isinstance(d.args[0], A.StrLit):
            setattr(pre.doc, doc, d.args[0].value)


def _type_spec(spec: Any, t: T, info: P.P4TypeInfo) -> None:
    if isinstance(t, Bits):
        if t.signed:
            spec.bitstring.int.bitwidth = t.width
        else:
            spec.bitstring.bit.bitwidth = t.width
    elif isinstance(t, BoolT):
        spec.bool.SetInParent()
    elif isinstance(t, EnumT) and t.underlying is not None:
        spec.serializable_enum.name = t.name
        se = info.serializable_enums[t.name]
        se.underlying_type.bitwidth = t.underlying.width
        if not se.members:
            for k, v in t.members.items():
                m = se.members.add()
                m.name = k
                m.value = v.to_bytes((t.underlying.width + 7) // 8, "big")
    elif isinstance(t, StructT):
        target = spec.header if t.is_header else spec.struct
        target.name = t.name
        _add_struct(t, info)
    else:
        raise P4CompileError(f"type {t} cannot appear in P4Info")


def _add_struct(t: StructT, info: P.P4TypeInfo) -> None:
    coll = info.headers if t.is_header else info.structs
    if t.name in coll:
        return
    entry = coll[t.name]
    for f in t.fields:
        m = entry.members.add()
        m.name = f.name
        if t.is_header:
            w = bit_width(f.type) or 0
            if isinstance(f.type, Bits) and f.type.signed:
                m.type_spec.int.bitwidth = w
            else:
                m.type_spec.bit.bitwidth = w
        else:
            _type_spec(m.type_spec, f.type, info)


def build_p4info(program: Program, *, hash_bits: int = 24) -> P.P4Info:
    """The P4Info message of a compiled program."""
    model = program.compiled.model
    syms = SymbolTable(hash_bits)
    for act in model.actions.values():
        syms.add("action", act.name, act.annos)
    for t in model.tables.values():
        syms.add("table", t.name, t.decl.annos)
    ext_kind = {"action_profile": "action_profile", "action_selector": "action_profile",
                "counter": "counter", "direct_counter": "direct_counter", "meter": "meter",
                "direct_meter": "direct_meter", "register": "register"}  # fmt: skip
    for inst in model.externs.values():
        syms.add(ext_kind[inst.kind], inst.name, inst.annos)
    for st in model.controller_headers:
        syms.add("controller_header", st.name, st.annos)
    for d in model.digests.values():
        syms.add("digest", d.name, d.type.annos)
    for vs in model.value_sets.values():
        syms.add("value_set", vs.name, vs.annos)
    syms.compute()

    info = P.P4Info()
    info.pkg_info.arch = "v1model"
    for t in model.tables.values():
        _table(info.tables.add(), t, syms)
    in_tables = {a.name for t in model.tables.values() for a, _ in t.actions}
    for act in model.actions.values():
        # p4c binds every parameter of an action that only a control body calls (never a
        # table): its P4Info lists such an action with no parameters.
        bound = act.called and act.name not in in_tables
        _action(info.actions.add(), act, syms, with_params=not bound)
    for inst in model.externs.values():
        _extern(info, inst, syms, ext_kind[inst.kind], model.tables.values())
    for st in model.controller_headers:
        cpm = info.controller_packet_metadata.add()
        a = A.anno(st.annos, "controller_header")
        name = a.args[0].value if a and a.args and isinstance(a.args[0], A.StrLit) else st.name
        _preamble(cpm.preamble, syms, "controller_header", st.name, st.annos)
        cpm.preamble.name = name
        cpm.preamble.alias = name
        for i, f in enumerate(st.fields):
            md = cpm.metadata.add()
            md.id = i + 1
            md.name = f.name
            md.bitwidth = bit_width(f.type) or 0
            md.annotations.extend(anno_text(x) for x in f.annos if x.name not in _SKIP_ANNOS)
    for vs in model.value_sets.values():
        msg = info.value_sets.add()
        _preamble(msg.preamble, syms, "value_set", vs.name, vs.annos)
        for i, (fname, width, kind) in enumerate(vs.fields):
            mf = msg.match.add()
            mf.id = i + 1
            if fname:
                mf.name = fname
            mf.bitwidth = width
            if kind in _MATCH:
                mf.match_type = _MATCH[kind]
            else:
                mf.other_match_type = kind
        msg.size = vs.size
    for d in model.digests.values():
        dg = info.digests.add()
        _preamble(dg.preamble, syms, "digest", d.name, [])
        dg.type_spec.struct.name = d.type.name
        _add_struct(d.type, info.type_info)
    return info


def _table(msg: P.Table, t: TableInfo, syms: SymbolTable) -> None:
    _preamble(msg.preamble, syms, "table", t.name, t.decl.annos)
    fid = 0
    for k in t.keys:
        if k.match_kind == "selector":
            continue
        fid += 1
        mf = msg.match_fields.add()
        mf.id = fid
        mf.name = k.name
        mf.bitwidth = k.bitwidth if k.p4info_bitwidth is None else k.p4info_bitwidth
        if k.match_kind in _MATCH:
            mf.match_type = _MATCH[k.match_kind]
        else:
            mf.other_match_type = k.match_kind
        mf.annotations.extend(anno_text(a) for a in k.annos if a.name not in _SKIP_ANNOS)
    for act, annos in t.actions:
        ref = msg.action_refs.add()
        ref.id = syms.id("action", act.name)
        if A.anno(annos, "tableonly"):
            ref.scope = P.ActionRef.TABLE_ONLY
        elif A.anno(annos, "defaultonly"):
            ref.scope = P.ActionRef.DEFAULT_ONLY
        ref.annotations.extend(anno_text(a) for a in annos if a.name not in _SKIP_ANNOS)
    if t.const_default and t.default_action is not None:
        msg.const_default_action_id = syms.id("action", t.default_action.name)
    if t.implementation is not None:
        msg.implementation_id = syms.id("action_profile", t.implementation.name)
    if t.direct_counter is not None:
        msg.direct_resource_ids.append(syms.id("direct_counter", t.direct_counter.name))
    if t.direct_meter is not None:
        msg.direct_resource_ids.append(syms.id("direct_meter", t.direct_meter.name))
    msg.size = t.size
    if t.idle_timeout:
        msg.idle_timeout_behavior = P.Table.NOTIFY_CONTROL
    if t.has_const_entries:
        msg.is_const_table = True
        msg.has_initial_entries = True
    elif t.initial_entries:
        msg.has_initial_entries = True


def _action(msg: P.Action, act: ActionInfo, syms: SymbolTable, *, with_params: bool) -> None:
    _preamble(msg.preamble, syms, "action", act.name, act.annos)
    for i, p in enumerate(act.params if with_params else ()):
        pm = msg.params.add()
        pm.id = i + 1
        pm.name = p.name
        pm.bitwidth = p.bitwidth
        pm.annotations.extend(anno_text(a) for a in p.annos if a.name not in _SKIP_ANNOS)


def _enum_arg(inst: ExternInst, name: str, default: str) -> str:
    from icefabric.target.compiler.instantiate import enum_arg

    return enum_arg(inst, name, default)


def _extern(
    info: P.P4Info, inst: ExternInst, syms: SymbolTable, kind: str, tables: Iterable[TableInfo]
) -> None:
    from icefabric.target.compiler.instantiate import int_arg, register_width

    if kind == "action_profile":
        msg = info.action_profiles.add()
        _preamble(msg.preamble, syms, kind, inst.name, inst.annos)
        for t in tables:
            if t.implementation is inst:
                msg.table_ids.append(syms.id("table", t.name))
        msg.with_selector = inst.kind == "action_selector"
        msg.size = int_arg(inst, "size", 0)
        a = A.anno(inst.annos, "max_group_size")
        if a is not None and a.args and isinstance(a.args[0], A.IntLit):
            msg.max_group_size = a.args[0].value
    elif kind in ("counter", "direct_counter"):
        msg = info.counters.add() if kind == "counter" else info.direct_counters.add()
        _preamble(msg.preamble, syms, kind, inst.name, inst.annos)
        msg.spec.unit = _COUNTER_UNIT[_enum_arg(inst, "type", "packets")]
        if kind == "counter":
            msg.size = int_arg(inst, "size", 0)
        elif inst.table is not None:
            msg.direct_table_id = syms.id("table", inst.table.name)
    elif kind in ("meter", "direct_meter"):
        msg = info.meters.add() if kind == "meter" else info.direct_meters.add()
        _preamble(msg.preamble, syms, kind, inst.name, inst.annos)
        msg.spec.unit = _METER_UNIT[_enum_arg(inst, "type", "packets")]
        if kind == "meter":
            msg.size = int_arg(inst, "size", 0)
        elif inst.table is not None:
            msg.direct_table_id = syms.id("table", inst.table.name)
    elif kind == "register":
        msg = info.registers.add()
        _preamble(msg.preamble, syms, kind, inst.name, inst.annos)
        cell = inst.type_args[0] if inst.type_args else Bits(register_width(inst))
        _type_spec(msg.type_spec, cell, info.type_info)
        msg.size = int_arg(inst, "size", 0)


def p4info_text(program: Program) -> str:
    """The P4Info of a program in protobuf text format."""
    return str(text_format.MessageToString(program.p4info))
