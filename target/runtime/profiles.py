"""Action profiles and action selectors (v1model action_profile / action_selector)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from icefabric.target.runtime.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
)
from icefabric.target.runtime.hashes import HASH_ALGORITHMS, compute_hash
from icefabric.target.runtime.model import ActionCall


class ActionProfile:
    """Members (id -> action) and, for a selector, groups of members chosen by a hash.

    A group picks member number `hash(selector fields) % group size`, members ordered by the
    order they were created in (BMv2 orders by member handle, which is allocation order).
    A member of weight w counts w times.
    """

    def __init__(
        self,
        name: str,
        size: int,
        selector: str | None = None,
        max_group_size: int = 0,
    ) -> None:
        if selector is not None and selector not in HASH_ALGORITHMS:
            raise ValueError(f"action_selector {name}: unknown hash algorithm {selector!r}")
        self.name = name
        self.size = size
        self.selector = selector
        self.max_group_size = max_group_size
        self.actions: set[str] = set()  # filled in by the table(s) using the profile
        self.members: dict[int, ActionCall] = {}
        self._member_seq: dict[int, int] = {}
        self._seq = 0
        self.groups: dict[int, dict[int, int]] = {}  # group id -> {member id: weight}
        self.group_max_size: dict[int, int] = {}
        self._group_cache: dict[int, tuple[ActionCall, ...]] = {}
        self.member_refs: dict[int, int] = {}  # member id -> references from tables/groups
        self.group_refs: dict[int, int] = {}
        self.lock = threading.RLock()

    @property
    def has_selector(self) -> bool:
        """True for an action_selector."""
        return self.selector is not None

    # --- members -------------------------------------------------------------------------
    def add_member(self, member_id: int, action: ActionCall) -> None:
        """Create a member; raises AlreadyExists / ResourceExhausted / InvalidArgument."""
        with self.lock:
            if member_id in self.members:
                raise AlreadyExistsError(f"{self.name}: member {member_id} already exists")
            if len(self.members) >= self.size > 0:
                raise ResourceExhaustedError(f"{self.name}: profile full ({self.size} members)")
            self._check_action(action)
            self.members[member_id] = action
            self._seq += 1
            self._member_seq[member_id] = self._seq

    def modify_member(self, member_id: int, action: ActionCall) -> None:
        """Change a member's action (groups using it see the change)."""
        with self.lock:
            if member_id not in self.members:
                raise NotFoundError(f"{self.name}: member {member_id} does not exist")
            self._check_action(action)
            self.members[member_id] = action
            self._group_cache.clear()

    def delete_member(self, member_id: int) -> None:
        """Delete a member that no group or table entry references."""
        with self.lock:
            if member_id not in self.members:
                raise NotFoundError(f"{self.name}: member {member_id} does not exist")
            if self.member_refs.get(member_id, 0) > 0:
                raise FailedPreconditionError(
                    f"{self.name}: member {member_id} is still referenced by a group or entry"
                )
            del self.members[member_id]
            del self._member_seq[member_id]

    # --- groups --------------------------------------------------------------------------
    def add_group(
        self, group_id: int, members: Sequence[tuple[int, int]] = (), max_size: int = 0
    ) -> None:
        """Create a group of (member id, weight) pairs."""
        with self.lock:
            if not self.has_selector:
                raise InvalidArgumentError(f"{self.name}: groups need an action selector")
            if group_id in self.groups:
                raise AlreadyExistsError(f"{self.name}: group {group_id} already exists")
            if max_size < 0 or (self.max_group_size and max_size > self.max_group_size):
                raise InvalidArgumentError(
                    f"{self.name}: group max_size {max_size} exceeds {self.max_group_size}"
                )
            if len(self.groups) >= self.size > 0:
                raise ResourceExhaustedError(f"{self.name}: too many groups ({self.size})")
            self.groups[group_id] = {}
            self.group_max_size[group_id] = max_size
            try:
                self._set_group_members(group_id, members)
            except Exception:
                del self.groups[group_id]
                del self.group_max_size[group_id]
                raise

    def modify_group(
        self, group_id: int, members: Sequence[tuple[int, int]], max_size: int | None = None
    ) -> None:
        """Replace a group's members (and optionally its max size)."""
        with self.lock:
            if group_id not in self.groups:
                raise NotFoundError(f"{self.name}: group {group_id} does not exist")
            if max_size is not None and max_size != self.group_max_size[group_id]:
                if max_size and self.max_group_size and max_size > self.max_group_size:
                    raise InvalidArgumentError(f"{self.name}: group max_size {max_size} too big")
                self.group_max_size[group_id] = max_size
            self._set_group_members(group_id, members)

    def delete_group(self, group_id: int) -> None:
        """Delete a group no table entry references."""
        with self.lock:
            if group_id not in self.groups:
                raise NotFoundError(f"{self.name}: group {group_id} does not exist")
            if self.group_refs.get(group_id, 0) > 0:
                raise FailedPreconditionError(
                    f"{self.name}: group {group_id} is still referenced by a table entry"
                )
            self._set_group_members(group_id, ())
            del self.groups[group_id]
            del self.group_max_size[group_id]
            self._group_cache.pop(group_id, None)

    def _set_group_members(self, group_id: int, members: Sequence[tuple[int, int]]) -> None:
        new: dict[int, int] = {}
        for member_id, weight in members:
            if member_id not in self.members:
                raise NotFoundError(f"{self.name}: group {group_id}: no member {member_id}")
            if weight < 1:
                raise InvalidArgumentError(
                    f"{self.name}: group {group_id}: member {member_id} weight {weight} < 1"
                )
            if member_id in new:
                raise InvalidArgumentError(
                    f"{self.name}: group {group_id}: member {member_id} listed twice"
                )
            new[member_id] = weight
        limit = self.group_max_size.get(group_id, 0) or self.max_group_size
        total = sum(new.values())
        if limit and total > limit:
            raise ResourceExhaustedError(
                f"{self.name}: group {group_id}: {total} members exceed max size {limit}"
            )
        for member_id in self.groups[group_id]:
            self.member_refs[member_id] -= 1
        for member_id in new:
            self.member_refs[member_id] = self.member_refs.get(member_id, 0) + 1
        self.groups[group_id] = new
        self._group_cache.pop(group_id, None)

    # --- data plane ----------------------------------------------------------------------
    def group_actions(self, group_id: int) -> tuple[ActionCall, ...]:
        """The group's member actions in selection order (weights expanded)."""
        cached = self._group_cache.get(group_id)
        if cached is None:
            with self.lock:
                members = self.groups.get(group_id, {})
                order = sorted(members, key=self._member_seq.__getitem__)
                cached = tuple(self.members[m] for m in order for _ in range(members[m]))
                self._group_cache[group_id] = cached
        return cached

    def select(
        self, group_id: int, selector_fields: Sequence[tuple[int, int]]
    ) -> ActionCall | None:
        """Pick the group member for these selector field values; None for an empty group."""
        actions = self.group_actions(group_id)
        if not actions:
            return None
        if len(actions) == 1:
            return actions[0]
        h = compute_hash(self.selector or "crc16", selector_fields)
        return actions[h % len(actions)]

    def _check_action(self, action: ActionCall) -> None:
        if self.actions and action.name not in self.actions:
            raise InvalidArgumentError(
                f"{self.name}: action {action.name!r} is not one of {sorted(self.actions)}"
            )

    def clear(self) -> None:
        """Remove every group and member."""
        with self.lock:
            self.members.clear()
            self._member_seq.clear()
            self.groups.clear()
            self.group_max_size.clear()
            self._group_cache.clear()
            self.member_refs.clear()
            self.group_refs.clear()
