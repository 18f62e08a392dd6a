"""Value types shared by tables and action profiles."""

from __future__ import annotations

from dataclasses import dataclass, field

from icefabric.target.runtime.externs import MeterConfig, MeterState

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional", "selector")


@dataclass(frozen=True, slots=True)
class KeyField:
    """One table key field: P4Info name, match kind and width in bits."""

    name: str
    match_kind: str
    bitwidth: int

    def __post_init__(self) -> None:
        if self.match_kind not in MATCH_KINDS:
            raise ValueError(
                f"key {self.name}: match kind {self.match_kind!r} not in {MATCH_KINDS}"
            )
        if self.bitwidth <= 0:
            raise ValueError(f"key {self.name}: bitwidth must be > 0, got {self.bitwidth}")


@dataclass(frozen=True, slots=True)
class ActionCall:
    """An action by P4Info name with its parameter values in declaration order."""

    name: str
    params: tuple[int, ...] = ()


@dataclass(slots=True)
class Match:
    """The match of one key field; which attributes count depends on the field's match kind.

    exact: value.  lpm: value + prefix_len (or a prefix mask in `mask`).  ternary: value + mask
    (None = all ones).  range: low..high (None = value..value).  optional: value.
    `wildcard=True` is "don't care" for lpm, ternary, range and optional.
    """

    value: int = 0
    mask: int | None = None
    prefix_len: int | None = None
    low: int | None = None
    high: int | None = None
    wildcard: bool = False

    @classmethod
    def exact(cls, value: int) -> Match:
        """Exact match on `value`."""
        return cls(value=value)

    @classmethod
    def lpm(cls, value: int, prefix_len: int) -> Match:
        """Longest-prefix match."""
        return cls(value=value, prefix_len=prefix_len)

    @classmethod
    def ternary(cls, value: int, mask: int) -> Match:
        """Value/mask match."""
        return cls(value=value, mask=mask)

    @classmethod
    def range(cls, low: int, high: int) -> Match:
        """Inclusive range match."""
        return cls(low=low, high=high)

    @classmethod
    def optional(cls, value: int) -> Match:
        """Optional match on `value` (use dont_care() for the wildcard)."""
        return cls(value=value)

    @classmethod
    def dont_care(cls) -> Match:
        """Wildcard for lpm/ternary/range/optional fields."""
        return cls(wildcard=True)


@dataclass(slots=True)
class TableEntry:
    """A table entry; `action` for direct tables, `member_id`/`group_id` for profile tables."""

    match: tuple[Match, ...]
    priority: int = 0
    action: ActionCall | None = None
    member_id: int | None = None
    group_id: int | None = None
    byte_count: int = 0
    packet_count: int = 0
    meter_config: MeterConfig | None = None
    is_const: bool = False
    idle_timeout_ns: int = 0
    controller_metadata: int = 0
    metadata: bytes = b""
    meter_state: MeterState | None = field(default=None, repr=False)
    key: tuple[tuple[int, int], ...] = field(default=(), repr=False)  # normalized, set on insert
    seq: int = field(default=0, repr=False)
    last_hit_us: int = field(default=0, repr=False)  # for idle timeouts (tables tracking hits)
    idle_notified: bool = field(default=False, repr=False)

    @property
    def counter_data(self) -> tuple[int, int]:
        """(bytes, packets) of the entry's direct counter."""
        return self.byte_count, self.packet_count
