"""icectl shell's p4runtime-shell prints match values and parameters decoded beside the bytes
(issue 21: it showed 10.0.2.2 only as "\\x0a\\x00\\x02\\x02")."""

from __future__ import annotations

from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from icefabric.control.cli import p4shell
from icefabric.p4src import ice_p4 as n

ROOT = Path(__file__).resolve().parents[3]


def test_a_route_entry_prints_its_address_and_macs_decoded() -> None:
    compiler = pytest.importorskip("icefabric.target.compiler")
    shell = pytest.importorskip("p4runtime_sh.shell")
    p4info = compiler.load_program(ROOT / "p4src" / "ice.p4").p4info
    shell.context.set_p4info(p4info)
    index = {t.preamble.name: t for t in p4info.tables}
    table = index[n.TABLE_IPV4_ROUTE]
    action = next(a for a in p4info.actions if a.preamble.name.endswith(".route_to_port"))
    params = {p.name: p.id for p in action.params}
    te = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
    fm = te.match.add(field_id=table.match_fields[0].id)
    fm.lpm.value = bytes([10, 0, 2, 2])
    fm.lpm.prefix_len = 32
    te.action.action.action_id = action.preamble.id
    for name, value in (("port", b"\x03"), ("src_mac", bytes.fromhex("020000000201"))):
        te.action.action.params.add(param_id=params[name], value=value)
    before = shell._repr_pretty_p4runtime(te)
    assert "(10.0.2.2)" not in before  # p4runtime-shell alone: bytes only
    p4shell.install()
    p4shell.install()  # once is enough: a second call changes nothing
    text = shell._repr_pretty_p4runtime(te)
    assert '"\\\\x0a\\\\x00\\\\x02\\\\x02" (10.0.2.2)' in text, text
    assert "(02:00:00:00:02:01)" in text and '"\\\\x03" (3)' in text, text
    assert (
        text.replace(" (10.0.2.2)", "").replace(" (02:00:00:00:02:01)", "").replace(" (3)", "")
        == before
    )  # nothing else of the shell's output changed
