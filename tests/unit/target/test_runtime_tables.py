"""Tables: exact / lpm / ternary / range / optional matching, priorities, profiles."""

from __future__ import annotations

import pytest

from icefabric.target.runtime import (
    ActionCall,
    ActionProfile,
    AlreadyExistsError,
    DirectCounter,
    DirectMeter,
    FailedPreconditionError,
    InvalidArgumentError,
    KeyField,
    ManualClock,
    Match,
    MeterConfig,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    Table,
    TableEntry,
)
from icefabric.target.runtime.hashes import compute_hash

NOP = ActionCall("NoAction")


def fwd(port: int) -> ActionCall:
    return ActionCall("fwd", (port,))


def test_exact_hit_miss_and_duplicates() -> None:
    t = Table(
        "t", [KeyField("a", "exact", 16), KeyField("b", "exact", 8)], ["fwd", "NoAction"], 4, NOP
    )
    t.insert(TableEntry((Match.exact(1), Match.exact(2)), action=fwd(3)))
    assert t.lookup((1, 2), 64) == (fwd(3), True)
    assert t.lookup((1, 3), 64) == (NOP, False)
    with pytest.raises(AlreadyExistsError):
        t.insert(TableEntry((Match.exact(1), Match.exact(2)), action=fwd(4)))
    t.modify(TableEntry((Match.exact(1), Match.exact(2)), action=fwd(5)))
    assert t.lookup((1, 2), 64) == (fwd(5), True)
    t.delete((Match.exact(1), Match.exact(2)))
    assert t.lookup((1, 2), 64) == (NOP, False)
    with pytest.raises(NotFoundError):
        t.delete((Match.exact(1), Match.exact(2)))


def test_value_wider_than_field_rejected() -> None:
    t = Table("t", [KeyField("a", "exact", 8)], ["fwd"], 4, NOP)
    with pytest.raises(InvalidArgumentError, match="does not fit in 8 bits"):
        t.insert(TableEntry((Match.exact(256),), action=fwd(1)))


def test_unknown_action_and_default_only_rejected() -> None:
    t = Table(
        "t", [KeyField("a", "exact", 8)], ["fwd", "drop"], 4, NOP, default_only_actions=["drop"]
    )
    with pytest.raises(InvalidArgumentError, match="not one of"):
        t.insert(TableEntry((Match.exact(1),), action=ActionCall("nope")))
    with pytest.raises(InvalidArgumentError, match="defaultonly"):
        t.insert(TableEntry((Match.exact(1),), action=ActionCall("drop")))


def test_table_full_is_resource_exhausted() -> None:
    t = Table("t", [KeyField("a", "exact", 8)], ["fwd"], 2, NOP)
    t.insert(TableEntry((Match.exact(1),), action=fwd(1)))
    t.insert(TableEntry((Match.exact(2),), action=fwd(1)))
    with pytest.raises(ResourceExhaustedError):
        t.insert(TableEntry((Match.exact(3),), action=fwd(1)))


def test_lpm_longest_prefix_wins_with_exact_field() -> None:
    t = Table("t", [KeyField("vrf", "exact", 8), KeyField("dst", "lpm", 32)], ["fwd"], 16, NOP)
    t.insert(TableEntry((Match.exact(1), Match.lpm(0x0A000000, 8)), action=fwd(1)))
    t.insert(TableEntry((Match.exact(1), Match.lpm(0x0A010000, 16)), action=fwd(2)))
    t.insert(TableEntry((Match.exact(1), Match.lpm(0, 0)), action=fwd(9)))
    t.insert(TableEntry((Match.exact(2), Match.lpm(0x0A010200, 24)), action=fwd(3)))
    assert t.lookup((1, 0x0A010203), 0) == (fwd(2), True)
    assert t.lookup((1, 0x0A020203), 0) == (fwd(1), True)
    assert t.lookup((1, 0x0B000000), 0) == (fwd(9), True)
    assert t.lookup((2, 0x0A010203), 0) == (fwd(3), True)
    assert t.lookup((2, 0x0A010303), 0) == (NOP, False)


