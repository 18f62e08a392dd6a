"""The benchmark pipeline forwards correctly; compile-once cache (its speed is `make bench`'s)."""

from __future__ import annotations

from icefabric.target.compiler import compile_source
from icefabric.target.compiler.bench import (
    FORWARDING_P4,
    forwarding_pipeline,
    forwarding_program,
)


def test_forwarding_result_is_bit_exact() -> None:
    pipeline, packets = forwarding_pipeline(routes=4, flows=4)
    res = pipeline.ingress(packets[2], 0)
    assert res.egress_spec == 3
    out = pipeline.egress(res.ctx, egress_port=3).data
    assert out is not None
    assert out[:6] == (0xAA02).to_bytes(6, "big")
    assert out[6:12] == (0xBB03).to_bytes(6, "big")
    assert out[14 + 8] == packets[2][14 + 8] - 1  # ttl
    ip = out[14:34]
    s = sum(int.from_bytes(ip[i : i + 2], "big") for i in range(0, 20, 2))
    assert (s & 0xFFFF) + (s >> 16) == 0xFFFF  # checksum valid after the ttl change
    assert out[34:] == packets[2][34:]


def test_compile_cache_returns_the_same_program() -> None:
    assert forwarding_program() is compile_source(FORWARDING_P4, filename="bench_forwarding.p4")
    a = forwarding_program().instantiate()
    b = forwarding_program().instantiate()
    assert a.tables["Ing.routes"] is not b.tables["Ing.routes"]


def test_cache_sees_changes_in_included_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from icefabric.target.compiler import load_program

    main = tmp_path / "main.p4"
    main.write_text(FORWARDING_P4.replace("#include <v1model.p4>", '#include <v1model.p4>\n#include "sz.p4"')
                    .replace("size = 4096;", "size = ROUTES;"))  # fmt: skip
    (tmp_path / "sz.p4").write_text("#define ROUTES 100\n")
    first = load_program(main)
    assert load_program(main) is first
    (tmp_path / "sz.p4").write_text("#define ROUTES 200\n")
    second = load_program(main)
    assert second is not first
    assert second.p4info.tables[0].size == 200
