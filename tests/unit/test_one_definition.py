"""Concepts defined once (issue 23): the flow key, the RoCEv2 UDP port, ice.p4's constants.

Every module of the icefabric package is read with ``ast``; the test fails when a second class
of flow keys appears (``class ...FlowKey`` or the old ``EcmpKey``), when the RoCEv2 port is
given its number anywhere but in the module generated from ice.p4 (``p4src/ice_p4.py``,
``UDP_PORT_ROCEV2``; ``control/flowkey.py`` names it ``ROCE_UDP_PORT`` for the Python side), or
when a constant of that module is given its value again (``CPU_PORT = 255``, or header sizes
spelled ``14 + 20 + 8``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("icefabric", "p4src", "target", "topo", "control", "traffic", "experiment", "sim")
ROCE_UDP_PORT = 4791


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path)))
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]


def flow_key_classes(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """``file: class`` of every class that names a flow key."""
    return [
        f"{rel}: {node.name}"
        for rel, tree in modules
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and (node.name.endswith("FlowKey") or node.name in ("EcmpKey", "MatchKey"))
    ]


def roce_port_constants(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """``file:line: NAME`` of every assignment of the literal 4791."""
    out = []
    for rel, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Constant) and value.value == ROCE_UDP_PORT:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = ", ".join(ast.unparse(t) for t in targets)
                    out.append(f"{rel}:{node.lineno}: {names}")
    return out


def test_one_flow_key_class() -> None:
    assert flow_key_classes(_modules()) == ["control/flowkey.py: FlowKey"]


def test_the_roce_port_is_given_its_number_once() -> None:
    found = roce_port_constants(_modules())
    assert len(found) == 1 and found[0].startswith("p4src/ice_p4.py:"), found
    from icefabric.control.flowkey import ROCE_UDP_PORT
    from icefabric.p4src.ice_p4 import UDP_PORT_ROCEV2

    assert ROCE_UDP_PORT == UDP_PORT_ROCEV2 == 4791


def test_the_checks_see_a_second_definition() -> None:
    twice = ast.parse("class EcmpKey: pass\nPORT: int = 4791\nclass HostFlowKey: pass\n")
    assert flow_key_classes([("x.py", twice)]) == ["x.py: EcmpKey", "x.py: HostFlowKey"]
    assert roce_port_constants([("x.py", twice)]) == ["x.py:2: PORT"]


def ice_p4_literals(modules: list[tuple[str, ast.Module]], names: set[str]) -> list[str]:
    """``file:line: NAME`` of every assignment of an int literal to a name the generated
    module defines (``CPU_PORT = 255`` again), and of header sizes spelled as the literal sum
    ``14 + 20 + 8`` (Ethernet + IPv4 + UDP: ``ETHERNET_BYTES + IPV4_BYTES + UDP_BYTES``)."""
    out = []
    for rel, tree in modules:
        if rel == "p4src/ice_p4.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                for t in targets:
                    if (
                        isinstance(t, ast.Name)
                        and t.id in names
                        and isinstance(value, ast.Constant)
                        and type(value.value) is int
                    ):
                        out.append(f"{rel}:{node.lineno}: {t.id}")
            if isinstance(node, ast.BinOp) and "14 + 20 + 8" in ast.unparse(node):
                out.append(f"{rel}:{node.lineno}: 14 + 20 + 8")
    return sorted(set(out))


def _ice_p4_int_names() -> set[str]:
    from icefabric.p4src import ice_p4

    return {k for k, v in vars(ice_p4).items() if k.isupper() and type(v) is int}


def test_ice_p4_constants_are_given_their_values_once() -> None:
    assert ice_p4_literals(_modules(), _ice_p4_int_names()) == []


def test_the_ice_p4_check_sees_a_copy() -> None:
    copy = ast.parse("CPU_PORT = 255\nFRAME = 14 + 20 + 8 + 36\nOTHER = 3\n")
    found = ice_p4_literals([("x.py", copy)], {"CPU_PORT", "OTHER_NAME"})
    assert found == ["x.py:1: CPU_PORT", "x.py:2: 14 + 20 + 8"]
