"""A C-like preprocessor for P4 source: includes, macros and conditionals with line tracking.

Includes resolve only where the caller allows: with ``files`` (a pushed bundle, or ``{}`` for
plain source pushed over P4Runtime) only inside those files and the target's own include folder
(``core.p4``, ``v1model.p4``), never on the switch's disk; without ``files`` (a local compile)
relative to the including file and ``include_dirs`` as well. Expansion is bounded: at most
``MAX_OUTPUT_CHARS`` characters of output in all, ``MAX_LINE_CHARS`` from one source line and
``MAX_MACRO_DEPTH`` nested macro expansions, so a macro bomb fails fast with an error.
"""

from __future__ import annotations

import ast as pyast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from icefabric.files import DataFileError, read_text
from icefabric.target.p4.errors import P4CompileError, SourceLoc

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIRECTIVE = re.compile(r"^\s*#\s*([A-Za-z_]+)\s*(.*)$")
MAX_INCLUDE_DEPTH = 64
MAX_MACRO_DEPTH = 200  # macros expanding macros
MAX_LINE_CHARS = 1 << 20  # characters one source line may expand to (intermediate work included)
MAX_OUTPUT_CHARS = 4 << 20  # characters of preprocessed output (ice.p4: about 70,000)
MAX_IF_BITS = 4096  # bits of a value in an #if expression


@dataclass(slots=True)
class Line:
    """One preprocessed line of text and where it came from."""

    text: str
    file: str
    line: int
    orig: str


@dataclass(slots=True)
class Macro:
    """A ``#define``: object-like when params is None."""

    body: str
    params: list[str] | None = None


@dataclass(slots=True)
class _Cond:
    active: bool  # this branch is being emitted
    taken: bool  # some branch of this #if chain was taken
    parent_active: bool


