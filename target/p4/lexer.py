"""Tokeniser for preprocessed P4_16 source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from icefabric.target.p4.errors import P4CompileError, SourceLoc
from icefabric.target.p4.preprocess import Line

KEYWORDS = frozenset(
    [
        "abstract",
        "action",
        "apply",
        "bit",
        "bool",
        "const",
        "control",
        "default",
        "else",
        "entries",
        "enum",
        "error",
        "exit",
        "extern",
        "false",
        "header",
        "header_union",
        "if",
        "in",
        "inout",
        "int",
        "key",
        "list",
        "match_kind",
        "out",
        "package",
        "parser",
        "priority",
        "return",
        "select",
        "state",
        "string",
        "struct",
        "switch",
        "table",
        "this",
        "transition",
        "true",
        "tuple",
        "type",
        "typedef",
        "value_set",
        "varbit",
        "void",
        "_",
    ]
)

# Longest first.
_OPS = [
    "{#}", "&&&", "|+|", "|-|", "...", "..", "++", "&&", "||", "==", "!=", "<=", ">=", "<<",
    "{", "}", "(", ")", "[", "]", "<", ">", ";", ":", ",", ".", "=", "+", "-", "*", "/",
    "%", "!", "~", "&", "|", "^", "?", "@",
]  # fmt: skip
_OP_RE = "|".join(re.escape(o) for o in _OPS)
_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<int>(?:\d+[ws])?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[0-9_]*))"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r'|(?P<str>"(?:[^"\\]|\\.)*")'
    rf"|(?P<op>{_OP_RE})"
)


@dataclass(slots=True)
class Token:
    """One token: kind is 'id', 'int', 'str', 'op' or 'eof'."""

    kind: str
    value: str
    loc: SourceLoc
    adj: bool = False  # no whitespace between this token and the previous one
    ival: int = 0
    width: int | None = None
    signed: bool = False


def _parse_int(text: str, loc: SourceLoc) -> tuple[int, int | None, bool]:
    width: int | None = None
    signed = False
    m = re.match(r"(\d+)([ws])(.*)$", text)
    if m:
        width = int(m.group(1))
        signed = m.group(2) == "s"
        text = m.group(3)
    body = text.replace("_", "")
    try:
        if body[:2] in ("0x", "0X"):
            val = int(body[2:], 16)
        elif body[:2] in ("0b", "0B"):
            val = int(body[2:], 2)
        elif body[:2] in ("0o", "0O"):
            val = int(body[2:], 8)
        elif body[:2] in ("0d", "0D"):
            val = int(body[2:], 10)
        else:
            val = int(body, 10)
    except ValueError:
        raise P4CompileError(f"malformed integer literal '{text}'", loc) from None
    if width is not None and width <= 0:
        raise P4CompileError("integer literal width must be positive", loc)
    return val, width, signed


def tokenize(lines: list[Line]) -> list[Token]:
    """Split preprocessed lines into tokens, each with its source location."""
    toks: list[Token] = []
    for ln in lines:
        text = ln.text
        pos = 0
        n = len(text)
        adj = False
        while pos < n:
            m = _TOKEN.match(text, pos)
            if not m:
                loc = SourceLoc(ln.file, ln.line, pos + 1, ln.orig)
                raise P4CompileError(f"unexpected character '{text[pos]}'", loc)
            kind = m.lastgroup or ""
            val = m.group(0)
            if kind == "ws":
                adj = False
                pos = m.end()
                continue
            loc = SourceLoc(ln.file, ln.line, pos + 1, ln.orig)
            if kind == "int":
                # An identifier must not start right after digits (e.g. 8w5x).
                tok = Token("int", val, loc, adj)
                tok.ival, tok.width, tok.signed = _parse_int(val, loc)
            elif kind == "str":
                tok = Token("str", val[1:-1], loc, adj)
            else:
                tok = Token(kind, val, loc, adj)
            toks.append(tok)
            adj = True
            pos = m.end()
    last = lines[-1] if lines else Line("", "<empty>", 1, "")
    toks.append(Token("eof", "", SourceLoc(last.file, last.line, len(last.text) + 1, last.orig)))
    return toks
