"""select: tuple keys, masks, ranges, default/_; lookahead; advance; reject."""

from __future__ import annotations

import pytest

from .conftest import send

pytestmark = pytest.mark.dataplane


@pytest.mark.parametrize(
    ("probe", "state"),
    [
        (bytes([0x10, 0x01, 0, 0]), 1),
        (bytes([0x10, 0x02, 0, 0]), 5),  # exact tuple needs both
        (bytes([0x2A, 0x99, 0, 0]), 2),  # mask on kind, _ on sub
        (bytes([0x35, 0x7F, 0, 0]), 3),
        (bytes([0x35, 0x80, 0, 0]), 5),  # sub outside the range
        (bytes([0x99, 0x00, 0x00, 0x42]), 5),
    ],
)
def test_select_cases(make_switch, probe: bytes, state: int) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("select_keys")
    out = send(dev, 1, probe + b"rest")
    assert out == [(1, bytes([state, probe[0]]) + probe + b"rest")]


def test_advance_skips_bytes(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("select_keys")
    pkt = bytes([0x40, 0x07, 0, 0]) + bytes([3]) + b"abc" + b"tail"
    out = send(dev, 1, pkt)
    assert out == [(1, bytes([4, 0x40]) + pkt[:5] + b"tail")]


def test_no_match_and_reject_errors(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("select_keys")
    out = send(dev, 1, bytes([0x99, 0, 0x12, 0x34]))  # value matches no case: NoMatch
    assert out == [(1, bytes([0xE5, 0x99, 0x99, 0, 0x12, 0x34]))]
    out = send(dev, 1, bytes([0x99, 0, 0xFF, 0x01]))  # explicit reject: no error code
    assert out == [(1, bytes([5, 0x99, 0x99, 0, 0xFF, 0x01]))]
    out = send(dev, 1, bytes([0x40, 0, 0, 0, 9]) + b"ab")  # advance past the end
    assert out[0][1][:2] == bytes([0xE0, 0x40])  # error before meta.state = 4


def test_value_set_members_from_the_control_plane(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("select_keys")
    vs = dev.pipeline.value_sets["P.special"]
    probe = bytes([0x10, 0x01, 0, 0])
    assert send(dev, 1, probe)[0][1][0] == 1
    vs.set_members([((0x10, 0xFF), (0x00, 0xF0))])  # kind 0x10, sub 0x0?
    assert send(dev, 1, probe)[0][1][0] == 6
    assert send(dev, 1, bytes([0x10, 0x11, 0, 0]))[0][1][0] == 5
    vs.clear()
    assert send(dev, 1, probe)[0][1][0] == 1


def test_value_set_in_p4info() -> None:
    from .conftest import program

    (vs,) = program("select_keys").p4info.value_sets
    assert (vs.preamble.name, vs.size, vs.preamble.id >> 24) == ("P.special", 4, 0x03)
    assert [(m.id, m.name, m.bitwidth, m.match_type) for m in vs.match] == [
        (1, "kind", 8, 2),
        (2, "sub", 8, 4),
    ]
