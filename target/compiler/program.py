"""Public compile entry points: load_program, compile_source, Program."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from types import CodeType
from typing import Any

from icefabric.files import DataFileError, read_input
from icefabric.target.compiler.compile import Compiled, Compiler
from icefabric.target.compiler.exprcore import add_base
from icefabric.target.compiler.pipeline import Pipeline, PipelineEnv
from icefabric.target.compiler.types import StructT, bit_width
from icefabric.target.p4.errors import P4CompileError, SourceLoc
from icefabric.target.p4.lexer import tokenize
from icefabric.target.p4.parser import Parser
from icefabric.target.p4.preprocess import preprocess

log = logging.getLogger(__name__)
_CACHE_MAX = 16


class Program:
    """A compiled v1model program: P4Info plus code to instantiate pipelines from."""

    def __init__(self, compiled: Compiled, name: str, source_hash: str) -> None:
        self.compiled = compiled
        self.name = name
        self.source_hash = source_hash
        self.code: CodeType = compile(compiled.source, f"<p4:{name}>", "exec")

    @cached_property
    def p4info(self) -> Any:
        """The P4Info message, as p4c would generate it."""
        from icefabric.target.compiler.p4info import build_p4info

        return build_p4info(self)

    def p4info_text(self) -> str:
        """The P4Info in protobuf text format."""
        from icefabric.target.compiler.p4info import p4info_text

        return p4info_text(self)

    @property
    def source(self) -> str:
        """The generated Python source (for debugging)."""
        return self.compiled.source

    @cached_property
    def cpu_port_metadata(self) -> dict[str, list[tuple[str, int, int]]]:
        """controller header name -> [(field name, id, bitwidth)] (packet_in / packet_out)."""
        out: dict[str, list[tuple[str, int, int]]] = {}
        for st in self.compiled.model.controller_headers:
            from icefabric.target.p4 import ast as A

            a = A.anno(st.annos, "controller_header")
            name = a.args[0].value if a and a.args and isinstance(a.args[0], A.StrLit) else st.name
            out[name] = [(f.name, i + 1, bit_width(f.type) or 0) for i, f in enumerate(st.fields)]
        return out

    def instantiate(self, env: PipelineEnv | None = None) -> Pipeline:
        """A fresh pipeline (its own tables, registers, counters ...)."""
        return Pipeline(self, env or PipelineEnv())

    def slot_of(self, path: str) -> int:
        """State slot of 'hdr.a.b' / 'meta.x' / 'standard_metadata.x' (scalar fields)."""
        comp = self.compiled
        parts = path.split(".")
        roots = {"hdr": comp.hdr, "headers": comp.hdr, "meta": comp.meta, "metadata": comp.meta,
                 "standard_metadata": comp.sm, "sm": comp.sm}  # fmt: skip
        if parts[0] not in roots:
            raise KeyError(f"unknown root '{parts[0]}' in {path!r}")
        ref = roots[parts[0]]
        t: Any = ref.type
        base = ref.sbase or 0
        for p in parts[1:]:
            if not isinstance(t, StructT) or t.field(p) is None:
                raise KeyError(f"no field '{p}' in {path!r}")
            f = t.field(p)
            assert f is not None
            base = int(add_base(str(base), f.offset))
            t = f.type
        return base


_cache: dict[str, Program] = {}
_cache_lock = threading.Lock()


def compile_source(
    text: str,
    *,
    filename: str = "<string>",
    files: Mapping[str, str] | None = None,
    defines: Mapping[str, str] | None = None,
    include_dirs: Sequence[Path] = (),
) -> Program:
    """Compile P4 source text (``files``: extra include files by relative name).

    Compiled programs are cached by the hash of the preprocessed source, so compiling the same
    program again (e.g. a second switch, a repeated SetForwardingPipelineConfig) is cheap.
    """
    lines = preprocess(text, filename, include_dirs=include_dirs, files=files, defines=defines)
    h = hashlib.sha256(filename.encode())
    for ln in lines:
        h.update(f"{ln.file}:{ln.line}:{ln.text}\n".encode())
    key = h.hexdigest()
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        ast = Parser(tokenize(lines)).parse_program()
        compiled = Compiler(ast).compile()
    except RecursionError:
        raise P4CompileError("program is nested too deeply", SourceLoc(filename, 0, 0)) from None
    prog = Program(compiled, Path(filename).name, key)
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.pop(next(iter(_cache)))
        _cache[key] = prog
    log.debug("compiled %s (%d lines of Python)", filename, compiled.source.count("\n"))
    return prog


MAX_SOURCE_BYTES = 4 << 20  # a P4 main file (preprocessed output is bounded the same)


def load_program(
    path: str | Path,
    *,
    include_dirs: Sequence[Path] = (),
    defines: Mapping[str, str] | None = None,
) -> Program:
    """Read and compile a P4 main file (its #include "..." files are read relative to it)."""
    p = Path(path)
    try:  # bounded like its preprocessed output; a device or FIFO is refused, not read
        text = read_input(p, limit=MAX_SOURCE_BYTES, what="a P4 program").decode("utf-8")
    except DataFileError as exc:
        why = str(exc).splitlines()[0].removeprefix(f"{p}: ")
        raise P4CompileError(why, SourceLoc(str(p), 0, 0)) from None
    return compile_source(text, filename=str(p), defines=defines, include_dirs=include_dirs)