def test_lpm_value_bits_beyond_prefix_identify_same_entry() -> None:
    t = Table("t", [KeyField("dst", "lpm", 32)], ["fwd"], 16, NOP)
    t.insert(TableEntry((Match.lpm(0x0A000000, 8),), action=fwd(1)))
    with pytest.raises(AlreadyExistsError):
        t.insert(TableEntry((Match.lpm(0x0A0000FF, 8),), action=fwd(1)))
    with pytest.raises(InvalidArgumentError, match="prefix length"):
        t.insert(TableEntry((Match.lpm(0, 33),), action=fwd(1)))


def test_ternary_higher_priority_number_wins() -> None:
    t = Table("t", [KeyField("a", "ternary", 8)], ["fwd"], 16, NOP)
    t.insert(TableEntry((Match.ternary(0x10, 0xF0),), priority=10, action=fwd(1)))
    t.insert(TableEntry((Match.ternary(0x12, 0xFF),), priority=20, action=fwd(2)))
    t.insert(TableEntry((Match.dont_care(),), priority=1, action=fwd(3)))
    assert t.lookup((0x12,), 0) == (fwd(2), True)
    assert t.lookup((0x13,), 0) == (fwd(1), True)
    assert t.lookup((0x23,), 0) == (fwd(3), True)
    # same match, different priority: a different entry
    t.insert(TableEntry((Match.ternary(0x12, 0xFF),), priority=5, action=fwd(4)))
    assert len(t) == 4
    with pytest.raises(InvalidArgumentError, match="priority"):
        t.insert(TableEntry((Match.ternary(1, 1),), priority=0, action=fwd(1)))


def test_exact_table_rejects_priority() -> None:
    t = Table("t", [KeyField("a", "exact", 8)], ["fwd"], 4, NOP)
    with pytest.raises(InvalidArgumentError, match="priority must be 0"):
        t.insert(TableEntry((Match.exact(1),), priority=3, action=fwd(1)))


def test_range_and_optional_with_ternary() -> None:
    t = Table(
        "t",
        [KeyField("p", "range", 16), KeyField("o", "optional", 8), KeyField("x", "ternary", 8)],
        ["fwd"],
        16,
        NOP,
    )
    t.insert(
        TableEntry(
            (Match.range(1000, 2000), Match.optional(6), Match.dont_care()),
            priority=5,
            action=fwd(1),
        )
    )
    t.insert(
        TableEntry(
            (Match.range(0, 65535), Match.dont_care(), Match.ternary(1, 1)),
            priority=3,
            action=fwd(2),
        )
    )
    assert t.lookup((1500, 6, 0), 0) == (fwd(1), True)
    assert t.lookup((1500, 17, 1), 0) == (fwd(2), True)
    assert t.lookup((2001, 6, 0), 0) == (NOP, False)
    assert t.lookup((2000, 6, 0), 0) == (fwd(1), True)
    with pytest.raises(InvalidArgumentError, match="empty"):
        t.insert(
            TableEntry(
                (Match.range(5, 4), Match.optional(1), Match.dont_care()), priority=1, action=fwd(1)
            )
        )


def test_mixed_lpm_ternary_uses_priority() -> None:
    t = Table("t", [KeyField("d", "lpm", 32), KeyField("x", "ternary", 8)], ["fwd"], 16, NOP)
    t.insert(TableEntry((Match.lpm(0x0A000000, 8), Match.dont_care()), priority=100, action=fwd(1)))
    t.insert(TableEntry((Match.lpm(0x0A010000, 16), Match.dont_care()), priority=1, action=fwd(2)))
    assert t.lookup((0x0A010101, 0), 0) == (fwd(1), True)


def test_default_action_set_reset_and_const() -> None:
    t = Table("t", [KeyField("a", "exact", 8)], ["fwd", "NoAction"], 4, NOP)
    t.set_default(fwd(7))
    assert t.lookup((1,), 0) == (fwd(7), False)
    t.reset_default()
    assert t.lookup((1,), 0) == (NOP, False)
    c = Table("c", [KeyField("a", "exact", 8)], ["fwd", "NoAction"], 4, NOP, const_default=True)
    with pytest.raises(PermissionDeniedError):
        c.set_default(fwd(1))


