"""Generate ``icefabric.p4src.ice_p4``: what Python needs to know about ``p4src/ice.p4``.

One module, written from the program itself, holds every P4Runtime name the controller writes
(tables, actions, counters, direct counters, registers), every integer constant of the program
(``const`` declarations and ``#define`` values: EtherTypes, ports, roles, modes, path kinds, punt
and drop reasons, clone sessions, sizes, ``CPU_PORT``), the layout of every fixed-size header
(fields, widths, bytes) and the drop reasons' names.  Controller, hosts, telemetry and tests
import it; nothing else spells those values.

    python -m icefabric.p4src.generate            # rewrite p4src/ice_p4.py
    python -m icefabric.p4src.generate --check    # exit 1 if it is out of date

Names come from the P4Info the embedded target's compiler builds (the same names p4c gives,
checked by tests/dataplane/test_ice_p4info.py); constants and headers from the program's parsed
source.  tests/unit/test_p4src_generated.py fails when the module and the sources disagree.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from pathlib import Path

from icefabric.p4src import ICE_P4, P4SRC_DIR

OUTPUT = P4SRC_DIR / "ice_p4.py"
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Z][A-Z0-9_]*)\s+(0x[0-9A-Fa-f]+|\d+)\s*$", re.M)
_NON_IDENT = re.compile(r"[^0-9A-Za-z]+")


class GenerateError(ValueError):
    """The program has something the module cannot express (names the declaration)."""


def _ident(prefix: str, name: str) -> str:
    text = re.sub(r"_+", "_", f"{prefix}_{_NON_IDENT.sub('_', name).strip('_')}").upper()
    return "_" + text if keyword.iskeyword(text) else text


def _names(program_path: Path) -> list[str]:
    from icefabric.target.compiler import load_program

    p4info = load_program(program_path).p4info
    sections = [
        ("tables", "TABLE", p4info.tables),
        ("actions", "ACTION", p4info.actions),
        ("counters", "COUNTER", p4info.counters),
        ("direct counters", "DIRECT_COUNTER", p4info.direct_counters),
        ("registers", "REGISTER", p4info.registers),
    ]
    lines: list[str] = []
    for title, prefix, objs in sections:
        taken: dict[str, str] = {}
        lines.append(f"\n# {title} (P4Runtime names)")
        for obj in sorted(objs, key=lambda o: o.preamble.name):
            full = obj.preamble.name
            ident = _ident(prefix, obj.preamble.alias or full)
            if ident in taken:
                ident = _ident(prefix, full)
            if ident in taken:
                raise GenerateError(f"{full}: name {ident} clashes with {taken[ident]}")
            taken[ident] = full
            lines.append(f'{ident}: Final = "{full}"')
    return lines


def _source(
    program_path: Path,
) -> tuple[dict[str, int], dict[str, tuple[tuple[str, int], ...]], dict[int, str]]:
    """Integer constants (consts and #defines), fixed-size header layouts and the drop reasons
    (constants of type drop_reason_t other than 0) of the program."""
    from icefabric.target.p4 import ast as A
    from icefabric.target.p4.lexer import tokenize
    from icefabric.target.p4.parser import Parser
    from icefabric.target.p4.preprocess import preprocess

    lines = preprocess(program_path.read_text(encoding="utf-8"), str(program_path))
    own = sorted({ln.file for ln in lines if not ln.file.startswith("<")})
    consts: dict[str, int] = {}
    for f in own:
        for m in _DEFINE.finditer(Path(f).read_text(encoding="utf-8")):
            consts[m.group(1)] = int(m.group(2), 0)
    program = Parser(tokenize(lines)).parse_program()
    widths: dict[str, int] = {}

    def width(t: A.TypeRef | None, where: str) -> int | None:
        if t is None:
            return None
        if t.kind == "bit" and isinstance(t.width, A.IntLit):
            return t.width.value
        if t.kind == "bool":
            return 1
        if t.kind == "name" and t.name in widths:
            return widths[t.name]
        if t.kind == "varbit":
            return None
        raise GenerateError(f"{where}: type {t.kind} {t.name} has no fixed width")

    headers: dict[str, tuple[tuple[str, int], ...]] = {}
    drops: dict[int, str] = {}
    for d in program.decls:
        if d.loc.file.startswith("<"):
            continue
        if isinstance(d, A.TypedefDecl):
            if d.type is None or d.type.kind not in ("bit", "bool", "name"):
                continue
            if d.type.kind == "name" and d.type.name not in widths:
                continue  # an alias of a struct (v1model's ice_ingress_headers_t)
            w = width(d.type, d.name)
            if w is not None:
                widths[d.name] = w
        elif isinstance(d, A.ConstDecl):
            if isinstance(d.value, A.IntLit):
                consts[d.name] = d.value.value
                if d.type is not None and d.type.name == "drop_reason_t" and d.value.value:
                    drops[d.value.value] = d.name
            elif isinstance(d.value, A.BoolLit):
                consts[d.name] = int(d.value.value)
        elif isinstance(d, A.StructDecl) and d.kind == "header":
            fields = [(f.name, width(f.type, f"{d.name}.{f.name}")) for f in d.fields]
            if all(w is not None for _, w in fields):
                headers[d.name] = tuple((n, int(w or 0)) for n, w in fields)
    return consts, headers, drops


def generate(program_path: Path = ICE_P4) -> str:
    """The text of the generated module for ``program_path``."""
    consts, headers, drop_names = _source(program_path)
    out = [
        f'"""What Python needs to know about p4src/{program_path.name}: names, constants, header',
        "layouts, drop reasons.",
        "",
        "Generated by `python -m icefabric.p4src.generate` from the P4 sources; do not edit.",
        'tests/unit/test_p4src_generated.py fails when this file and the sources disagree."""',
        "",
        "from typing import Final",
    ]
    out += _names(program_path)
    out.append("\n# integer constants (const declarations and #define values)")
    sizes: dict[str, int] = {}
    for name, fields in headers.items():
        bits = sum(w for _, w in fields)
        if bits % 8:
            raise GenerateError(f"header {name} is {bits} bits, not whole bytes")
        sizes[_ident("", name.removesuffix("_t")).lstrip("_") + "_BYTES"] = bits // 8
    for name, value in sizes.items():
        if name in consts and consts[name] != value:
            raise GenerateError(
                f"{name}: the constant says {consts[name]}, the header is {value} bytes"
            )
    for name in sorted(consts):
        out.append(f"{name}: Final = {consts[name]}")
    out.append("\n# header sizes in bytes (fixed-size headers)")
    for name in sorted(sizes):
        if name not in consts:
            out.append(f"{name}: Final = {sizes[name]}")
    out.append("\n# header layouts: (field, bits), first on the wire first")
    out.append("HEADERS: Final[dict[str, tuple[tuple[str, int], ...]]] = {")
    for name in sorted(headers):
        out.append(f'    "{name}": (')
        for field_name, w in headers[name]:
            out.append(f'        ("{field_name}", {w}),')
        out.append("    ),")
    out.append("}")
    out.append("\n# DROP_REASON_* value -> name (IceIngress.drop_reason_counter index)")
    out.append("DROP_REASONS: Final[dict[int, str]] = {")
    for value, name in sorted(drop_names.items()):
        spelled = name.removeprefix("DROP_REASON_").lower().replace("_", "-")
        out.append(f'    {value}: "{spelled}",')
    out.append("}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.p4src.generate",
        description="Write icefabric.p4src.ice_p4 (names, constants, header layouts, drop "
        "reasons) from p4src/ice.p4.",
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if the module is out of date")
    ap.add_argument("--out", type=Path, default=OUTPUT, help=f"output file (default {OUTPUT})")
    args = ap.parse_args(argv)
    try:
        text = generate()
    except (GenerateError, ValueError) as exc:
        print(f"generate: {ICE_P4}: {exc}", file=sys.stderr)
        return 2
    current = args.out.read_text(encoding="utf-8") if args.out.exists() else None
    if args.check:
        if current != text:
            print(f"{args.out} is out of date: run python -m icefabric.p4src.generate")
            return 1
        print(f"{args.out} is up to date")
        return 0
    if current != text:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(f"{args.out} unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
