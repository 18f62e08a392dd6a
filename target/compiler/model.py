"""What the compiler learned about a program: the control-plane visible objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icefabric.target.compiler.types import StructT, T
from icefabric.target.p4 import ast as A


@dataclass(eq=False)
class ActionParam:
    """One control-plane action parameter."""

    name: str
    bitwidth: int
    annos: list[A.Annotation]


@dataclass(eq=False)
class ActionInfo:
    """A compiled action: P4Info name, Python function name and parameters."""

    name: str
    pyfunc: str
    params: list[ActionParam]
    annos: list[A.Annotation]
    decl: A.ActionDecl
    local_name: str = ""
    called: bool = False  # called directly from a control body or another action


@dataclass(eq=False)
class KeyInfo:
    """One table key: P4Info name, match kind, width and the Python code computing it."""

    name: str
    match_kind: str
    bitwidth: int
    code: str
    annos: list[A.Annotation]
    p4info_bitwidth: int | None = None  # when P4Info differs (0 for an error-typed key)


@dataclass(eq=False)
class TableInfo:
    """A table with everything needed for the runtime Table and for P4Info."""

    name: str
    pyobj: str
    pyfunc: str
    decl: A.TableDecl
    keys: list[KeyInfo] = field(default_factory=list)
    actions: list[tuple[ActionInfo, list[A.Annotation]]] = field(default_factory=list)
    default_action: ActionInfo | None = None
    default_args: tuple[int, ...] = ()
    const_default: bool = False
    const_entries: list[Any] = field(default_factory=list)  # runtime TableEntry
    has_const_entries: bool = False
    initial_entries: list[Any] = field(default_factory=list)  # non-const `entries`
    size: int = 1024
    implementation: ExternInst | None = None
    direct_counter: ExternInst | None = None
    direct_meter: ExternInst | None = None
    idle_timeout: bool = False
    applied: bool = False
    # actions whose directional parameters the actions list binds: action name -> wrapper
    bound: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class ExternInst:
    """An extern object instance (register, counter, meter, action profile, ...)."""

    name: str  # P4Info name
    kind: str  # extern type name
    pyobj: str
    type_args: list[T]
    args: dict[str, Any]  # constant constructor arguments by parameter name
    annos: list[A.Annotation]
    table: TableInfo | None = None  # owner of a direct resource / user of a profile


@dataclass(eq=False)
class DigestInfo:
    """One digest type (named after its struct type, as p4c does)."""

    name: str
    type: StructT
    pyobj: str
    widths: list[int]


@dataclass(eq=False)
class ValueSetInfo:
    """A parser value set: P4Info name, Python name, size and (field, width, match kind)."""

    name: str
    pyobj: str
    size: int
    fields: list[tuple[str, int, str]]
    annos: list[A.Annotation]


@dataclass(eq=False)
class ProgramModel:
    """Everything control-plane visible, in declaration order."""

    actions: dict[str, ActionInfo] = field(default_factory=dict)
    tables: dict[str, TableInfo] = field(default_factory=dict)
    externs: dict[str, ExternInst] = field(default_factory=dict)
    digests: dict[str, DigestInfo] = field(default_factory=dict)
    controller_headers: list[StructT] = field(default_factory=list)
    value_sets: dict[str, ValueSetInfo] = field(default_factory=dict)
