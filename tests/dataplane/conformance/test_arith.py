"""Arithmetic semantics against a Python model of P4_16 bit<W>/int<W> rules."""

from __future__ import annotations

import random

import pytest

from .conftest import send

pytestmark = pytest.mark.dataplane


def u8(x: int) -> int:
    return x & 0xFF


def s8(x: int) -> int:
    x &= 0xFF
    return x - 256 if x & 0x80 else x


def model(a: int, b: int, sa: int, sb: int, sh: int) -> bytes:
    out = [
        u8(a + b), u8(a - b), u8(a * b), min(a + b, 255), max(a - b, 0),
        u8(max(min(sa + sb, 127), -128)), u8(max(min(sa - sb, 127), -128)), u8(sa + sb),
        u8(a << sh) if sh < 8 else 0, a >> sh, u8(sa >> sh), u8(-a), u8(~a),
    ]  # fmt: skip
    body = bytes(out)
    body += ((a << 8) | b).to_bytes(2, "big")
    body += bytes([(((a << 8) | b) >> 4) & 0xFF])
    body += (sa & 0xFFFF).to_bytes(2, "big")
    body += bytes([1 if sa < sb else 0, a // 3, a % 3, (a & 0xF0) | (b ^ 0x0F)])
    body += bytes([((a & 0xF) << 4) | (b & 0xF), 16, 0xAA if (a == b or not a > b) else 0x55])
    body += bytes([u8((a << 1) + b)])
    return body


def test_random_operands_match_the_model(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("arith")
    rng = random.Random(42)
    cases = [(255, 1, 127, 1, 0), (0, 1, -128, 1, 7), (200, 100, -100, 100, 8), (3, 3, -1, -1, 9)]
    cases += [
        (rng.randrange(256), rng.randrange(256), rng.randrange(-128, 128),
         rng.randrange(-128, 128), rng.randrange(12))
        for _ in range(60)
    ]  # fmt: skip
    for a, b, sa, sb, sh in cases:
        inp = bytes([a, b, sa & 0xFF, sb & 0xFF, sh])
        out = send(dev, 0, inp)
        assert out == [(1, inp + model(a, b, sa, sb, sh))], (a, b, sa, sb, sh)