def test_const_entries_are_immutable_and_match() -> None:
    t = Table(
        "t",
        [KeyField("a", "ternary", 8)],
        ["fwd"],
        4,
        NOP,
        const_entries=[
            TableEntry((Match.ternary(1, 0xFF),), priority=2, action=fwd(1)),
            TableEntry((Match.dont_care(),), priority=1, action=fwd(2)),
        ],
    )
    assert t.lookup((1,), 0) == (fwd(1), True)
    assert t.lookup((9,), 0) == (fwd(2), True)
    with pytest.raises(PermissionDeniedError):
        t.insert(TableEntry((Match.ternary(3, 0xFF),), priority=3, action=fwd(1)))
    assert all(e.is_const for e in t.entries())


def test_direct_counter_counts_hits_only() -> None:
    dc = DirectCounter("c", "packets_and_bytes", "t")
    t = Table("t", [KeyField("a", "exact", 8)], ["fwd"], 4, NOP, direct_counter=dc)
    t.insert(TableEntry((Match.exact(1),), action=fwd(1)))
    t.lookup((1,), 100)
    t.lookup((1,), 50)
    t.lookup((2,), 70)
    (entry,) = t.entries()
    assert entry.counter_data == (150, 2)


def test_direct_meter_colours_per_entry() -> None:
    clock = ManualClock()
    dm = DirectMeter("m", "packets", "t", clock=clock)
    t = Table("t", [KeyField("a", "exact", 8)], ["fwd"], 4, NOP, direct_meter=dm)
    t.insert(TableEntry((Match.exact(1),), action=fwd(1), meter_config=MeterConfig(1, 1, 2, 2)))
    colours = []
    for _ in range(3):
        t.lookup((1,), 64)
        colours.append(t.direct_meter_color())
    assert colours == [0, 1, 2]
    clock.advance(1_000_000)
    t.lookup((1,), 64)
    assert t.direct_meter_color() == 0


def test_action_profile_members_and_selector_groups() -> None:
    prof = ActionProfile("sel", 16, selector="crc16", max_group_size=4)
    t = Table(
        "ecmp",
        [
            KeyField("dst", "exact", 8),
            KeyField("h1", "selector", 32),
            KeyField("h2", "selector", 16),
        ],
        ["fwd"],
        16,
        NOP,
        action_profile=prof,
    )
    for m in (1, 2, 3):
        prof.add_member(m, fwd(m))
    prof.add_group(10, [(1, 1), (2, 1), (3, 1)])
    t.insert(TableEntry((Match.exact(5),), group_id=10))
    t.insert(TableEntry((Match.exact(6),), member_id=2))
    assert t.lookup((6, 0, 0), 0) == (fwd(2), True)
    for a, b in [(1, 2), (0x0A000001, 80), (77, 443), (5, 5)]:
        h = compute_hash("crc16", [(a, 32), (b, 16)])
        assert t.lookup((5, a, b), 0) == (fwd([1, 2, 3][h % 3]), True)
    with pytest.raises(FailedPreconditionError):
        prof.delete_member(1)
    with pytest.raises(FailedPreconditionError):
        prof.delete_group(10)
    with pytest.raises(ResourceExhaustedError):
        prof.add_member(4, fwd(4))
        prof.add_member(5, fwd(5))
        prof.modify_group(10, [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)])
    with pytest.raises(NotFoundError):
        t.insert(TableEntry((Match.exact(7),), group_id=99))


def test_empty_group_behaves_as_miss() -> None:
    prof = ActionProfile("sel", 4, selector="crc32")
    t = Table(
        "t",
        [KeyField("a", "exact", 8), KeyField("s", "selector", 8)],
        ["fwd"],
        4,
        NOP,
        action_profile=prof,
    )
    prof.add_group(1)
    t.insert(TableEntry((Match.exact(1),), group_id=1))
    assert t.lookup((1, 9), 0) == (NOP, False)


def test_lookup_sees_writes_after_lookup() -> None:
    t = Table("t", [KeyField("a", "ternary", 8)], ["fwd"], 64, NOP)
    assert t.lookup((1,), 0) == (NOP, False)
    t.insert(TableEntry((Match.ternary(1, 0xFF),), priority=1, action=fwd(1)))
    assert t.lookup((1,), 0) == (fwd(1), True)
    t.clear()
    assert t.lookup((1,), 0) == (NOP, False)