@dataclass
class Preprocessor:
    """Expand one main file into a list of source lines."""

    include_dirs: Sequence[Path] = ()
    files: Mapping[str, str] | None = None
    defines: dict[str, Macro] = field(default_factory=dict)
    reader: Callable[[Path], str] | None = None
    _out_chars: int = field(default=0, init=False, repr=False)
    _line_budget: int = field(default=MAX_LINE_CHARS, init=False, repr=False)

    def run(self, text: str, filename: str) -> list[Line]:
        """Preprocess ``text`` (the contents of ``filename``)."""
        out: list[Line] = []
        self._out_chars = 0
        self._file(text, filename, None, out, 0)
        return out

    def _read(self, name: str, quoted: bool, current: str, loc: SourceLoc) -> tuple[str, str]:
        if "\x00" in name:
            raise P4CompileError("#include file name contains a NUL character", loc)
        own = None if quoted else _own_include(name)
        if own is not None and name in ("core.p4", "v1model.p4"):
            return own.read_text(encoding="utf-8"), f"<{name}>"
        cur_dir = Path(current).parent if not current.startswith("<") else Path(".")
        if self.files is not None:
            # A pushed program: only its own files and the target's include folder, never disk.
            key = _normalise(str(cur_dir / name).replace("\\", "/"))
            for cand in (key, _normalise(name)):
                if cand in self.files:
                    return self.files[cand], cand
            if own is not None:
                return own.read_text(encoding="utf-8"), f"<{name}>"
            if quoted and name in ("core.p4", "v1model.p4"):  # as p4c: its own copy comes last
                return (INCLUDE_DIR / name).read_text(encoding="utf-8"), f"<{name}>"
            raise P4CompileError(
                f"cannot find include file '{name}': a pushed program includes only its own "
                "bundled files and the target's core.p4/v1model.p4",
                loc,
            )
        paths = [cur_dir / name] if quoted else []
        paths += [Path(d) / name for d in self.include_dirs]
        if own is not None:
            paths.append(own)
        for path in paths:
            if path.is_file():
                try:  # bounded like the output; a FIFO swapped in is refused, not waited on
                    return read_text(path, limit=MAX_OUTPUT_CHARS, what="a P4 include"), str(path)
                except DataFileError as exc:
                    why = str(exc).splitlines()[0].removeprefix(f"{path}: ")
                    raise P4CompileError(f"cannot read include file '{name}': {why}", loc) from None
        if quoted and name in ("core.p4", "v1model.p4"):  # as p4c: its own copy comes last
            return (INCLUDE_DIR / name).read_text(encoding="utf-8"), f"<{name}>"
        raise P4CompileError(f"cannot find include file '{name}'", loc)

    def _file(self, text: str, filename: str, _p: object, out: list[Line], depth: int) -> None:
        if depth > MAX_INCLUDE_DEPTH:
            raise P4CompileError(f"#include nested too deeply in {filename}")
        raw_lines = text.split("\n")
        clean = _strip_comments(text).split("\n")
        stack: list[_Cond] = []
        i = 0
        n = len(clean)
        while i < n:
            lineno = i + 1
            cur = clean[i]
            orig = raw_lines[i] if i < len(raw_lines) else ""
            # Line continuation.
            while cur.endswith("\\") and i + 1 < n:
                i += 1
                cur = cur[:-1] + " " + clean[i]
            i += 1
            active = not stack or stack[-1].active
            m = _DIRECTIVE.match(cur)
            loc = SourceLoc(filename, lineno, max(cur.find("#"), 0) + 1, orig)
            if m:
                self._directive(m.group(1), m.group(2).strip(), loc, stack, active, out, depth)
                continue
            if active:
                self._line_budget = MAX_LINE_CHARS
                expanded = self._expand(cur, loc) if self.defines else cur
                self._out_chars += len(expanded) + 1
                if self._out_chars > MAX_OUTPUT_CHARS:
                    raise P4CompileError(
                        f"preprocessed program exceeds {MAX_OUTPUT_CHARS} characters", loc
                    )
                out.append(Line(expanded, filename, lineno, orig))
        if stack:
            raise P4CompileError(
                "unterminated #if/#ifdef at end of file", SourceLoc(filename, n, 1)
            )

    def _directive(
        self,
        name: str,
        arg: str,
        loc: SourceLoc,
        stack: list[_Cond],
        active: bool,
        out: list[Line],
        depth: int,
    ) -> None:
        if name in ("ifdef", "ifndef"):
            word = arg.split()[0] if arg.split() else ""
            if not word:
                raise P4CompileError(f"#{name} needs a macro name", loc)
            val = (word in self.defines) == (name == "ifdef")
            stack.append(_Cond(active and val, val, active))
        elif name == "if":
            val = bool(self._eval(arg, loc)) if active else False
            stack.append(_Cond(active and val, val, active))
        elif name == "elif":
            if not stack:
                raise P4CompileError("#elif without #if", loc)
            top = stack[-1]
            val = (not top.taken) and top.parent_active and bool(self._eval(arg, loc))
            top.active = top.parent_active and val
            top.taken = top.taken or val
        elif name == "else":
            if not stack:
                raise P4CompileError("#else without #if", loc)
            top = stack[-1]
            top.active = top.parent_active and not top.taken
            top.taken = True
        elif name == "endif":
            if not stack:
                raise P4CompileError("#endif without #if", loc)
            stack.pop()
        elif not active:
            return
        elif name == "define":
            self._define(arg, loc)
        elif name == "undef":
            self.defines.pop(arg.strip(), None)
        elif name == "include":
            m = re.match(r'^"([^"]+)"|^<([^>]+)>', arg)
            if not m:
                raise P4CompileError('#include expects "file" or <file>', loc)
            quoted = m.group(1) is not None
            inc = m.group(1) or m.group(2)
            text, fname = self._read(inc, quoted, loc.file, loc)
            self._file(text, fname, None, out, depth + 1)
        elif name == "error":
            raise P4CompileError(f"#error {arg}", loc)
        elif name in ("warning", "pragma", "line"):
            return
        else:
            raise P4CompileError(f"unknown preprocessor directive #{name}", loc)

    def _define(self, arg: str, loc: SourceLoc) -> None:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(\(([^)]*)\))?\s*(.*)$", arg)
        if not m:
            raise P4CompileError("#define needs a macro name", loc)
        name = m.group(1)
        if m.group(2) is not None and arg[len(name)] == "(":
            params = [p.strip() for p in m.group(3).split(",") if p.strip()]
            self.defines[name] = Macro(m.group(4).strip(), params)
        else:
            body = arg[len(name) :].strip()
            self.defines[name] = Macro(body)

    def _spend(self, n: int, loc: SourceLoc) -> None:
        self._line_budget -= n
        if self._line_budget < 0:
            raise P4CompileError(
                f"macro expansion of this line exceeds {MAX_LINE_CHARS} characters", loc
            )

    def _expand(
        self, text: str, loc: SourceLoc, hide: frozenset[str] = frozenset(), depth: int = 0
    ) -> str:
        if not _IDENT.search(text):
            return text
        if depth > MAX_MACRO_DEPTH:
            raise P4CompileError(f"macros nested more than {MAX_MACRO_DEPTH} deep", loc)
        self._spend(len(text), loc)
        res: list[str] = []
        pos = 0
        n = len(text)
        while pos < n:
            ch = text[pos]
            if ch == '"':
                end = text.find('"', pos + 1)
                end = n - 1 if end < 0 else end
                res.append(text[pos : end + 1])
                pos = end + 1
                continue
            m = _IDENT.match(text, pos)
            if not m or (pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_")):
                res.append(ch)
                pos += 1
                continue
            word = m.group(0)
            pos = m.end()
            mac = self.defines.get(word)
            if mac is None or word in hide:
                res.append(word)
                continue
            if mac.params is None:
                res.append(self._expand(mac.body, loc, hide | {word}, depth + 1))
                continue
            j = pos
            while j < n and text[j] in " \t":
                j += 1
            if j >= n or text[j] != "(":
                res.append(word)
                continue
            args, pos = _macro_args(text, j, loc)
            if len(args) != len(mac.params) and not (len(mac.params) == 0 and args == [""]):
                raise P4CompileError(
                    f"macro {word} expects {len(mac.params)} arguments, got {len(args)}", loc
                )
            mapping = {
                p: self._expand(a, loc, hide, depth + 1)
                for p, a in zip(mac.params, args, strict=False)
            }
            self._spend(
                sum(len(mapping.get(w, w)) for w in _IDENT.findall(mac.body)) + len(mac.body), loc
            )
            body = _IDENT.sub(_substituter(mapping), mac.body)
            res.append(self._expand(body, loc, hide | {word}, depth + 1))
        return "".join(res)

    def _eval(self, expr: str, loc: SourceLoc) -> int:
        self._line_budget = MAX_LINE_CHARS
        expr = re.sub(
            r"defined\s*\(\s*([A-Za-z_]\w*)\s*\)|defined\s+([A-Za-z_]\w*)",
            lambda m: "1" if (m.group(1) or m.group(2)) in self.defines else "0",
            expr,
        )
        expr = self._expand(expr, loc)
        expr = _IDENT.sub("0", expr)
        expr = expr.replace("&&", " and ").replace("||", " or ")
        expr = re.sub(r"!(?!=)", " not ", expr)
        expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr)
        try:
            tree = pyast.parse(expr.strip() or "0", mode="eval")
            return int(_safe_eval(tree.body, loc))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            shown = expr.strip()[:80]
            raise P4CompileError(f"cannot evaluate #if expression '{shown}'", loc) from None


