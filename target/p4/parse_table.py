"""Parsing of table declarations (keys, actions, entries, properties)."""

from __future__ import annotations

from icefabric.target.p4 import ast as A
from icefabric.target.p4.parse_expr import ExprParser


class TableParser(ExprParser):
    """Table grammar on top of expressions."""

    def parse_table(self, annos: list[A.Annotation]) -> A.TableDecl:
        """Parse a table."""
        loc = self.loc()
        self.pos += 1
        name = self.ident("a table name")
        self.expect("{")
        props: list[A.TableProp] = []
        while not self.accept("}"):
            pannos = self.parse_annos()
            ploc = self.loc()
            const = self.accept("const")
            pname = self.ident("a table property", allow_kw=True)
            if pname == "key":
                self.expect("=")
                self.expect("{")
                keys: list[A.KeyElem] = []
                while not self.accept("}"):
                    kloc = self.loc()
                    e = self.parse_expr()
                    self.expect(":")
                    mk = self.ident("a match kind")
                    kannos = self.parse_annos()
                    self.expect(";")
                    keys.append(A.KeyElem(kloc, e, mk, kannos))
                props.append(A.TableProp(ploc, "key", keys, const, pannos))
            elif pname == "actions":
                self.expect("=")
                self.expect("{")
                acts: list[A.ActionRef] = []
                while not self.accept("}"):
                    aannos = self.parse_annos()
                    acts.append(self.parse_action_ref(aannos))
                    self.expect(";")
                props.append(A.TableProp(ploc, "actions", acts, const, pannos))
            elif pname == "entries":
                self.expect("=")
                self.expect("{")
                ents: list[A.EntryDecl] = []
                while not self.accept("}"):
                    eannos = self.parse_annos()
                    eloc = self.loc()
                    self.accept("const")
                    prio = None
                    if self.at("priority") and self.peek().value == "=":
                        self.pos += 2
                        prio = self.parse_expr()
                        self.expect(":")
                    ks = self.parse_keyset()
                    keys_e = ks.items if isinstance(ks, A.ListExpr) else [ks]
                    self.expect(":")
                    aref = self.parse_action_ref([])
                    eannos += self.parse_annos()
                    self.expect(";")
                    ents.append(A.EntryDecl(eloc, keys_e, aref, prio, eannos))
                props.append(A.TableProp(ploc, "entries", ents, const, pannos))
            elif pname == "default_action":
                self.expect("=")
                props.append(A.TableProp(ploc, pname, self.parse_action_ref([]), const, pannos))
                self.expect(";")
            else:
                self.expect("=")
                val = self.parse_expr()
                self.expect(";")
                props.append(A.TableProp(ploc, pname, val, const, pannos))
        return A.TableDecl(loc, name, annos, props)

    def parse_action_ref(self, annos: list[A.Annotation]) -> A.ActionRef:
        """Parse an action reference with optional arguments."""
        loc = self.loc()
        top = self.accept(".")
        name = self.ident("an action name")
        args: list[A.Arg] = []
        if self.at("("):
            args = self.parse_args()
        return A.ActionRef(loc, name, args, annos, top)
