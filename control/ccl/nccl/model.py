"""What a CCL debug log says: communicators with their ranks, rings and trees, and warnings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_WARNINGS = 1000  # kept in full; later ones are counted (``NcclLog.warnings_dropped``)


@dataclass(slots=True, frozen=True)
class ParseWarning:
    """Something in the log that could not be used, with the file and line it is on."""

    source: str
    line: int
    reason: str
    text: str = ""

    def __str__(self) -> str:
        tail = f": {_printable(self.text[:160])}" if self.text else ""
        return f"{self.source}:{self.line}: {_printable(self.reason)}{tail}"


def _printable(text: str) -> str:
    """``text`` with control characters escaped, so a log cannot drive the user's terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(slots=True, frozen=True, kw_only=True)
class RankInfo:
    """Where one rank runs, as its init line says."""

    rank: int
    host: str
    pid: int
    cuda_dev: int
    bus_id: str = ""
    nvml_dev: int | None = None
    comm: str = ""
    comm_id: str = ""
    library: str = "NCCL"
    line: int = 0


@dataclass(slots=True, kw_only=True)
class CommLog:
    """One communicator of a log."""

    key: str  # commId when NCCL printed one, else split:<parent>:<color> or anon-<k>
    source: str
    nranks: int
    first_line: int
    ranks: dict[int, RankInfo] = field(default_factory=dict)
    rings: dict[int, tuple[int, ...]] = field(default_factory=dict)  # channel -> ring order
    ring_sources: dict[int, str] = field(default_factory=dict)  # channel -> how it was found
    trees: dict[int, dict[int, int]] = field(default_factory=dict)  # channel -> {rank: parent}
    tree_format: str = ""  # "2.4" | "2.5-2.7" | "2.8+" | "graph"
    n_channels: int | None = None  # what the Channel NN/MM lines announce
    version: str = ""
    library: str = "NCCL"
    parent: str = ""  # key of the communicator this one was split from

    def hosts(self) -> dict[int, str]:
        """Rank -> host name."""
        return {r: info.host for r, info in sorted(self.ranks.items())}

    def missing_ranks(self) -> list[int]:
        """Ranks no init line named."""
        return [r for r in range(self.nranks) if r not in self.ranks]

    def complete_trees(self) -> dict[int, dict[int, int]]:
        """The trees every rank printed its place in."""
        return {c: t for c, t in sorted(self.trees.items()) if len(t) == self.nranks}

    @property
    def label(self) -> str:
        """A short name for listings."""
        return self.key


@dataclass(slots=True, kw_only=True)
class NcclLog:
    """A parsed log: its communicators (in order of first appearance) and what was not used."""

    source: str
    comms: list[CommLog] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings_dropped: int = 0
    lines_read: int = 0
    lines_used: int = 0

    def warn(self, line: int, reason: str, text: str = "") -> None:
        """Record a warning (the first MAX_WARNINGS in full, the rest counted)."""
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(self.source, line, reason, text))
        else:
            self.warnings_dropped += 1

    def select(self, which: str | None = None) -> CommLog:
        """One communicator: by key (or a unique prefix of it), by index ``#N``, or the largest.

        Raises ``LookupError`` with the choices when ``which`` matches none or several.
        """
        if not self.comms:
            raise LookupError(f"{self.source}: no communicator in the log (no init lines)")
        if which is None:
            return max(self.comms, key=lambda c: (c.nranks, len(c.ranks), -c.first_line))
        if which.startswith("#") and which[1:].isdigit():
            i = int(which[1:])
            if 0 <= i < len(self.comms):
                return self.comms[i]
        hits = [c for c in self.comms if c.key == which.lower()]
        if not hits:
            hits = [c for c in self.comms if c.key.startswith(which.lower())]
        if len(hits) == 1:
            return hits[0]
        choices = ", ".join(f"#{i} {c.key} ({c.nranks} ranks)" for i, c in enumerate(self.comms))
        why = "several communicators match" if hits else "no communicator matches"
        raise LookupError(f"{self.source}: {why} {which!r}; the log has {choices}")


def ranges(values: Iterable[int]) -> str:
    """``0-3, 7, 9-10`` for a sorted list of integers (every value shown, none dropped)."""
    out: list[str] = []
    start = prev = None
    for v in values:
        if start is None:
            start = prev = v
        elif prev is not None and v == prev + 1:
            prev = v
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = v
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)
