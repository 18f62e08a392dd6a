"""Match-action tables with exact / lpm / ternary / range / optional keys.

P4Runtime semantics: among matching entries the highest priority number wins; for tables
with only exact and one lpm key, the longest prefix wins. Lookup structures are rebuilt lazily
after control-plane writes, so a batch of writes costs one rebuild.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from icefabric.target.runtime.clock import Clock
from icefabric.target.runtime.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
)
from icefabric.target.runtime.externs import GREEN, DirectCounter, DirectMeter, MeterState
from icefabric.target.runtime.model import (
    ActionCall,
    KeyField,
    Match,
    TableEntry,
)
from icefabric.target.runtime.profiles import ActionProfile

__all__ = ["ActionCall", "ActionProfile", "KeyField", "Match", "Table", "TableEntry"]

LookupFn = Callable[[tuple[int, ...], int], tuple[ActionCall, bool]]


class Table:
    """One P4 table: entries, default action and the attached direct resources."""

    def __init__(
        self,
        name: str,
        keys: Sequence[KeyField],
        actions: Sequence[str],
        size: int,
        default_action: ActionCall,
        *,
        const_default: bool = False,
        const_entries: Sequence[TableEntry] = (),
        action_profile: ActionProfile | None = None,
        direct_counter: DirectCounter | None = None,
        direct_meter: DirectMeter | None = None,
        default_only_actions: Sequence[str] = (),
        table_only_actions: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.keys = tuple(keys)
        self.actions = tuple(actions)
        self.size = size
        self.initial_default = default_action
        self.default_action = default_action
        self.const_default = const_default
        self.action_profile = action_profile
        self.direct_counter = direct_counter
        self.direct_meter = direct_meter
        self.default_only_actions = frozenset(default_only_actions)
        self.table_only_actions = frozenset(table_only_actions)
        if action_profile is not None:
            action_profile.actions.update(a for a in actions if a not in self.default_only_actions)
        self._match_idx = tuple(i for i, k in enumerate(self.keys) if k.match_kind != "selector")
        self._selector_idx = tuple(i for i, k in enumerate(self.keys) if k.match_kind == "selector")
        self.match_keys = tuple(self.keys[i] for i in self._match_idx)
        kinds = {k.match_kind for k in self.match_keys}
        self.requires_priority = bool(kinds & {"ternary", "range", "optional"})
        lpm_count = sum(1 for k in self.match_keys if k.match_kind == "lpm")
        if lpm_count > 1:
            raise ValueError(f"table {name}: more than one lpm key")
        self._mode = (
            "exact" if kinds <= {"exact"} else ("lpm" if not self.requires_priority else "general")
        )
        self._entries: dict[tuple[object, ...], TableEntry] = {}
        self._seq = 0
        self._lock = threading.RLock()
        self._last_color: int | None = None
        self.hit_clock: Clock | None = None  # set by track_hits(): entries record their last hit
        self.const_entries = bool(const_entries)
        for entry in const_entries:
            entry.is_const = True
            self._insert(entry, allow_const=True)
        self.lookup: LookupFn = self._lookup_dirty

    # --- control plane -------------------------------------------------------------------
    def entry_identity(self, match: Sequence[Match], priority: int) -> tuple[object, ...]:
        """The (normalized key, priority) that identifies an entry."""
        key = self.normalize(match)
        return (key, priority if self.requires_priority else 0)

    def entry_identity_from_key(self, entry: TableEntry) -> tuple[object, ...]:
        """The identity of a stored entry (its normalized key and priority)."""
        return (entry.key, entry.priority if self.requires_priority else 0)

    def normalize(self, match: Sequence[Match]) -> tuple[tuple[int, int], ...]:
        """Check `match` against the key fields; return ((value, mask|high), ...) per field."""
        if len(match) != len(self.match_keys):
            raise InvalidArgumentError(
                f"table {self.name}: {len(match)} match fields given, {len(self.match_keys)} expected"
            )
        out: list[tuple[int, int]] = []
        for kf, m in zip(self.match_keys, match, strict=True):
            out.append(_normalize_field(self.name, kf, m))
        return tuple(out)

    def insert(self, entry: TableEntry) -> None:
        """Add an entry; AlreadyExists / ResourceExhausted / InvalidArgument / PermissionDenied."""
        if self.const_entries:
            raise PermissionDeniedError(f"table {self.name} has const entries")
        self._insert(entry, allow_const=False)

    def _insert(self, entry: TableEntry, *, allow_const: bool) -> None:
        with self._lock:
            self._check_priority(entry.priority)
            ident = self.entry_identity(entry.match, entry.priority)
            if ident in self._entries:
                raise AlreadyExistsError(f"table {self.name}: entry already exists")
            if len(self._entries) >= self.size and not allow_const:
                raise ResourceExhaustedError(f"table {self.name} is full ({self.size} entries)")
            self._check_target(entry)
            self._add_refs(entry)
            entry.key = ident[0]  # type: ignore[assignment]
            self._seq += 1
            entry.seq = self._seq
            if self.direct_meter is not None:
                entry.meter_state = MeterState(entry.meter_config, self.direct_meter.clock.now_us())
            if self.hit_clock is not None:
                entry.last_hit_us = self.hit_clock.now_us()
            self._entries[ident] = entry
            self.lookup = self._lookup_dirty

    def modify(self, entry: TableEntry) -> TableEntry:
        """Replace the action (and meter config / metadata) of an existing entry."""
        if self.const_entries:
            raise PermissionDeniedError(f"table {self.name} has const entries")
        with self._lock:
            ident = self.entry_identity(entry.match, entry.priority)
            old = self._entries.get(ident)
            if old is None:
                raise NotFoundError(f"table {self.name}: entry not found")
            self._check_target(entry)
            self._drop_refs(old)
            self._add_refs(entry)
            old.action, old.member_id, old.group_id = entry.action, entry.member_id, entry.group_id
            old.controller_metadata = entry.controller_metadata
            old.metadata = entry.metadata
            old.idle_timeout_ns = entry.idle_timeout_ns
            old.idle_notified = False
            if entry.meter_config != old.meter_config and self.direct_meter is not None:
                old.meter_config = entry.meter_config
                old.meter_state = MeterState(entry.meter_config, self.direct_meter.clock.now_us())
            self.lookup = self._lookup_dirty
            return old

    def delete(self, match: Sequence[Match], priority: int = 0) -> TableEntry:
        """Remove the entry identified by match and priority; NotFound if absent."""
        if self.const_entries:
            raise PermissionDeniedError(f"table {self.name} has const entries")
        with self._lock:
            ident = self.entry_identity(match, priority)
            old = self._entries.pop(ident, None)
            if old is None:
                raise NotFoundError(f"table {self.name}: entry not found")
            self._drop_refs(old)
            self.lookup = self._lookup_dirty
            return old

    def get(self, match: Sequence[Match], priority: int = 0) -> TableEntry | None:
        """The stored entry with this match and priority, or None."""
        return self._entries.get(self.entry_identity(match, priority))

    def entries(self) -> list[TableEntry]:
        """All entries in insertion order."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.seq)

    def __iter__(self) -> Iterator[TableEntry]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Remove every non-const entry and restore the initial default action."""
        with self._lock:
            for ident, entry in list(self._entries.items()):
                if not entry.is_const:
                    self._drop_refs(entry)
                    del self._entries[ident]
            self.default_action = self.initial_default
            self.lookup = self._lookup_dirty

    def set_default(self, action: ActionCall) -> None:
        """Change the default action; PermissionDenied when it is const."""
        if self.const_default:
            raise PermissionDeniedError(f"table {self.name}: default action is const")
        if action.name not in self.actions:
            raise InvalidArgumentError(
                f"table {self.name}: action {action.name!r} is not one of {list(self.actions)}"
            )
        if action.name in self.table_only_actions:
            raise InvalidArgumentError(
                f"table {self.name}: action {action.name!r} is @tableonly, not a default action"
            )
        self.default_action = action
        self.lookup = self._lookup_dirty

    def reset_default(self) -> None:
        """Restore the program's default action."""
        self.default_action = self.initial_default
        self.lookup = self._lookup_dirty

    def reset_counters(self) -> None:
        """Zero all direct counters."""
        for entry in self._entries.values():
            entry.byte_count = entry.packet_count = 0

    def track_hits(self, clock: Clock | None) -> None:
        """Record each entry's last hit time on `clock` (idle timeouts); None turns it off."""
        with self._lock:
            self.hit_clock = clock
            if clock is not None:
                now = clock.now_us()
                for entry in self._entries.values():
                    entry.last_hit_us = now
            self.lookup = self._lookup_dirty

    def direct_meter_color(self) -> int | None:
        """Colour from the last lookup's direct meter (0 green, 1 yellow, 2 red); None after a
        miss, when BMv2 runs no meter and leaves the destination of ``read`` as it was."""
        return self._last_color

    def _check_priority(self, priority: int) -> None:
        if self.requires_priority:
            if priority <= 0:
                raise InvalidArgumentError(
                    f"table {self.name}: entries need a priority > 0 (ternary/range/optional key)"
                )
        elif priority != 0:
            raise InvalidArgumentError(
                f"table {self.name}: priority must be 0 for a table without "
                "ternary/range/optional keys"
            )

    def _check_target(self, entry: TableEntry) -> None:
        prof = self.action_profile
        if prof is None:
            if entry.action is None:
                raise InvalidArgumentError(f"table {self.name}: entry needs an action")
            if entry.action.name not in self.actions:
                raise InvalidArgumentError(
                    f"table {self.name}: action {entry.action.name!r} is not one of "
                    f"{list(self.actions)}"
                )
            if entry.action.name in self.default_only_actions:
                raise InvalidArgumentError(
                    f"table {self.name}: action {entry.action.name!r} is @defaultonly"
                )
            return
        if entry.member_id is not None:
            if entry.member_id not in prof.members:
                raise NotFoundError(f"{prof.name}: member {entry.member_id} does not exist")
        elif entry.group_id is not None:
            if entry.group_id not in prof.groups:
                raise NotFoundError(f"{prof.name}: group {entry.group_id} does not exist")
        else:
            raise InvalidArgumentError(
                f"table {self.name}: entries of an action-profile table need a member or group"
            )

    def _add_refs(self, entry: TableEntry) -> None:
        prof = self.action_profile
        if prof is None:
            return
        if entry.member_id is not None:
            prof.member_refs[entry.member_id] = prof.member_refs.get(entry.member_id, 0) + 1
        elif entry.group_id is not None:
            prof.group_refs[entry.group_id] = prof.group_refs.get(entry.group_id, 0) + 1

    def _drop_refs(self, entry: TableEntry) -> None:
        prof = self.action_profile
        if prof is None:
            return
        if entry.member_id is not None:
            prof.member_refs[entry.member_id] -= 1
        elif entry.group_id is not None:
            prof.group_refs[entry.group_id] -= 1

    # --- data plane ----------------------------------------------------------------------
    def _lookup_dirty(self, key: tuple[int, ...], packet_length: int) -> tuple[ActionCall, bool]:
        with self._lock:
            self.lookup = self._build()
        return self.lookup(key, packet_length)

    def _build(self) -> LookupFn:
        from icefabric.target.runtime.lookup import build_lookup

        return build_lookup(self, list(self._entries.values()), self._match_idx, self._mode)

    def _hit(
        self, entry: TableEntry, key: tuple[int, ...], packet_length: int
    ) -> tuple[ActionCall, bool]:
        """Apply direct resources and resolve the action of a matching entry."""
        if self.hit_clock is not None:
            entry.last_hit_us = self.hit_clock.now_us()
            entry.idle_notified = False
        if self.direct_counter is not None:
            entry.byte_count += packet_length
            entry.packet_count += 1
        if self.direct_meter is not None:
            state = entry.meter_state
            if state is None:
                self._last_color = GREEN
            else:
                amount = packet_length if self.direct_meter.kind == "bytes" else 1
                self._last_color = state.execute(amount, self.direct_meter.clock.now_us())
        action = entry.action
        if action is not None:
            return action, True
        prof = self.action_profile
        assert prof is not None
        if entry.member_id is not None:
            member = prof.members.get(entry.member_id)
            if member is not None:
                return member, True
            return self.default_action, False
        fields = [(key[i], self.keys[i].bitwidth) for i in self._selector_idx]
        chosen = prof.select(entry.group_id or 0, fields)
        if chosen is None:  # empty group: nothing to run, behave as a miss
            return self.default_action, False
        return chosen, True


