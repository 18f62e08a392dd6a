"""Recursive-descent parsing of P4_16 types and expressions (base class of the parser)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import P4CompileError, SourceLoc
from icefabric.target.p4.lexer import KEYWORDS, Token

_T = TypeVar("_T")

BASE_TYPE_KW = frozenset({"bit", "int", "varbit", "bool", "error", "void", "string", "match_kind"})

# Binary operator levels, lowest precedence first (as p4c's grammar).
_LEVELS: list[tuple[str, ...]] = [
    ("||",),
    ("&&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("|",),
    ("^",),
    ("&",),
    ("<<", ">>"),
    ("++", "+", "-", "|+|", "|-|"),
    ("*", "/", "%"),
]


class _Backtrack(Exception):
    """Internal: a speculative parse failed."""


class ExprParser:
    """Token cursor plus type and expression grammar."""

    toks: list[Token]
    pos: int
    type_names: set[str]
    speculating: int

    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.pos = 0
        self.type_names: set[str] = set()
        self.speculating = 0

    # ---- cursor ----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        """The current token."""
        return self.toks[self.pos]

    def peek(self, k: int = 1) -> Token:
        """The token k positions ahead."""
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def loc(self) -> SourceLoc:
        """Location of the current token."""
        return self.tok.loc

    def error(self, msg: str, loc: SourceLoc | None = None) -> P4CompileError:
        """A compile error at the current token (a backtrack signal while speculating)."""
        if self.speculating:
            return _Backtrack()  # type: ignore[return-value]
        return P4CompileError(msg, loc or self.tok.loc)

    def at(self, value: str) -> bool:
        """True when the current token is the operator or word ``value``."""
        t = self.tok
        return t.value == value and t.kind in ("op", "id")

    def accept(self, value: str) -> bool:
        """Consume ``value`` if it is next."""
        if self.at(value):
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> Token:
        """Consume ``value`` or report what was found instead."""
        if not self.at(value):
            got = self.tok.value or "end of input"
            raise self.error(f"expected '{value}' but found '{got}'")
        t = self.tok
        self.pos += 1
        return t

    def ident(self, what: str = "identifier", allow_kw: bool = False) -> str:
        """Consume an identifier."""
        t = self.tok
        if t.kind != "id" or (t.value in KEYWORDS and not allow_kw):
            raise self.error(f"expected {what} but found '{t.value or 'end of input'}'")
        self.pos += 1
        return t.value

    def speculate(self, fn: Callable[..., _T], *args: Any) -> _T | None:
        """Run fn; on failure restore the cursor and return None."""
        save = self.pos
        self.speculating += 1
        try:
            return fn(*args)
        except (_Backtrack, P4CompileError):
            self.pos = save
            return None
        finally:
            self.speculating -= 1

    # ---- annotations --------------------------------------------------------------------------
    def parse_annos(self) -> list[A.Annotation]:
        """Parse zero or more annotations."""
        annos: list[A.Annotation] = []
        while self.at("@"):
            loc = self.loc()
            self.pos += 1
            name = self.ident("an annotation name", allow_kw=True)
            args: list[object] = []
            if self.at("(") and self.tok.adj:
                start = self.pos
                parsed = self.speculate(self.parse_args)
                if parsed is not None:
                    args = [a.expr for a in parsed]
                else:
                    self.pos = start
                    depth = 0
                    while True:
                        t = self.tok
                        if t.kind == "eof":
                            raise self.error("unterminated annotation")
                        self.pos += 1
                        if t.value == "(" and t.kind == "op":
                            depth += 1
                        elif t.value == ")" and t.kind == "op":
                            depth -= 1
                            if depth == 0:
                                break
                        elif depth >= 1:
                            args.append(t.value)
            elif self.at("["):
                depth = 0
                while True:
                    t = self.tok
                    self.pos += 1
                    if t.value == "[":
                        depth += 1
                    elif t.value == "]":
                        depth -= 1
                        if depth == 0:
                            break
            annos.append(A.Annotation(loc, name, args))
        return annos

    # ---- types -----------------------------------------------------------------------------
    def is_type_start(self) -> bool:
        """True when a type starts at the cursor."""
        t = self.tok
        if t.kind != "id":
            return False
        if t.value in BASE_TYPE_KW or t.value == "tuple":
            return True
        return t.value in self.type_names

    def parse_type(self) -> A.TypeRef:
        """Parse a type."""
        loc = self.loc()
        t = self.tok
        if t.kind != "id":
            raise self.error(f"expected a type but found '{t.value}'")
        if t.value in ("bit", "int", "varbit"):
            self.pos += 1
            width: A.Expr | None = None
            if self.accept("<"):
                if self.accept("("):
                    width = self.parse_expr()
                    self.expect(")")
                else:
                    width = self.parse_primary()
                self.expect(">")
            elif t.value != "int":
                width = A.IntLit(loc, 1)
            typ = A.TypeRef(loc, t.value if width is not None else "int_inf", width)
        elif t.value in ("bool", "error", "void", "string", "match_kind"):
            self.pos += 1
            typ = A.TypeRef(loc, t.value)
        elif t.value == "tuple":
            self.pos += 1
            typ = A.TypeRef(loc, "tuple", args=self.parse_type_args())
        elif t.value == "_":
            self.pos += 1
            typ = A.TypeRef(loc, "dontcare")
        else:
            name = self.ident("a type name")
            args: list[A.TypeRef] = []
            if self.at("<"):
                args = self.parse_type_args()
            typ = A.TypeRef(loc, "name", name=name, args=args)
        while self.at("["):
            self.pos += 1
            size = self.parse_expr()
            self.expect("]")
            typ = A.TypeRef(loc, "stack", size, args=[typ])
        return typ

    def parse_type_args(self) -> list[A.TypeRef]:
        """Parse ``<type, ...>`` type arguments."""
        self.expect("<")
        args: list[A.TypeRef] = []
        if not self.at(">"):
            args.append(self.parse_type())
            while self.accept(","):
                args.append(self.parse_type())
        self.expect(">")
        return args

    # ---- expressions -----------------------------------------------------------------------
    def parse_expr(self) -> A.Expr:
        """Parse a expr."""
        # `?:` groups to the left as in p4c's grammar (COLON binds tighter than QUESTION):
        # `a ? b : c ? d : e` is `(a ? b : c) ? d : e`.
        cond = self.parse_binary(0)
        while self.at("?"):
            loc = self.loc()
            self.pos += 1
            a = self.parse_expr()
            self.expect(":")
            b = self.parse_binary(0)
            cond = A.Ternary(loc, cond, a, b)
        return cond

    def _binop_here(self, ops: tuple[str, ...]) -> str | None:
        t = self.tok
        if t.kind != "op":
            return None
        if t.value == ">":
            nxt = self.peek()
            is_shift = nxt.kind == "op" and nxt.value == ">" and nxt.adj
            if is_shift:
                return ">>" if ">>" in ops else None
            return ">" if ">" in ops else None
        if t.value in ops:
            return t.value
        return None

    def parse_binary(self, level: int) -> A.Expr:
        """Parse binary operators from precedence level ``level`` up."""
        if level >= len(_LEVELS):
            return self.parse_unary()
        left = self.parse_binary(level + 1)
        ops = _LEVELS[level]
        while True:
            op = self._binop_here(ops)
            if op is None:
                return left
            loc = self.loc()
            self.pos += 2 if op == ">>" else 1
            right = self.parse_binary(level + 1)
            left = A.Binary(loc, op, left, right)

    def parse_unary(self) -> A.Expr:
        """Parse a unary."""
        loc = self.loc()
        t = self.tok
        if t.kind == "op" and t.value in ("!", "~", "-", "+"):
            self.pos += 1
            e = self.parse_unary()
            return e if t.value == "+" else A.Unary(loc, t.value, e)
        if t.kind == "op" and t.value == "(" and self._looks_like_cast():
            self.pos += 1
            typ = self.parse_type()
            self.expect(")")
            return A.Cast(loc, typ, self.parse_unary())
        return self.parse_postfix(self.parse_primary())

    def _looks_like_cast(self) -> bool:
        nxt = self.peek()
        if nxt.kind != "id":
            return False
        if nxt.value in ("bit", "int", "varbit", "bool", "tuple"):
            return True
        if nxt.value in self.type_names:
            after = self.peek(2)
            return after.value in (")", "<", "[") and after.kind == "op"
        return False

    def parse_postfix(self, e: A.Expr) -> A.Expr:
        """Parse member access, indexing, slices and calls."""
        while True:
            loc = e.loc
            if self.at("."):
                self.pos += 1
                name = self.ident("a member name", allow_kw=True)
                e = A.Member(loc, e, name)
            elif self.at("["):
                self.pos += 1
                first = self.parse_expr()
                if self.accept(":"):
                    lo = self.parse_expr()
                    self.expect("]")
                    e = A.Slice(loc, e, first, lo)
                else:
                    self.expect("]")
                    e = A.Index(loc, e, first)
            elif self.at("("):
                e = A.Call(loc, e, [], self.parse_args())
            elif self.at("<") and isinstance(e, (A.Name, A.Member)):
                targs = self.speculate(self._type_args_then_paren)
                if targs is None:
                    return e
                e = A.Call(loc, e, targs, self.parse_args())
            else:
                return e

    def _type_args_then_paren(self) -> list[A.TypeRef]:
        args = self.parse_type_args()
        if not self.at("("):
            raise _Backtrack()
        return args

    def parse_args(self) -> list[A.Arg]:
        """Parse a call argument list."""
        self.expect("(")
        args: list[A.Arg] = []
        if self.accept(")"):
            return args
        while True:
            loc = self.loc()
            name = None
            if self.tok.kind == "id" and self.peek().value == "=" and self.peek().kind == "op":
                name = self.ident(allow_kw=True)
                self.pos += 1
            if self.at("_") and self.peek().value in (",", ")"):
                self.pos += 1
                args.append(A.Arg(loc, name, A.DontCare(loc)))
            else:
                args.append(A.Arg(loc, name, self.parse_expr()))
            if self.accept(")"):
                return args
            self.expect(",")

    def parse_primary(self) -> A.Expr:
        """Parse a primary."""
        loc = self.loc()
        t = self.tok
        if t.kind == "int":
            self.pos += 1
            return A.IntLit(loc, t.ival, t.width, t.signed)
        if t.kind == "str":
            self.pos += 1
            return A.StrLit(loc, t.value)
        if t.kind == "op":
            if t.value == "(":
                self.pos += 1
                e = self.parse_expr()
                if self.at(","):
                    items = [e]
                    while self.accept(","):
                        items.append(self.parse_expr())
                    self.expect(")")
                    return A.ListExpr(loc, items)
                self.expect(")")
                return e
            if t.value == "{#}":
                self.pos += 1
                return A.InvalidHeader(loc)
            if t.value == "{":
                return self.parse_brace_expr()
            if t.value == ".":
                self.pos += 1
                return A.Name(loc, self.ident(), top=True)
            raise self.error(f"expected an expression but found '{t.value}'")
        if t.kind == "id":
            if t.value in ("true", "false"):
                self.pos += 1
                return A.BoolLit(loc, t.value == "true")
            if t.value in ("bit", "int", "varbit", "bool", "tuple") or (
                t.value in self.type_names and self.peek().value == "<"
            ):
                # A type used as an expression: e.g. bit<8> in a call or `T.minSizeInBits()`.
                typ = self.parse_type()
                return A.TypeExpr(loc, typ)
            if t.value in ("error", "this") or t.value not in KEYWORDS:
                self.pos += 1
                return A.Name(loc, t.value)
            if t.value == "default":
                self.pos += 1
                return A.Default(loc)
            if t.value == "_":
                self.pos += 1
                return A.DontCare(loc)
        raise self.error(f"expected an expression but found '{t.value or 'end of input'}'")

    def parse_brace_expr(self) -> A.Expr:
        """Parse ``{a, b}`` or ``{f = a}``."""
        loc = self.expect("{").loc
        if self.accept("}"):
            return A.ListExpr(loc, [])
        if self.tok.kind == "id" and self.peek().value == "=" and self.peek().kind == "op":
            fields: list[tuple[str, A.Expr]] = []
            while True:
                name = self.ident("a field name", allow_kw=True)
                self.expect("=")
                fields.append((name, self.parse_expr()))
                if self.accept("}"):
                    return A.StructExpr(loc, fields)
                self.expect(",")
                if self.accept("}"):
                    return A.StructExpr(loc, fields)
        items = [self.parse_expr()]
        while self.accept(","):
            if self.at("}"):
                break
            items.append(self.parse_expr())
        self.expect("}")
        return A.ListExpr(loc, items)

    # ---- keysets (select cases, table entries) ----------------------------------------------
    def parse_keyset_elem(self) -> A.Expr:
        """Parse one keyset element (value, mask, range, default)."""
        loc = self.loc()
        if self.at("default") or (self.at("_") and self.peek().value in (",", ")", ":")):
            self.pos += 1
            return A.Default(loc)
        e = self.parse_expr()
        if self.accept("&&&"):
            return A.Mask(loc, e, self.parse_expr())
        if self.accept(".."):
            return A.Range(loc, e, self.parse_expr())
        return e

    def parse_keyset(self) -> A.Expr:
        """Parse a keyset: one element or a parenthesised tuple."""
        loc = self.loc()
        if self.at("("):
            save = self.pos
            self.pos += 1
            first = self.parse_keyset_elem()
            if self.at(","):
                items = [first]
                while self.accept(","):
                    items.append(self.parse_keyset_elem())
                self.expect(")")
                return A.ListExpr(loc, items)
            if self.accept(")") and self.at(":"):
                return A.ListExpr(loc, [first])
            self.pos = save
        return self.parse_keyset_elem()
