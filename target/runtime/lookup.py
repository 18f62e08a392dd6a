"""Build the specialised lookup function of a table from its current entries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from icefabric.target.runtime.model import ActionCall, TableEntry

if TYPE_CHECKING:
    from icefabric.target.runtime.tables import Table

LookupFn = Callable[[tuple[int, ...], int], tuple[ActionCall, bool]]


def build_lookup(
    table: Table, entries: Sequence[TableEntry], match_idx: tuple[int, ...], mode: str
) -> LookupFn:
    """Return a closure `(key, packet_length) -> (action, hit)` for the current entries."""
    miss = (table.default_action, False)
    plain = (
        table.direct_counter is None
        and table.direct_meter is None
        and table.action_profile is None
        and table.hit_clock is None
    )
    hit = table._hit
    extract = len(match_idx) != len(table.keys)
    resets_color = table.direct_meter is not None

    def on_miss() -> tuple[ActionCall, bool]:
        if resets_color:
            table._last_color = None  # no meter ran: BMv2's read leaves its destination
        return miss

    if not entries:
        if resets_color:
            return lambda key, pl: on_miss()
        return lambda key, pl: miss

    def result(e: TableEntry) -> object:
        return (e.action, True) if plain else e

    def finish(res: object, key: tuple[int, ...], pl: int) -> tuple[ActionCall, bool]:
        if res is None:
            return on_miss()
        if plain:
            return res  # type: ignore[return-value]
        return hit(res, key, pl)  # type: ignore[arg-type]

    if mode == "exact":
        exact: dict[tuple[int, ...], object] = {
            tuple(v for v, _ in e.key): result(e) for e in entries
        }
        get = exact.get
        if plain and not extract:

            def lookup_exact_plain(key: tuple[int, ...], pl: int) -> tuple[ActionCall, bool]:
                res = get(key)
                return miss if res is None else res  # type: ignore[return-value]

            return lookup_exact_plain

        def lookup_exact(key: tuple[int, ...], pl: int) -> tuple[ActionCall, bool]:
            mk = tuple(key[i] for i in match_idx) if extract else key
            return finish(get(mk), key, pl)

        return lookup_exact

    if mode == "lpm":
        pos = next(i for i, k in enumerate(table.match_keys) if k.match_kind == "lpm")
        by_mask: dict[int, dict[object, object]] = {}
        for e in entries:
            mask = e.key[pos][1]
            k = tuple(v for v, _ in e.key)
            by_mask.setdefault(mask, {})[k[pos] if len(k) == 1 else k] = result(e)
        levels = sorted(by_mask.items(), key=lambda kv: -bin(kv[0]).count("1"))
        single = len(table.match_keys) == 1

        def lookup_lpm(key: tuple[int, ...], pl: int) -> tuple[ActionCall, bool]:
            mk = tuple(key[i] for i in match_idx) if extract else key
            if single:
                v = mk[0]
                for mask, d in levels:
                    res = d.get(v & mask)
                    if res is not None:
                        return finish(res, key, pl)
                return on_miss()
            head, v, tail = mk[:pos], mk[pos], mk[pos + 1 :]
            for mask, d in levels:
                res = d.get((*head, v & mask, *tail))
                if res is not None:
                    return finish(res, key, pl)
            return on_miss()

        return lookup_lpm

    # general: priority order, highest number first, then insertion order
    kinds = [k.match_kind for k in table.match_keys]
    widths = [k.bitwidth for k in table.match_keys]
    masked_pos = [i for i, kd in enumerate(kinds) if kd != "range"]
    range_pos = [i for i, kd in enumerate(kinds) if kd == "range"]
    rules: list[tuple[int, int, tuple[tuple[int, int, int], ...], object]] = []
    for e in sorted(entries, key=lambda e: (-e.priority, e.seq)):
        big_v = big_m = 0
        for i in masked_pos:
            v, m = e.key[i]
            big_v = (big_v << widths[i]) | v
            big_m = (big_m << widths[i]) | m
        ranges = tuple((i, e.key[i][0], e.key[i][1]) for i in range_pos)
        rules.append((big_v, big_m, ranges, result(e)))
    shifts = [(i, widths[i]) for i in masked_pos]

    def lookup_general(key: tuple[int, ...], pl: int) -> tuple[ActionCall, bool]:
        mk = tuple(key[i] for i in match_idx) if extract else key
        k = 0
        for i, w in shifts:
            k = (k << w) | mk[i]
        for big_v, big_m, ranges, res in rules:
            if k & big_m == big_v:
                if ranges and not all(lo <= mk[i] <= hi for i, lo, hi in ranges):
                    continue
                return finish(res, key, pl)
        return on_miss()

    return lookup_general
