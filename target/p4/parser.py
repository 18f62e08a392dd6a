"""Recursive-descent parser for P4_16 declarations and statements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from icefabric.target.p4 import ast as A
from icefabric.target.p4.errors import SourceLoc
from icefabric.target.p4.lexer import tokenize
from icefabric.target.p4.parse_table import TableParser
from icefabric.target.p4.preprocess import preprocess

_DIRECTIONS = ("in", "out", "inout")


class Parser(TableParser):
    """Parses a whole program (a list of top-level declarations)."""

    def parse_program(self) -> A.Program:
        """Parse every top-level declaration."""
        loc = self.loc()
        decls: list[A.Decl] = []
        while self.tok.kind != "eof":
            if self.accept(";"):
                continue
            decls.append(self.parse_decl())
        return A.Program(loc, decls)

    # ---- declarations -------------------------------------------------------------------------
    def parse_decl(self) -> A.Decl:
        """Parse one top-level declaration."""
        annos = self.parse_annos()
        loc = self.loc()
        t = self.tok
        v = t.value if t.kind == "id" else ""
        if v in ("header", "struct", "header_union"):
            return self.parse_struct(annos)
        if v == "enum":
            return self.parse_enum(annos)
        if v in ("typedef", "type"):
            self.pos += 1
            typ = self.parse_type()
            name = self.ident("a type name")
            self.expect(";")
            self.type_names.add(name)
            return A.TypedefDecl(loc, name, annos, typ, v == "type")
        if v == "const":
            self.pos += 1
            typ = self.parse_type()
            name = self.ident("a constant name")
            self.expect("=")
            val = self.parse_expr()
            self.expect(";")
            return A.ConstDecl(loc, name, annos, typ, val)
        if v in ("error", "match_kind") and self.peek().value == "{":
            self.pos += 2
            members = [self.ident()]
            while self.accept(","):
                if self.at("}"):
                    break
                members.append(self.ident())
            self.expect("}")
            cls = A.ErrorDecl if v == "error" else A.MatchKindDecl
            return cls(loc, v, annos, members)
        if v == "extern":
            return self.parse_extern(annos)
        if v in ("parser", "control"):
            return self.parse_block_decl(annos, v)
        if v == "package":
            self.pos += 1
            name = self.ident()
            tps = self.parse_type_params()
            params = self.parse_params()
            self.expect(";")
            self.type_names.add(name)
            return A.TypeProtoDecl(loc, name, annos, "package", tps, params)
        if v == "action":
            return self.parse_action(annos)
        if self.is_type_start() or t.kind == "id":
            # function declaration or instantiation
            typ = self.parse_type()
            if self.at("("):
                return self.parse_instance_rest(annos, typ, loc)
            name = self.ident("a declaration name")
            if self.at("<") or self.at("("):
                tps = self.parse_type_params()
                params = self.parse_params()
                body = self.parse_block()
                return A.FunctionDecl(loc, name, annos, typ, tps, params, body)
            raise self.error(f"unexpected '{self.tok.value}' after '{name}'")
        raise self.error(f"expected a declaration but found '{t.value or 'end of input'}'")

    def parse_instance_rest(
        self, annos: list[A.Annotation], typ: A.TypeRef, loc: SourceLoc
    ) -> A.InstanceDecl:
        """Parse ``(args) name;`` of an instantiation."""
        args = self.parse_args()
        name = self.ident("an instance name", allow_kw=False)
        if self.at("{"):
            raise self.error("extern instances with initializer blocks are not supported")
        self.expect(";")
        return A.InstanceDecl(loc, name, annos, typ, args)

    def parse_struct(self, annos: list[A.Annotation]) -> A.StructDecl:
        """Parse a struct."""
        loc = self.loc()
        kind = self.tok.value
        self.pos += 1
        name = self.ident("a type name")
        self.type_names.add(name)
        if self.at("<"):
            raise self.error("generic structs and headers are not supported")
        self.expect("{")
        fields: list[A.FieldDecl] = []
        while not self.accept("}"):
            fannos = self.parse_annos()
            floc = self.loc()
            ftyp = self.parse_type()
            fname = self.ident("a field name", allow_kw=True)
            self.expect(";")
            fields.append(A.FieldDecl(floc, fname, fannos, ftyp))
        return A.StructDecl(loc, name, annos, kind, fields)

    def parse_enum(self, annos: list[A.Annotation]) -> A.EnumDecl:
        """Parse a enum."""
        loc = self.loc()
        self.pos += 1
        under = None
        if not (self.tok.kind == "id" and self.peek().value == "{"):
            under = self.parse_type()
        name = self.ident("an enum name")
        self.type_names.add(name)
        self.expect("{")
        members: list[tuple[str, A.Expr | None, SourceLoc]] = []
        while not self.accept("}"):
            mloc = self.loc()
            mname = self.ident("an enum member")
            val = None
            if self.accept("="):
                val = self.parse_expr()
            members.append((mname, val, mloc))
            if not self.accept(","):
                self.expect("}")
                break
        return A.EnumDecl(loc, name, annos, under, members)

    def parse_type_params(self) -> list[str]:
        """Parse optional ``<T, U>`` type parameters."""
        tps: list[str] = []
        if self.accept("<"):
            tps.append(self.ident("a type parameter"))
            while self.accept(","):
                tps.append(self.ident("a type parameter"))
            self.expect(">")
        self.type_names.update(tps)
        return tps

    def parse_params(self) -> list[A.Param]:
        """Parse a params."""
        self.expect("(")
        params: list[A.Param] = []
        if self.accept(")"):
            return params
        while True:
            annos = self.parse_annos()
            loc = self.loc()
            direction = ""
            if self.tok.value in _DIRECTIONS and self.tok.kind == "id":
                direction = self.tok.value
                self.pos += 1
            typ = self.parse_type()
            name = self.ident("a parameter name", allow_kw=True)
            default = None
            if self.accept("="):
                default = self.parse_expr()
            params.append(A.Param(loc, name, annos, direction, typ, default))
            if self.accept(")"):
                return params
            self.expect(",")

    def parse_extern(self, annos: list[A.Annotation]) -> A.Decl:
        """Parse an extern object or extern function declaration."""
        loc = self.loc()
        self.pos += 1
        # extern function:  extern T name<..>(...);   extern object:  extern Name<..> { ... }
        if (
            self.tok.kind == "id"
            and self.peek().value in ("{", "<")
            and not (self.peek().value == "<" and self._is_function_after_type_args())
        ):
            name = self.ident("an extern name")
            self.type_names.add(name)
            tps = self.parse_type_params()
            self.expect("{")
            methods: list[A.MethodProto] = []
            while not self.accept("}"):
                mannos = self.parse_annos()
                mloc = self.loc()
                abstract = self.accept("abstract")
                if self.tok.value == name and self.peek().value == "(":
                    self.pos += 1
                    ret = None
                    mname = name
                else:
                    ret = self.parse_type()
                    mname = self.ident("a method name", allow_kw=True)
                mtps = self.parse_type_params()
                params = self.parse_params()
                self.expect(";")
                methods.append(A.MethodProto(mloc, mname, mannos, ret, mtps, params, abstract))
            return A.ExternDecl(loc, name, annos, tps, methods)
        ret = self.parse_type()
        name = self.ident("a function name")
        tps = self.parse_type_params()
        params = self.parse_params()
        self.expect(";")
        return A.MethodProto(loc, name, annos, ret, tps, params)

    def _is_function_after_type_args(self) -> bool:
        # `extern T name<...>(...)` never has `{` right after the type; `extern Name<T> {`
        depth = 0
        k = self.pos + 1
        while k < len(self.toks):
            v = self.toks[k].value
            if v == "<":
                depth += 1
            elif v == ">":
                depth -= 1
                if depth == 0:
                    return self.toks[k + 1].value != "{"
            k += 1
        return False

    def parse_block_decl(self, annos: list[A.Annotation], kind: str) -> A.Decl:
        """Parse a parser or control (declaration or prototype)."""
        loc = self.loc()
        self.pos += 1
        name = self.ident(f"a {kind} name")
        tps = self.parse_type_params()
        params = self.parse_params()
        if self.accept(";"):
            self.type_names.add(name)
            return A.TypeProtoDecl(loc, name, annos, kind, tps, params)
        if tps:
            raise self.error(f"generic {kind} declarations are not supported", loc)
        ctor: list[A.Param] = []
        if self.at("("):
            ctor = self.parse_params()
        self.expect("{")
        locals_: list[object] = []
        states: list[A.StateDecl] = []
        body: A.Block | None = None
        while not self.accept("}"):
            lannos = self.parse_annos()
            if kind == "parser" and self.at("state"):
                states.append(self.parse_state(lannos))
            elif kind == "control" and self.at("apply"):
                self.pos += 1
                body = self.parse_block()
            else:
                locals_.append(self.parse_local(lannos))
        if kind == "parser":
            return A.ParserDecl(loc, name, annos, params, ctor, locals_, states)
        if body is None:
            raise self.error(f"control {name} has no apply block", loc)
        return A.ControlDecl(loc, name, annos, params, ctor, locals_, body)

    def parse_local(self, annos: list[A.Annotation]) -> object:
        """Parse a control/parser-local declaration."""
        loc = self.loc()
        v = self.tok.value
        if v == "action":
            return self.parse_action(annos)
        if v == "table":
            return self.parse_table(annos)
        if v == "const":
            self.pos += 1
            typ = self.parse_type()
            name = self.ident()
            self.expect("=")
            val = self.parse_expr()
            self.expect(";")
            return A.VarDecl(loc, typ, name, val, const=True, annos=annos)
        if v == "value_set":
            self.pos += 1
            targs = self.parse_type_args()
            if len(targs) != 1:
                raise self.error("value_set takes one type argument", loc)
            self.expect("(")
            size = self.parse_expr()
            self.expect(")")
            name = self.ident()
            self.expect(";")
            return A.ValueSetDecl(loc, name, annos, targs[0], size)
        typ = self.parse_type()
        if self.at("("):
            return self.parse_instance_rest(annos, typ, loc)
        name = self.ident("a variable name")
        init = None
        if self.accept("="):
            init = self.parse_expr()
        self.expect(";")
        return A.VarDecl(loc, typ, name, init, annos=annos)

    def parse_action(self, annos: list[A.Annotation]) -> A.ActionDecl:
        """Parse a action."""
        loc = self.loc()
        self.pos += 1
        name = self.ident("an action name")
        params = self.parse_params()
        body = self.parse_block()
        return A.ActionDecl(loc, name, annos, params, body)

    # ---- parser states ------------------------------------------------------------------------
    def parse_state(self, annos: list[A.Annotation]) -> A.StateDecl:
        """Parse a state."""
        loc = self.loc()
        self.pos += 1
        name = self.ident("a state name")
        self.expect("{")
        stmts: list[A.Stmt] = []
        trans: A.Expr | None = None
        while not self.accept("}"):
            if self.at("transition"):
                tloc = self.loc()
                self.pos += 1
                if self.at("select"):
                    trans = self.parse_select()
                else:
                    trans = A.Name(tloc, self.ident("a state name"))
                    self.expect(";")
                self.expect("}")
                break
            stmts.append(self.parse_stmt())
        if trans is None:
            trans = A.Name(loc, "reject")
        return A.StateDecl(loc, name, annos, stmts, trans)

    def parse_select(self) -> A.SelectExpr:
        """Parse a select."""
        loc = self.loc()
        self.pos += 1
        self.expect("(")
        keys = [self.parse_expr()]
        while self.accept(","):
            keys.append(self.parse_expr())
        self.expect(")")
        self.expect("{")
        cases: list[A.SelectCase] = []
        while not self.accept("}"):
            self.parse_annos()
            cloc = self.loc()
            ks = self.parse_keyset()
            self.expect(":")
            st = self.ident("a state name")
            self.expect(";")
            cases.append(A.SelectCase(cloc, ks, st))
        return A.SelectExpr(loc, keys, cases)

    # ---- statements ---------------------------------------------------------------------------
    def parse_block(self) -> A.Block:
        """Parse a block."""
        loc = self.expect("{").loc
        stmts: list[A.Stmt] = []
        while not self.accept("}"):
            if self.tok.kind == "eof":
                raise self.error("unexpected end of input inside a block")
            stmts.append(self.parse_stmt())
        return A.Block(loc, stmts)

    def parse_stmt(self) -> A.Stmt:
        """Parse a stmt."""
        annos = self.parse_annos()
        loc = self.loc()
        t = self.tok
        v = t.value if t.kind in ("id", "op") else ""
        if v == "{":
            return self.parse_block()
        if v == ";":
            self.pos += 1
            return A.Empty(loc)
        if v == "if":
            self.pos += 1
            self.expect("(")
            cond = self.parse_expr()
            self.expect(")")
            then = self.parse_stmt()
            other = self.parse_stmt() if self.accept("else") else None
            return A.If(loc, cond, then, other)
        if v == "exit":
            self.pos += 1
            self.expect(";")
            return A.Exit(loc)
        if v == "return":
            self.pos += 1
            val = None if self.at(";") else self.parse_expr()
            self.expect(";")
            return A.Return(loc, val)
        if v == "switch":
            return self.parse_switch()
        if v == "const":
            self.pos += 1
            typ = self.parse_type()
            name = self.ident()
            self.expect("=")
            val = self.parse_expr()
            self.expect(";")
            return A.VarDecl(loc, typ, name, val, const=True, annos=annos)
        if t.kind == "id" and self._is_decl_start():
            typ = self.parse_type()
            name = self.ident("a variable name")
            init = self.parse_expr() if self.accept("=") else None
            self.expect(";")
            return A.VarDecl(loc, typ, name, init, annos=annos)
        e = self.parse_expr()
        if self.accept("="):
            rhs = self.parse_expr()
            self.expect(";")
            return A.Assign(loc, e, rhs)
        self.expect(";")
        if not isinstance(e, A.Call):
            raise self.error("expected an assignment or a method call", loc)
        return A.CallStmt(loc, e)

    def _is_decl_start(self) -> bool:
        t = self.tok
        if t.value in ("bit", "int", "varbit", "bool", "tuple") or (
            t.value == "error" and self.peek().kind == "id"
        ):
            return True
        if t.value in self.type_names:
            nxt = self.peek()
            if nxt.kind == "id" or nxt.value == "<":
                return True
            if nxt.value == "[":
                return self.speculate(self._decl_probe) is not None
        return False

    def _decl_probe(self) -> bool:
        save = self.pos
        self.parse_type()
        ok = self.tok.kind == "id"
        self.pos = save
        if not ok:
            raise self.error("not a declaration")
        return True

    def parse_switch(self) -> A.Switch:
        """Parse a switch."""
        loc = self.loc()
        self.pos += 1
        self.expect("(")
        e = self.parse_expr()
        self.expect(")")
        self.expect("{")
        cases: list[A.SwitchCase] = []
        while not self.accept("}"):
            cloc = self.loc()
            if self.at("default"):
                self.pos += 1
                label: A.Expr = A.Default(cloc)
            else:
                label = self.parse_expr()
            self.expect(":")
            body = self.parse_block() if self.at("{") else None
            cases.append(A.SwitchCase(cloc, [label], body))
        return A.Switch(loc, e, cases)


def parse_text(
    text: str,
    filename: str,
    *,
    include_dirs: Sequence[Path] = (),
    files: Mapping[str, str] | None = None,
    defines: Mapping[str, str] | None = None,
) -> A.Program:
    """Preprocess, tokenise and parse one P4 main file."""
    lines = preprocess(text, filename, include_dirs=include_dirs, files=files, defines=defines)
    return Parser(tokenize(lines)).parse_program()