def _normalize_field(table: str, kf: KeyField, m: Match) -> tuple[int, int]:
    width = kf.bitwidth
    full = (1 << width) - 1
    kind = kf.match_kind

    def fits(v: int, what: str) -> int:
        if v < 0 or v > full:
            raise InvalidArgumentError(
                f"table {table}: {what} {v:#x} of key {kf.name} does not fit in {width} bits"
            )
        return v

    if kind == "exact":
        if m.wildcard:
            raise InvalidArgumentError(f"table {table}: exact key {kf.name} cannot be a wildcard")
        return fits(m.value, "value"), full
    if kind == "lpm":
        if m.wildcard:
            return 0, 0
        plen = m.prefix_len
        if plen is None:
            if m.mask is None:
                plen = width
            else:
                mask = fits(m.mask, "mask")
                plen = bin(mask).count("1")
                if mask != (full ^ ((1 << (width - plen)) - 1)):
                    raise InvalidArgumentError(
                        f"table {table}: mask {mask:#x} of lpm key {kf.name} is not a prefix"
                    )
        if not 0 <= plen <= width:
            raise InvalidArgumentError(
                f"table {table}: prefix length {plen} of key {kf.name} not in [0, {width}]"
            )
        mask = full ^ ((1 << (width - plen)) - 1)
        return fits(m.value, "value") & mask, mask
    if kind == "ternary":
        if m.wildcard:
            return 0, 0
        mask = full if m.mask is None else fits(m.mask, "mask")
        return fits(m.value, "value") & mask, mask
    if kind == "optional":
        if m.wildcard or m.mask == 0:
            return 0, 0
        return fits(m.value, "value"), full
    if kind == "range":
        if m.wildcard:
            return 0, full
        low = m.value if m.low is None else m.low
        high = m.value if m.high is None else m.high
        fits(low, "low")
        fits(high, "high")
        if low > high:
            raise InvalidArgumentError(
                f"table {table}: range {low}..{high} of key {kf.name} is empty"
            )
        return low, high
    raise InvalidArgumentError(f"table {table}: key {kf.name} of kind {kind} cannot be matched")
