"""The control-plane API a P4 program declares (tables, keys, actions, parameters), read from source.

No compiler is needed: the program is preprocessed and tokenised by the embedded target's front
end, then the controls are walked from the pipeline's top-level controls (``IceIngress``,
``IceEgress``) through their control instances, naming every table and action as P4Runtime does
(``IceIngress.path_select.flow_path``, ``IceEgress.ecn.set_ecn_thresholds``).  The
architecture's own include files (``core.p4``, ``v1model.p4``, ``tna.p4``, ``t2na.p4``) are not
read: they declare types and externs, never tables.  That is what lets one unit test compare the
v1model program with the TNA program on a machine without Tofino headers
(tests/unit/test_p4src_api.py), and check this reader against the embedded compiler's P4Info.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from icefabric.target.p4.lexer import Token, tokenize
from icefabric.target.p4.preprocess import preprocess

ARCH_INCLUDES = ("core.p4", "v1model.p4", "tna.p4", "t2na.p4")
ROOTS = ("IceIngress", "IceEgress")


@dataclass(frozen=True)
class Table:
    """One table: its keys as (P4Runtime name, match kind) and its actions' full names."""

    keys: tuple[tuple[str, str], ...]
    actions: frozenset[str]


@dataclass
class Api:
    """Tables and the actions they reference, by full P4Runtime name.

    An action's parameters are (name, width); the width is the bit count, or the type's name
    when it is an architecture type this reader cannot see (e.g. ``PortId_t``).
    """

    tables: dict[str, Table] = field(default_factory=dict)
    actions: dict[str, tuple[tuple[str, int | str], ...]] = field(default_factory=dict)


@dataclass
class _Control:
    actions: dict[str, tuple[tuple[str, int | str], ...]] = field(default_factory=dict)
    tables: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = field(
        default_factory=dict
    )
    instances: dict[str, str] = field(default_factory=dict)  # instance name -> control type
    # @name annotations of actions and tables: local name -> the annotation's name (relative to
    # the control instance, or absolute when it starts with '.', as P4Runtime names it).
    names: dict[str, str] = field(default_factory=dict)


class ApiError(ValueError):
    """The source does not have the shape this reader expects (names the file and line)."""


def read_api(main: Path | str, defines: Mapping[str, str] | None = None) -> Api:
    """The control-plane API of the program whose main file is ``main``."""
    path = Path(main)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ARCH_INCLUDES:
            (Path(tmp) / name).write_text("")
        lines = preprocess(
            path.read_text(encoding="utf-8"), str(path), include_dirs=[Path(tmp)], defines=defines
        )
    return _Reader(tokenize(lines)).api()


