"""AST node classes for P4_16 programs (syntax only; types are resolved later)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icefabric.target.p4.errors import SourceLoc


@dataclass(slots=True)
class Node:
    """Base node: every node knows where it came from."""

    loc: SourceLoc


@dataclass(slots=True)
class Annotation(Node):
    """``@name(args)``: args parsed as expressions when possible."""

    name: str
    args: list[Any] = field(default_factory=list)


def anno(annos: list[Annotation], name: str) -> Annotation | None:
    """The first annotation called ``name`` or None."""
    for a in annos:
        if a.name == name:
            return a
    return None


# ---- type syntax -------------------------------------------------------------------------
@dataclass(slots=True)
class TypeRef(Node):
    """A type as written: base kind ('bit','int','varbit','bool','error','void','string',
    'match_kind','int_inf','dontcare','name','stack','tuple')."""

    kind: str
    width: Expr | None = None  # bit/int/varbit width, stack size
    name: str = ""
    args: list[TypeRef] = field(default_factory=list)  # type args, tuple members, stack elem


# ---- expressions -------------------------------------------------------------------------
@dataclass(slots=True)
class Expr(Node):
    """Base expression."""


@dataclass(slots=True)
class IntLit(Expr):
    value: int
    width: int | None = None
    signed: bool = False


@dataclass(slots=True)
class BoolLit(Expr):
    value: bool


@dataclass(slots=True)
class StrLit(Expr):
    value: str


@dataclass(slots=True)
class Name(Expr):
    name: str
    top: bool = False  # written as .name (top-level scope)


@dataclass(slots=True)
class Member(Expr):
    expr: Expr
    name: str


@dataclass(slots=True)
class Index(Expr):
    expr: Expr
    index: Expr


@dataclass(slots=True)
class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(slots=True)
class Unary(Expr):
    op: str
    expr: Expr


@dataclass(slots=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(slots=True)
class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(slots=True)
class Cast(Expr):
    type: TypeRef
    expr: Expr


@dataclass(slots=True)
class Arg(Node):
    name: str | None
    expr: Expr  # DontCare for '_'


@dataclass(slots=True)
class Call(Expr):
    func: Expr
    type_args: list[TypeRef]
    args: list[Arg]


@dataclass(slots=True)
class ListExpr(Expr):
    items: list[Expr]


@dataclass(slots=True)
class StructExpr(Expr):
    fields: list[tuple[str, Expr]]
    type: TypeRef | None = None


@dataclass(slots=True)
class Mask(Expr):
    value: Expr
    mask: Expr


@dataclass(slots=True)
class Range(Expr):
    low: Expr
    high: Expr


@dataclass(slots=True)
class Default(Expr):
    """``default`` in select cases / keysets."""


@dataclass(slots=True)
class DontCare(Expr):
    """``_``."""


@dataclass(slots=True)
class InvalidHeader(Expr):
    """``{#}``: an invalid header (or header union)."""


@dataclass(slots=True)
class TypeExpr(Expr):
    """A type used as an expression prefix (e.g. ``bit<8>`` in ``(bit<8>)x`` is a Cast instead)."""

    type: TypeRef


# ---- statements --------------------------------------------------------------------------
@dataclass(slots=True)
class Stmt(Node):
    """Base statement."""


@dataclass(slots=True)
class Assign(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(slots=True)
class CallStmt(Stmt):
    call: Call


@dataclass(slots=True)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None


@dataclass(slots=True)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(slots=True)
class SwitchCase(Node):
    labels: list[Expr]  # Name / Default / constant expressions
    body: Block | None  # None: fall through to the next case


@dataclass(slots=True)
class Switch(Stmt):
    expr: Expr
    cases: list[SwitchCase]


@dataclass(slots=True)
class Exit(Stmt):
    """``exit;``."""


@dataclass(slots=True)
class Return(Stmt):
    value: Expr | None


@dataclass(slots=True)
class Empty(Stmt):
    """``;``."""


@dataclass(slots=True)
class VarDecl(Stmt):
    type: TypeRef
    name: str
    init: Expr | None
    const: bool = False
    annos: list[Annotation] = field(default_factory=list)


# ---- declarations ------------------------------------------------------------------------
@dataclass(slots=True)
class Decl(Node):
    """Base declaration."""

    name: str
    annos: list[Annotation] = field(default_factory=list)


@dataclass(slots=True)
class FieldDecl(Decl):
    type: TypeRef | None = None


@dataclass(slots=True)
class StructDecl(Decl):
    kind: str = "struct"  # struct | header | header_union
    fields: list[FieldDecl] = field(default_factory=list)


@dataclass(slots=True)
class EnumDecl(Decl):
    underlying: TypeRef | None = None
    members: list[tuple[str, Expr | None, SourceLoc]] = field(default_factory=list)


@dataclass(slots=True)
class ErrorDecl(Decl):
    members: list[str] = field(default_factory=list)


@dataclass(slots=True)
class MatchKindDecl(Decl):
    members: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TypedefDecl(Decl):
    type: TypeRef | None = None
    newtype: bool = False  # `type` rather than `typedef`


@dataclass(slots=True)
class ConstDecl(Decl):
    type: TypeRef | None = None
    value: Expr | None = None


@dataclass(slots=True)
class Param(Decl):
    direction: str = ""  # '', 'in', 'out', 'inout'
    type: TypeRef | None = None
    default: Expr | None = None


@dataclass(slots=True)
class MethodProto(Decl):
    ret: TypeRef | None = None
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    abstract: bool = False


@dataclass(slots=True)
class ExternDecl(Decl):
    type_params: list[str] = field(default_factory=list)
    methods: list[MethodProto] = field(default_factory=list)


@dataclass(slots=True)
class FunctionDecl(Decl):
    ret: TypeRef | None = None
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    body: Block | None = None


@dataclass(slots=True)
class TypeProtoDecl(Decl):
    """parser/control/package type declarations (prototypes)."""

    kind: str = ""
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)


@dataclass(slots=True)
class InstanceDecl(Decl):
    type: TypeRef | None = None
    args: list[Arg] = field(default_factory=list)


@dataclass(slots=True)
class ActionDecl(Decl):
    params: list[Param] = field(default_factory=list)
    body: Block | None = None


@dataclass(slots=True)
class KeyElem(Node):
    expr: Expr
    match_kind: str
    annos: list[Annotation] = field(default_factory=list)


@dataclass(slots=True)
class ActionRef(Node):
    name: str
    args: list[Arg]
    annos: list[Annotation] = field(default_factory=list)
    top: bool = False


@dataclass(slots=True)
class EntryDecl(Node):
    keys: list[Expr]
    action: ActionRef
    priority: Expr | None = None
    annos: list[Annotation] = field(default_factory=list)


@dataclass(slots=True)
class TableProp(Node):
    name: str
    value: Any  # list[KeyElem] | list[ActionRef] | list[EntryDecl] | Expr | ActionRef
    const: bool = False
    annos: list[Annotation] = field(default_factory=list)


@dataclass(slots=True)
class TableDecl(Decl):
    props: list[TableProp] = field(default_factory=list)

    def prop(self, name: str) -> TableProp | None:
        """The property called ``name`` or None."""
        for p in self.props:
            if p.name == name:
                return p
        return None


@dataclass(slots=True)
class ValueSetDecl(Decl):
    type: TypeRef | None = None
    size: Expr | None = None


@dataclass(slots=True)
class SelectCase(Node):
    keyset: Expr  # ListExpr for tuples, Default, Mask, Range, ...
    state: str


@dataclass(slots=True)
class SelectExpr(Expr):
    keys: list[Expr]
    cases: list[SelectCase]


@dataclass(slots=True)
class StateDecl(Decl):
    stmts: list[Stmt] = field(default_factory=list)
    transition: Expr | None = None  # Name or SelectExpr; None means reject? (error)


@dataclass(slots=True)
class ParserDecl(Decl):
    params: list[Param] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)
    locals: list[Any] = field(default_factory=list)
    states: list[StateDecl] = field(default_factory=list)


@dataclass(slots=True)
class ControlDecl(Decl):
    params: list[Param] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)
    locals: list[Any] = field(default_factory=list)
    body: Block | None = None


@dataclass(slots=True)
class Program(Node):
    decls: list[Decl]
