"""Create the run-time objects of one pipeline instance and the namespace the code runs in."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from icefabric.target.compiler.model import ExternInst
from icefabric.target.compiler.rt import (
    AssertFailed,
    ExitControl,
    ParserError,
    csum16_int,
    format_log,
    hash_int,
    lookahead_bits,
)
from icefabric.target.compiler.types import EnumT
from icefabric.target.compiler.valueset import ValueSet
from icefabric.target.runtime import (
    ActionCall,
    ActionProfile,
    Counter,
    DigestType,
    DirectCounter,
    DirectMeter,
    KeyField,
    Meter,
    Register,
    Table,
    compute_hash,
)

if TYPE_CHECKING:
    from icefabric.target.compiler.pipeline import PipelineEnv
    from icefabric.target.compiler.program import Program


def enum_arg(inst: ExternInst, name: str, default: str) -> str:
    """The member name of an enum constructor argument (CounterType.packets -> 'packets')."""
    v = inst.args.get(name)
    if v is None:
        return default
    t = v.type
    if isinstance(t, EnumT):
        for k, val in t.members.items():
            if val == v.const:
                return k
    return default


def int_arg(inst: ExternInst, name: str, default: int) -> int:
    """An integer constructor argument."""
    v = inst.args.get(name)
    return int(v.const) if v is not None else default


def register_width(inst: ExternInst) -> int:
    """Bit width of a register's cells."""
    from icefabric.target.compiler.types import bit_width

    if inst.type_args:
        return bit_width(inst.type_args[0]) or 32
    return 32


def build_namespace(
    program: Program, env: PipelineEnv, rng: random.Random, log_msg: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Return (namespace for the generated code, run-time objects by kind and P4Info name)."""
    comp = program.compiled
    model = comp.model

    def hash_fields(algo: str, fields: Any) -> int:
        """v1model hash over (value, width) fields."""
        if algo == "random":
            return rng.getrandbits(32)
        return compute_hash(algo, fields)

    ns: dict[str, Any] = {
        "ParserError": ParserError,
        "ExitControl": ExitControl,
        "AssertFailed": AssertFailed,
        "csum16_int": csum16_int,
        "hash_int": hash_int,
        "HASH": hash_fields,
        "lookahead_bits": lookahead_bits,
        "format_log": format_log,
        "TPL": list(comp.template),
        "RNG": rng,
        "LOG_MSG": log_msg,
    }
    objs: dict[str, dict[str, Any]] = {
        k: {}
        for k in (
            "tables",
            "action_profiles",
            "counters",
            "direct_counters",
            "meters",
            "direct_meters",
            "registers",
            "digests",
        )
    }
    for inst in model.externs.values():
        k = inst.kind
        obj: Any
        if k == "register":
            obj = Register(inst.name, int_arg(inst, "size", 1), register_width(inst))
            objs["registers"][inst.name] = obj
        elif k == "counter":
            obj = Counter(inst.name, int_arg(inst, "size", 1), enum_arg(inst, "type", "packets"))
            objs["counters"][inst.name] = obj
        elif k == "direct_counter":
            table = inst.table.name if inst.table else ""
            obj = DirectCounter(inst.name, enum_arg(inst, "type", "packets"), table)
            objs["direct_counters"][inst.name] = obj
        elif k == "meter":
            kind = enum_arg(inst, "type", "packets")
            obj = Meter(inst.name, int_arg(inst, "size", 1), kind, clock=env.clock)
            objs["meters"][inst.name] = obj
        elif k == "direct_meter":
            table = inst.table.name if inst.table else ""
            obj = DirectMeter(inst.name, enum_arg(inst, "type", "packets"), table, clock=env.clock)
            objs["direct_meters"][inst.name] = obj
        elif k == "action_profile":
            obj = ActionProfile(inst.name, int_arg(inst, "size", 1))
            objs["action_profiles"][inst.name] = obj
        elif k == "action_selector":
            algo = enum_arg(inst, "algorithm", "crc16")
            obj = ActionProfile(inst.name, int_arg(inst, "size", 1), selector=algo)
            objs["action_profiles"][inst.name] = obj
        else:
            raise ValueError(f"unsupported extern {k}")
        ns[inst.pyobj] = obj
    for t in model.tables.values():
        keys = [KeyField(k.name, k.match_kind, k.bitwidth) for k in t.keys]
        default_only = [a.name for a, annos in t.actions if _has(annos, "defaultonly")]
        table_only = [a.name for a, annos in t.actions if _has(annos, "tableonly")]
        assert t.default_action is not None
        tbl = Table(
            t.name,
            keys,
            [a.name for a, _ in t.actions],
            t.size,
            ActionCall(t.default_action.name, t.default_args),
            const_default=t.const_default,
            const_entries=copy.deepcopy(t.const_entries),
            action_profile=ns[t.implementation.pyobj] if t.implementation else None,
            direct_counter=ns[t.direct_counter.pyobj] if t.direct_counter else None,
            direct_meter=ns[t.direct_meter.pyobj] if t.direct_meter else None,
            default_only_actions=default_only,
            table_only_actions=table_only,
        )
        for entry in copy.deepcopy(t.initial_entries):
            tbl.insert(entry)
        if t.direct_meter is not None:
            ns[f"{t.direct_meter.pyobj}_owner"] = tbl
        ns[t.pyobj] = tbl
        objs["tables"][t.name] = tbl
    for inst in model.externs.values():
        if inst.kind == "direct_meter" and f"{inst.pyobj}_owner" not in ns:
            ns[f"{inst.pyobj}_owner"] = _NoTable()
    objs["value_sets"] = {}
    for vs in model.value_sets.values():
        vobj = ValueSet(vs.name, vs.size, vs.fields)
        ns[vs.pyobj] = vobj
        objs["value_sets"][vs.name] = vobj
    for d in model.digests.values():
        dt = DigestType(d.name, d.widths)
        ns[d.pyobj] = dt
        objs["digests"][d.name] = dt
    return ns, objs


def _has(annos: list[Any], name: str) -> bool:
    return any(getattr(a, "name", None) == name for a in annos)


class _NoTable:
    """Owner of a direct meter that no table uses: it never runs."""

    def direct_meter_color(self) -> int | None:
        """Never a colour: ``read`` leaves its destination as it was."""
        return None