def _substituter(mapping: dict[str, str]) -> Callable[[re.Match[str]], str]:
    def repl(m: re.Match[str]) -> str:
        """Replace one macro parameter by its argument."""
        return mapping.get(m.group(0), m.group(0))

    return repl


def _own_include(name: str) -> Path | None:
    """``name`` in the target's include folder, only when it resolves inside that folder."""
    try:
        path = (INCLUDE_DIR / name).resolve()
        path.relative_to(INCLUDE_DIR)
    except (ValueError, OSError):
        return None
    return path if path.is_file() else None


def _normalise(path: str) -> str:
    parts: list[str] = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts)


def _macro_args(text: str, j: int, loc: SourceLoc) -> tuple[list[str], int]:
    depth = 0
    args: list[str] = []
    cur: list[str] = []
    k = j
    while k < len(text):
        c = text[k]
        if c == "(":
            depth += 1
            if depth == 1:
                k += 1
                continue
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, k + 1
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            k += 1
            continue
        cur.append(c)
        k += 1
    raise P4CompileError("unterminated macro argument list", loc)


_BINOPS: dict[type, Callable[[int, int], int]] = {
    pyast.Add: lambda a, b: a + b,
    pyast.Sub: lambda a, b: a - b,
    pyast.Mult: lambda a, b: a * b,
    pyast.FloorDiv: lambda a, b: a // b if b else 0,
    pyast.Div: lambda a, b: a // b if b else 0,
    pyast.Mod: lambda a, b: a % b if b else 0,
    pyast.LShift: lambda a, b: a << b,
    pyast.RShift: lambda a, b: a >> b,
    pyast.BitAnd: lambda a, b: a & b,
    pyast.BitOr: lambda a, b: a | b,
    pyast.BitXor: lambda a, b: a ^ b,
}
_CMPOPS: dict[type, Callable[[int, int], bool]] = {
    pyast.Eq: lambda a, b: a == b,
    pyast.NotEq: lambda a, b: a != b,
    pyast.Lt: lambda a, b: a < b,
    pyast.LtE: lambda a, b: a <= b,
    pyast.Gt: lambda a, b: a > b,
    pyast.GtE: lambda a, b: a >= b,
}


