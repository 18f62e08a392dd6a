"""Compile a P4 program with the embedded target's compiler: check it, write P4Info or the code.

python -m icefabric.target.compiler ice.p4 [--p4info-out FILE] [--python-out FILE] [-D NAME=VALUE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from icefabric.target.compiler.program import load_program
from icefabric.target.p4.errors import P4CompileError


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 compile error, 2 usage)."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.target.compiler",
        description="Compile a P4_16 v1model program for the icefabric embedded target.",
    )
    ap.add_argument("program", type=Path, help="P4 main file")
    ap.add_argument("-I", dest="include", type=Path, action="append", default=[],
                    help="extra include directory")  # fmt: skip
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                    help="preprocessor definition")  # fmt: skip
    ap.add_argument("--p4info-out", type=Path, help="write the P4Info (protobuf text format)")
    ap.add_argument("--python-out", type=Path, help="write the generated Python code")
    args = ap.parse_args(argv)
    defines = {}
    for d in args.defines:
        name, _, value = d.partition("=")
        defines[name] = value or "1"
    try:
        program = load_program(args.program, include_dirs=args.include, defines=defines)
        p4info = program.p4info_text()
    except P4CompileError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.p4info_out:
        args.p4info_out.write_text(p4info)
    if args.python_out:
        args.python_out.write_text(program.source)
    info = program.p4info
    print(
        f"{args.program}: ok ({len(info.tables)} tables, {len(info.actions)} actions, "
        f"{len(program.source.splitlines())} lines of Python)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
