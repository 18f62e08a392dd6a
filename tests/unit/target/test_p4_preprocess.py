"""Preprocessor: macros, conditionals, includes and line tracking."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.target.p4.errors import P4CompileError
from icefabric.target.p4.preprocess import preprocess


def _text(lines: list) -> str:  # type: ignore[type-arg]
    return "\n".join(ln.text for ln in lines if ln.text.strip())


def test_object_and_function_macros() -> None:
    src = "#define W 8\n#define ADD(a, b) ((a) + (b))\nbit<W> x = ADD(W, 2);\n"
    assert _text(preprocess(src, "m.p4")) == "bit<8> x = ((8) + (2));"


def test_conditionals_and_undef() -> None:
    src = """#define A
#ifdef A
one
#else
two
#endif
#ifndef B
three
#endif
#if defined(A) && !defined(B) && (1 + 2 == 3)
four
#elif 1
five
#endif
#undef A
#ifdef A
six
#endif
#if 0
#error never
#endif
"""
    assert _text(preprocess(src, "c.p4")).split() == ["one", "three", "four"]


def test_defines_from_caller() -> None:
    src = "#ifdef TARGET_X\nx VALUE\n#endif\n"
    assert _text(preprocess(src, "d.p4", defines={"TARGET_X": "1", "VALUE": "42"})) == "x 42"


def test_include_relative_and_line_tracking(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "a.p4").write_text('// a\n#include "b.p4"\nconst A;\n')
    (tmp_path / "inc" / "b.p4").write_text("\nconst B;\n")
    main = tmp_path / "main.p4"
    main.write_text('#include "inc/a.p4"\nmain;\n')
    lines = [ln for ln in preprocess(main.read_text(), str(main)) if ln.text.strip()]
    where = [(Path(ln.file).name, ln.line, ln.text.strip()) for ln in lines]
    assert where == [("b.p4", 2, "const B;"), ("a.p4", 3, "const A;"), ("main.p4", 2, "main;")]


def test_virtual_files_and_system_includes() -> None:
    files = {"lib/x.p4": "#define FROM_X 1\n"}
    out = preprocess('#include <core.p4>\n#include "lib/x.p4"\nv FROM_X\n', "m.p4", files=files)
    assert [ln.text for ln in out if ln.text.strip()][-1] == "v 1"
    assert any(ln.file == "<core.p4>" for ln in out)


def test_comments_do_not_hide_line_numbers() -> None:
    src = "/* multi\n line */ a\n// #define X\nb X\n"
    lines = preprocess(src, "k.p4")
    assert [(ln.line, ln.text.strip()) for ln in lines if ln.text.strip()] == [(2, "a"), (4, "b X")]


@pytest.mark.parametrize(
    ("src", "msg"),
    [
        ('#include "missing.p4"\n', "cannot find include file 'missing.p4'"),
        ("#ifdef A\n", "unterminated #if"),
        ("#endif\n", "#endif without #if"),
        ("#error stop here\n", "#error stop here"),
        ("#frobnicate\n", "unknown preprocessor directive #frobnicate"),
        ("#define F(a) a\nF(1, 2)\n", "macro F expects 1 arguments, got 2"),
    ],
)
def test_errors(src: str, msg: str) -> None:
    with pytest.raises(P4CompileError) as exc:
        preprocess(src, "e.p4")
    assert msg in str(exc.value)
    assert str(exc.value).startswith("e.p4:")
