"""Registers, counters, meters (trTCM), hashes, checksums, digests, clocks."""

from __future__ import annotations

import random
import zlib

import pytest

from icefabric.target.runtime import (
    Counter,
    DigestType,
    InvalidArgumentError,
    ManualClock,
    Meter,
    MeterConfig,
    OutOfRangeError,
    Register,
    compute_hash,
    csum16,
    pack_fields,
)
from icefabric.target.runtime.hashes import CrcParams, crc_custom, hash_bytes


def test_register_read_write_and_out_of_range() -> None:
    r = Register("r", 4, 8)
    r.write(1, 0x1FF)
    assert r.read(1) == 0xFF
    r.write(9, 5)
    assert r.read(9) == 0
    assert r.out_of_range == 2
    with pytest.raises(OutOfRangeError):
        r.cp_read(4)
    with pytest.raises(InvalidArgumentError):
        r.cp_write(0, 256)


def test_counter_counts_bytes_and_packets() -> None:
    c = Counter("c", 2, "packets_and_bytes")
    c.count(0, 100)
    c.count(0, 60)
    c.count(5, 60)
    assert c.read(0) == (160, 2)
    assert c.read(1) == (0, 0)
    with pytest.raises(ValueError):
        Counter("x", 1, "frames")


def test_meter_trtcm_rfc2698_packets() -> None:
    clock = ManualClock()
    m = Meter("m", 2, "packets", clock=clock)
    assert m.execute(0, 64) == 0  # unconfigured: green
    m.set_config(0, MeterConfig(cir=1000, cburst=2, pir=2000, pburst=4))
    colours = [m.execute(0, 64) for _ in range(5)]
    assert colours == [0, 0, 1, 1, 2]
    clock.advance(1000)  # 1 ms: +1 committed token, +2 peak tokens
    assert [m.execute(0, 64) for _ in range(3)] == [0, 1, 2]


def test_meter_bytes_and_bad_config() -> None:
    clock = ManualClock()
    m = Meter("m", 1, "bytes", clock=clock)
    m.set_config(0, MeterConfig(cir=1000, cburst=100, pir=2000, pburst=200))
    assert m.execute(0, 100) == 0
    assert m.execute(0, 100) == 1
    assert m.execute(0, 1) == 2
    with pytest.raises(InvalidArgumentError):
        m.set_config(0, MeterConfig(cir=10, cburst=1, pir=5, pburst=1))
    with pytest.raises(OutOfRangeError):
        m.set_config(3, None)


def test_pack_fields_msb_first_with_tail_padding() -> None:
    assert pack_fields([(0xA, 4), (0xBC, 8)]) == bytes([0xAB, 0xC0])
    assert pack_fields([(1, 1)]) == b"\x80"
    assert pack_fields([(0x1FF, 8)]) == b"\xff"  # values are cut to their width


def test_crc_check_values() -> None:
    data = [(b, 8) for b in b"123456789"]
    assert compute_hash("crc16", data) == 0xBB3D  # CRC-16/ARC
    assert compute_hash("crc32", data) == 0xCBF43926
    assert compute_hash("crc16_custom", data) == 0xBB3D
    assert compute_hash("crc32_custom", data) == 0xCBF43926
    xmodem = CrcParams(16, 0x1021, 0, 0, False, False)
    assert crc_custom(b"123456789", xmodem) == 0x31C3


def test_crc32_matches_zlib_random() -> None:
    rng = random.Random(7)
    for _ in range(50):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        assert hash_bytes("crc32", data) == zlib.crc32(data)
        assert hash_bytes("crc32_custom", data) == zlib.crc32(data)


def test_identity_xor16_csum16() -> None:
    assert compute_hash("identity", [(0x0A000001, 32), (0x50, 16)]) == 0x0A0000010050
    assert compute_hash("identity", [(i, 8) for i in range(1, 11)]) == 0x0102030405060708
    assert (
        compute_hash("xor16", [(0x1234, 16), (0xFF00, 16), (0xAB, 8)]) == 0x1234 ^ 0xFF00 ^ 0xAB00
    )
    # IPv4 header example (checksum field zero) -> 0xB861
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert csum16([(b, 8) for b in hdr]) == 0xB861
    assert compute_hash("csum16", [(b, 8) for b in hdr]) == 0xB861


def test_random_hash_uses_given_rng_and_unknown_rejected() -> None:
    a = compute_hash("random", [], rng=random.Random(1))
    b = compute_hash("random", [], rng=random.Random(1))
    assert a == b
    with pytest.raises(ValueError, match="unknown hash"):
        compute_hash("md5", [(1, 8)])


def test_digest_queue_and_listener() -> None:
    seen: list[int] = []
    d = DigestType("mac_learn", [48, 9], capacity=2)
    d.listeners.append(lambda dt: seen.append(len(dt)))
    d.push([0x1_0000_0000_0001, 0x3FF])
    d.push([2, 3])
    d.push([4, 5])
    assert d.dropped == 1
    assert seen == [1, 2]
    assert d.pop() == [(0x0000_0000_0001, 0x1FF), (2, 3)]
    with pytest.raises(ValueError):
        d.push([1])


def test_manual_clock() -> None:
    c = ManualClock(5)
    c.advance(10)
    assert c.now_us() == 15
    c.set(20)
    assert c.now_us() == 20
    with pytest.raises(ValueError):
        c.set(3)
