"""Bad P4 gives `file:line:col: error: message` with the source line and a caret, never a traceback."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from icefabric.target.compiler import compile_source
from icefabric.target.p4.errors import P4CompileError

PROGRAMS = Path(__file__).resolve().parents[2] / "dataplane" / "conformance" / "programs"

GOOD = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs { h_t h; }
struct m_t { bit<8> x; }
parser P(packet_in p, out hs hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout hs hdr, inout m_t m) { apply { } }
control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {
    apply {
        BODY
    }
}
control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m_t m) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _compile(body: str) -> None:
    compile_source(GOOD.replace("BODY", body), filename="t.p4")


def test_good_program_compiles() -> None:
    _compile("hdr.h.a = hdr.h.b + 1;")


@pytest.mark.parametrize(
    ("body", "message", "col"),
    [
        ("hdr.h.a = hdr.h.c;", "header h_t has no field 'c'", 19),
        ("hdr.h.a = 16w1;", "type mismatch: expected bit<8>, got bit<16>", 19),
        ("hdr.h.a = undefined_thing;", "'undefined_thing' is not declared", 19),
        ("hdr.h.a = hdr.h.b + ;", "expected an expression but found ';'", 29),
        ("if (hdr.h.a) { }", "if condition must be bool, got bit<8>", 13),
        ("hdr.h.a = hdr.h.a[9:2];", "slice [9:2] out of range for bit<8>", 19),
        ("m.x = m.x / 0;", "division by zero", 19),
        ("hdr.h.frob();", "header h_t has no field 'frob'", 9),
    ],
)
def test_error_messages_point_at_the_source(body: str, message: str, col: int) -> None:
    with pytest.raises(P4CompileError) as exc:
        _compile(body)
    text = str(exc.value)
    first, src_line, caret = text.split("\n")
    assert first == f"t.p4:12:{col}: error: {message}"
    assert src_line.strip() == body
    assert caret.index("^") == col - 1
    (diag,) = exc.value.errors
    assert (diag.file, diag.line, diag.col) == ("t.p4", 12, col)


def test_error_in_included_file_names_that_file() -> None:
    files = {"inc/bad.p4": "const bit<8> X = 1;\nconst bit<8> Y = X + true;\n"}
    src = '#include <core.p4>\n#include "inc/bad.p4"\n'
    with pytest.raises(P4CompileError) as exc:
        compile_source(src, filename="main.p4", files=files)
    assert str(exc.value).startswith("inc/bad.p4:2:")


def test_unsupported_construct_is_reported() -> None:
    with pytest.raises(P4CompileError) as exc:
        compile_source(GOOD.replace("struct m_t { bit<8> x; }", "struct m_t { bit<8> x; }\n"
                                    "extern Foo { Foo(); void go(); }").replace(
            "BODY", "Foo() f;"), filename="u.p4")  # fmt: skip
    assert "u.p4:" in str(exc.value)


def test_missing_main_and_wrong_architecture() -> None:
    with pytest.raises(P4CompileError, match="no 'main' package instance"):
        compile_source("#include <core.p4>\n#include <v1model.p4>\n", filename="x.p4")


def test_mutated_programs_never_raise_anything_else() -> None:
    """Delete, insert or replace random tokens of real programs and run what still compiles:
    only P4CompileError may come out of the compiler, and nothing out of the pipeline."""
    include = (PROGRAMS / "include" / "common.p4").read_text()
    junk = ["(", ")", "{", "}", ";", "bit<8>", "+", "0x", "default", "@", ".", "=", "<", ">",
            "[", "]", ":", "1", "true", "&&&", "..", "_", "apply", "key", "8w300", "++", ","]  # fmt: skip
    rng = random.Random(99)
    failures = 0
    runs = 0
    for path in sorted(PROGRAMS.glob("*.p4")):
        words = re.findall(r"\w+|[^\w\s]+|\s+", path.read_text())
        for _ in range(15):
            w = list(words)
            for _ in range(rng.randrange(1, 4)):
                i = rng.randrange(len(w))
                r = rng.random()
                if r < 0.4:
                    del w[i]
                elif r < 0.8:
                    w.insert(i, rng.choice(junk))
                else:
                    w[i] = rng.choice(junk)
            try:
                prog = compile_source("".join(w), filename=path.name,
                                      files={"include/common.p4": include})  # fmt: skip
                _ = prog.p4info
            except P4CompileError as exc:
                failures += 1
                assert str(exc).startswith((path.name + ":", "include/common.p4:", "<"))
                continue
            pipeline = prog.instantiate()
            for _ in range(3):
                data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80)))
                res = pipeline.ingress(data, rng.randrange(8))
                pipeline.egress(res.ctx, egress_port=1)
                runs += 1
    assert failures > 60
    assert runs > 20


def test_errors_in_unused_actions_and_functions_are_reported() -> None:
    src = GOOD.replace("BODY", "").replace(
        "struct m_t { bit<8> x; }",
        "struct m_t { bit<8> x; }\nbit<8> f(in bit<8> v) { return v + 16w1; }",
    )
    with pytest.raises(P4CompileError, match="type mismatch"):
        compile_source(src, filename="unused.p4")
    src = GOOD.replace("BODY", "").replace(
        "struct m_t { bit<8> x; }", "struct m_t { bit<8> x; }\naction a(bit<8> v) { v = 1; }"
    )
    with pytest.raises(P4CompileError, match="cannot assign"):
        compile_source(src, filename="unused2.p4")
    ok = compile_source(
        GOOD.replace("BODY", "").replace("struct m_t { bit<8> x; }",
                                         "struct m_t { bit<8> x; }\naction unused_ok() { }"),
        filename="ok.p4",
    )  # fmt: skip
    assert all(a.preamble.name != "unused_ok" for a in ok.p4info.actions)


def test_duplicate_declarations() -> None:
    with pytest.raises(P4CompileError, match="'drop' is declared twice in this control"):
        compile_source(
            GOOD.replace("    apply {\n        BODY", "    action drop() { }\n    action drop() { }\n"
                         "    apply {\n        BODY").replace("BODY", ""),
            filename="dup.p4",
        )  # fmt: skip
    with pytest.raises(P4CompileError, match="'X' is declared twice"):
        compile_source(GOOD.replace("BODY", "") + "const bit<8> X = 1;\nconst bit<8> X = 2;\n",
                       filename="dup2.p4")  # fmt: skip


def test_in_parameters_are_read_only() -> None:
    src = GOOD.replace("BODY", "").replace(
        "control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }",
        "control D(packet_out p, in hs hdr) { apply { hdr.h.a = 1; p.emit(hdr.h); } }",
    )
    with pytest.raises(P4CompileError, match="cannot assign to this expression"):
        compile_source(src, filename="ro.p4")
    src = GOOD.replace("BODY", "").replace(
        "control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }",
        "control D(packet_out p, in hs hdr) { apply { hdr.h.setInvalid(); p.emit(hdr.h); } }",
    )
    with pytest.raises(P4CompileError, match=r"cannot call setInvalid\(\) on an 'in' parameter"):
        compile_source(src, filename="ro2.p4")