class _Reader:
    def __init__(self, toks: Sequence[Token]) -> None:
        self.toks = toks
        self.pos = 0
        self.widths: dict[str, int | str] = {"bool": 1}
        self.controls: dict[str, _Control] = {}

    # ---- token helpers ------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def at(self, value: str) -> bool:
        return self.tok.kind != "eof" and self.tok.value == value

    def fail(self, what: str) -> ApiError:
        loc = self.tok.loc
        return ApiError(f"{loc.file}:{loc.line}: expected {what}, found '{self.tok.value}'")

    def expect(self, value: str) -> None:
        if not self.at(value):
            raise self.fail(f"'{value}'")
        self.pos += 1

    def ident(self) -> str:
        if self.tok.kind != "id":
            raise self.fail("a name")
        self.pos += 1
        return self.toks[self.pos - 1].value

    def skip_balanced(self) -> list[Token]:
        """Skip from an opening bracket to its match; return the tokens inside."""
        pairs = {"(": ")", "{": "}", "[": "]"}
        close = pairs[self.tok.value]
        opening = self.tok.value
        depth = 0
        start = self.pos + 1
        while self.tok.kind != "eof":
            if self.tok.value == opening:
                depth += 1
            elif self.tok.value == close:
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return list(self.toks[start : self.pos - 1])
            self.pos += 1
        raise self.fail(f"'{close}'")

    def skip_statement(self) -> None:
        """Skip to the end of the current declaration: its ';' or a closing '}' block."""
        while self.tok.kind != "eof":
            if self.tok.value in ("(", "["):
                self.skip_balanced()
            elif self.tok.value == "{":
                self.skip_balanced()
                if self.at(";"):
                    self.pos += 1
                return
            elif self.tok.value == ";":
                self.pos += 1
                return
            else:
                self.pos += 1

    def annotations(self) -> dict[str, str]:
        out: dict[str, str] = {}
        while self.at("@"):
            self.pos += 1
            name = self.ident()
            body = self.skip_balanced() if self.at("(") else []
            out[name] = body[0].value if body and body[0].kind == "str" else ""
        return out

    # ---- program ------------------------------------------------------------------------------
    def api(self) -> Api:
        while self.tok.kind != "eof":
            self.annotations()
            if self.at("typedef"):
                self.pos += 1
                width = self.type_width()
                name = self.ident()
                self.widths[name] = width
                self.expect(";")
            elif self.at("control"):
                self.pos += 1
                name = self.ident()
                while self.at("<") or self.tok.kind == "id":  # type parameters (prototypes)
                    self.pos += 1
                    if self.at(">"):
                        self.pos += 1
                        break
                    if self.at(","):
                        self.pos += 1
                self.skip_balanced()  # parameters
                if self.at(";"):  # a control type declaration (architecture prototype)
                    self.pos += 1
                    continue
                self.controls[name] = self.control_body()
            else:
                self.skip_statement()
        api = Api()
        for root in ROOTS:
            if root not in self.controls:
                raise ApiError(f"no control {root} in the program")
            self.collect(root, root, api, depth=0)
        return api

    def type_width(self) -> int | str:
        if self.at("bit") or self.at("int"):
            self.pos += 1
            self.expect("<")
            width: int | str = int(self.tok.ival) if self.tok.kind == "int" else self.tok.value
            self.pos += 1
            self.expect(">")
            return width
        name = self.ident()
        return self.widths.get(name, name)

    def params(self, toks: list[Token]) -> tuple[tuple[str, int | str], ...]:
        """Directionless parameters (those the controller supplies) as (name, width)."""
        out: list[tuple[str, int | str]] = []
        groups: list[list[Token]] = [[]]
        depth = 0
        for t in toks:
            if t.value in ("<", "(") and t.kind == "op":
                depth += 1
            elif t.value in (">", ")") and t.kind == "op":
                depth -= 1
            if t.value == "," and depth == 0:
                groups.append([])
            else:
                groups[-1].append(t)
        for g in groups:
            g = [t for t in g if not t.value.startswith("@")]
            if not g or g[0].value in ("in", "out", "inout"):
                continue
            name = g[-1].value
            if g[0].value in ("bit", "int"):
                width: int | str = int(g[2].ival)
            else:
                width = self.widths.get(g[0].value, g[0].value)
            out.append((name, width))
        return tuple(out)

    def control_body(self) -> _Control:
        ctl = _Control()
        self.expect("{")
        while not self.at("}"):
            if self.tok.kind == "eof":
                raise self.fail("'}'")
            annos = self.annotations()
            if self.at("action"):
                self.pos += 1
                name = self.ident()
                ctl.actions[name] = self.params(self.skip_balanced())
                self.skip_balanced()  # body
                if annos.get("name"):
                    ctl.names[name] = annos["name"]
            elif self.at("table"):
                self.pos += 1
                name = self.ident()
                ctl.tables[name] = self.table_body()
                if annos.get("name"):
                    ctl.names[name] = annos["name"]
            elif self.at("apply"):
                self.pos += 1
                self.skip_balanced()
            elif (
                self.tok.kind == "id"
                and self.toks[self.pos + 1].value == "("
                and self.toks[self.pos + 2].value == ")"
                and self.toks[self.pos + 3].kind == "id"
                and self.toks[self.pos + 4].value == ";"
            ):
                ctl.instances[self.toks[self.pos + 3].value] = self.tok.value
                self.pos += 5
            else:
                self.skip_statement()
        self.pos += 1
        return ctl

    def table_body(self) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        keys: list[tuple[str, str]] = []
        actions: list[str] = []
        self.expect("{")
        while not self.at("}"):
            prop = self.ident()
            if prop in ("key", "actions") and self.at("="):
                self.pos += 1
                self.expect("{")
                while not self.at("}"):
                    if prop == "key":
                        expr: list[str] = []
                        while not self.at(":"):
                            expr.append(self.tok.value)
                            self.pos += 1
                        self.pos += 1
                        kind = self.ident()
                        annos = self.annotations()
                        keys.append((annos.get("name") or "".join(expr), kind))
                    else:
                        self.annotations()
                        actions.append(self.ident())
                        if self.at("("):
                            self.skip_balanced()
                    self.expect(";")
                self.pos += 1
            else:
                self.skip_statement()
        self.pos += 1
        return tuple(keys), tuple(actions)

    def collect(self, ctype: str, prefix: str, api: Api, depth: int) -> None:
        if depth > 16:
            raise ApiError(f"control instances nested deeper than 16 at {prefix}")
        ctl = self.controls[ctype]

        def qualified(local: str) -> str:
            name = ctl.names.get(local, local)
            return name[1:] if name.startswith(".") else f"{prefix}.{name}"

        for tname, (keys, acts) in ctl.tables.items():
            full: list[str] = []
            for a in acts:
                if a in ctl.actions:
                    full.append(qualified(a))
                    api.actions[qualified(a)] = ctl.actions[a]
                else:  # a top-level action (NoAction)
                    full.append(a)
                    api.actions.setdefault(a, ())
            api.tables[qualified(tname)] = Table(keys, frozenset(full))
        for inst, child in ctl.instances.items():
            if child in self.controls:
                self.collect(child, f"{prefix}.{inst}", api, depth + 1)
