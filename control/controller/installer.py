"""The installer: desired state -> entries -> writes, as one object the Controller owns.

The switches hold base forwarding (a pure function of the topology, its failures and the
options, cached) plus the planned flows. A change writes only the difference against what the
installer knows each switch holds (``installed``). It is handed what it needs explicitly: the
topology, the tag map, the switch pool, whether this controller may write (it is the active
primary), the store's fence check and where a switch whose write was refused is resynced; plans,
flows and real keys come in with each call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import grpc

from icefabric.control import fabric
from icefabric.control.fabric import FabricOptions, TagMap, entity_key
from icefabric.control.install import diff_updates, merge, plan_entries
from icefabric.control.p4rt import Entity, FabricError, P4RuntimeError, TableEntry
from icefabric.p4src import ice_p4 as n

if TYPE_CHECKING:
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.flowkey import FlowKey
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.planner.plan import Plan
    from icefabric.control.topology import Topology

log = logging.getLogger(__name__)

BaseKey = tuple[bytes, FabricOptions]  # the topology's failed links and the options
FLOW_TABLES = frozenset({n.TABLE_FLOW_PATH})  # what a planned flow writes
# gRPC codes of a write that reached no working switch (it died, its server is stopping)
_TRANSPORT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
)


class Installer:
    """What every switch should hold, what it holds, and the writes between the two."""

    def __init__(
        self,
        topo: Topology,
        tags: TagMap,
        pool: SwitchPool,
        *,
        options: FabricOptions,
        may_write: Callable[[], bool],
        check_fence: Callable[[], None],
        resync_later: Callable[[str], None],
    ) -> None:
        self.topo = topo
        self.tags = tags
        self.pool = pool
        self.options = options
        self._may_write = may_write
        self._check_fence = check_fence
        self._resync_later = resync_later  # a switch that refused a write, brought back in step
        self.installed: dict[str, dict[tuple[object, ...], Entity]] = {name: {} for name in pool}
        self._base_cache: tuple[BaseKey, dict[str, list[Entity]]] | None = None
        self._applied_base: BaseKey | None = None  # the base forwarding the switches hold
        self.marks = (0.0, 0.0)  # time.monotonic() when flows / base were last installed

    # -- desired state ---------------------------------------------------------------------

    def base_key(self) -> BaseKey:
        """What base forwarding depends on: the failed links and the options."""
        return (self.topo.failed.tobytes(), self.options)

    def base(self) -> dict[str, list[Entity]]:
        """Base forwarding, recomputed only when failures or options changed."""
        key = self.base_key()
        if self._base_cache is None or self._base_cache[0] != key:
            self._base_cache = (key, fabric.base_entries(self.topo, self.options, self.tags))
        return self._base_cache[1]

    def flow_entries(
        self, plan: Plan, flows: Mapping[str, Flow], keys: Mapping[str, FlowKey]
    ) -> dict[str, list[Entity]]:
        """The planned flows' entries (``keys``: the real keys agents reported, by flow id)."""
        return plan_entries(self.topo, plan, flows, self.tags, keys)

    def desired(
        self, plan: Plan, flows: Mapping[str, Flow], keys: Mapping[str, FlowKey]
    ) -> dict[str, list[Entity]]:
        """Every switch's entities: base forwarding plus the planned flows."""
        return merge(self.base(), self.flow_entries(plan, flows, keys))

    # -- what the switches hold ------------------------------------------------------------

    @property
    def base_stale(self) -> bool:
        """Failures or options changed since base forwarding was last written."""
        return self._applied_base != self.base_key()

    def base_written(self) -> None:
        """The switches now hold the current base forwarding."""
        self._applied_base = self.base_key()

    def forget_base(self) -> None:
        """Nothing is known of the switches' base forwarding (a new term's takeover)."""
        self._applied_base = None

    def holds(self, switch: str, entities: Iterable[Entity]) -> None:
        """``switch`` holds exactly ``entities`` (after a resync)."""
        self.installed[switch] = {entity_key(e): e for e in entities}

    def holds_all(self, desired: Mapping[str, Iterable[Entity]]) -> None:
        """Every switch of ``desired`` holds exactly its entities (as after a resync of each)."""
        for sw, entities in desired.items():
            self.holds(sw, entities)

    def apply(self, desired: Mapping[str, Iterable[Entity]], *, tables: Iterable[str] = ()) -> int:
        """Write the difference between what is installed and ``desired`` on every switch;
        the number of updates.

        With ``tables`` only entries of those tables are compared (the others stay as they are).
        A switch that is down gets everything by resync when it returns; nothing is written
        unless this controller may write (it is the active primary and its fence holds). Every
        switch's ``installed`` becomes what it must hold, also where a write failed (a resync
        brings it there): see :meth:`_out_of_step`.
        """
        only = frozenset(tables)
        plans: dict[str, tuple[list[Any], dict[tuple[object, ...], Entity]]] = {}
        for sw in self.installed:
            new = list(desired.get(sw, []))
            old = list(self.installed[sw].values())
            if only:
                new = [e for e in new if _table_of(e) in only]
                old = [e for e in old if _table_of(e) in only]
            updates = diff_updates(old, new)
            if not updates:
                continue
            after = dict(self.installed[sw])
            for u in updates:
                if u.type == "DELETE":
                    after.pop(entity_key(u.entity), None)
                else:
                    after[entity_key(u.entity)] = u.entity
            plans[sw] = (updates, after)
        if not plans:
            return 0
        live = [sw for sw in plans if self.pool[sw].is_connected]
        failed: FabricError | None = None
        if self._may_write() and live:
            self._check_fence()  # an etcd replica whose lease may end writes nothing
            try:
                self.pool.run_all(
                    lambda c: c.write(plans[c.name][0]), names=live, operation="write"
                )
            except FabricError as exc:
                failed = exc
        # what every switch must hold now, the ones whose write failed too: a resync (below,
        # or when a lost switch returns) brings each of those to exactly this
        for sw, (_, after) in plans.items():
            self.installed[sw] = after
        if failed is not None:
            self._out_of_step(failed)
        return sum(len(u) for u, _ in plans.values())

    def _out_of_step(self, failed: FabricError) -> None:
        """Switches whose write failed: one ERROR line each and a resync (``resync_later``). A
        switch that died meanwhile (Mininet's exit stops every switch; its connection is gone
        or the write found no server) is the down path's business, so only a switch still
        answering makes the change fail (FabricError, after the other switches' bookkeeping)."""
        rejected = {}
        for sw, err in sorted(failed.errors.items()):
            gone = not self.pool[sw].is_connected or (
                isinstance(err, P4RuntimeError) and err.code in _TRANSPORT_CODES
            )
            first = str(err).splitlines()[0]
            if gone:
                log.error("%s: write failed, the switch is gone (%s); resynced when it returns",
                          sw, first)  # fmt: skip
                continue
            log.error("%s: write failed (%s); resyncing it to the plan", sw, first)
            rejected[sw] = err
            self._resync_later(sw)
        if rejected:
            raise FabricError(failed.operation, rejected)


def _table_of(e: Entity) -> str:
    return e.table if isinstance(e, TableEntry) else "clone_session"