def _safe_eval(node: pyast.expr, loc: SourceLoc) -> int:
    if isinstance(node, pyast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, pyast.BinOp) and type(node.op) in _BINOPS:
        a, b = _safe_eval(node.left, loc), _safe_eval(node.right, loc)
        if isinstance(node.op, pyast.LShift) and not 0 <= b <= MAX_IF_BITS:
            raise P4CompileError(f"#if expression: shift by {b} is out of range", loc)
        if isinstance(node.op, pyast.RShift) and b < 0:
            raise P4CompileError(f"#if expression: negative shift {b}", loc)
        v = _BINOPS[type(node.op)](a, b)
        if v.bit_length() > MAX_IF_BITS:
            raise P4CompileError(f"#if expression: value wider than {MAX_IF_BITS} bits", loc)
        return v
    if isinstance(node, pyast.UnaryOp):
        v = _safe_eval(node.operand, loc)
        if isinstance(node.op, pyast.Not):
            return int(not v)
        if isinstance(node.op, pyast.USub):
            return -v
        if isinstance(node.op, pyast.Invert):
            return ~v
        return v
    if isinstance(node, pyast.BoolOp):
        vals = [_safe_eval(v, loc) for v in node.values]
        return int(all(vals)) if isinstance(node.op, pyast.And) else int(any(vals))
    if isinstance(node, pyast.Compare):
        left = _safe_eval(node.left, loc)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _safe_eval(right_node, loc)
            if type(op) not in _CMPOPS or not _CMPOPS[type(op)](left, right):
                return 0
            left = right
        return 1
    raise P4CompileError("unsupported construct in #if expression", loc)


def _strip_comments(text: str) -> str:
    """Replace comments by spaces, keeping newlines so line numbers stay right."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def preprocess(
    text: str,
    filename: str,
    *,
    include_dirs: Sequence[Path] = (),
    files: Mapping[str, str] | None = None,
    defines: Mapping[str, str] | None = None,
) -> list[Line]:
    """Preprocess a P4 main file and return its lines with their origins."""
    pp = Preprocessor(include_dirs=include_dirs, files=files)
    for k, v in (defines or {}).items():
        pp.defines[k] = Macro(str(v))
    return pp.run(text, filename)
