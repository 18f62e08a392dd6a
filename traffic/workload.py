"""Collective workloads as dependency schedules, and the executor that runs one on endpoints.

A :class:`Schedule` is pure data derived from a CCL job description (``control/ccl/``): every
message a rank sends, on which flow (queue pair) it travels, how many bytes, and which messages
must have *arrived* before it may be posted. It has the real collective's structure, not
independent flows:

* ring all-reduce (C channels): each channel's share is cut into n chunks; 2(n-1) steps
  (reduce-scatter then all-gather); in step s rank i sends to its ring successor, and may send
  step s+1 only after it received step s from its predecessor (NCCL's chunk-by-chunk pipeline);
* ring all-gather / reduce-scatter: the same with n-1 steps;
* tree all-reduce: reduce up the tree (a rank sends to its parent once every child's message
  arrived), then broadcast down (the root starts once the reduce is complete, a rank forwards to
  its children once its parent's message arrived);
* halving-doubling: step k exchanges with the partner at distance n / 2^(k+1); step k+1 waits
  for step k's message from the partner (all-reduce: reduce-scatter then the reverse);
* all-to-all: every ordered pair at once;
* send-recv (pipeline stages): pair (a, b) is sent once every earlier-listed pair into a
  arrived, so a chain of stages forwards activations stage by stage.

``slices`` cuts every transfer into that many messages with slice-wise dependencies (NCCL
pipelines a step in slices the same way). Phases run one after another: a host's first
messages of a phase wait for every message of the previous phase addressed to that host (it
has finished its part). Every dependency of a message is an arrival *at its sender*, so each
host can run its share of a schedule alone (``WorkloadExecutor(host=...)``), as real ranks do.
Message volumes add up per flow to exactly what :func:`icefabric.control.ccl.demand_from_job`
plans (flow ids are the same), so the controller plans the flows the hosts then send. Transfers
between ranks on one host travel over the host's own links: they complete as soon as posted.

:class:`WorkloadExecutor` runs a schedule: it posts every message whose dependencies arrived
through a ``post`` callback (the engine puts it on the flow's queue pair) and is told of each
arrival by :meth:`WorkloadExecutor.on_message` (the receiver endpoint's message callback).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from icefabric.control.ccl.demand import default_tree, demand_from_job
from icefabric.control.ccl.job import JobSpec, Phase

log = logging.getLogger(__name__)

#: nccl-tests' bus-bandwidth factor per collective (busbw = algbw * factor(n)).
_BUSBW: dict[str, Callable[[int], float]] = {
    "all-reduce": lambda n: 2.0 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "send-recv": lambda n: 1.0,
}


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' busbw / algbw for ``collective`` over ``nranks`` ranks."""
    try:
        return float(_BUSBW[collective](nranks))
    except KeyError:
        raise ValueError(f"no bus-bandwidth factor for collective {collective!r}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a schedule: ``nbytes`` from ``src_host`` to ``dst_host`` on one flow."""

    id: int
    phase: str
    flow_id: str | None  # None: both ranks on one host (no network flow)
    src_host: str
    dst_host: str
    nbytes: int
    deps: tuple[int, ...]  # ids of messages that must have arrived before this one is posted
    job: str = ""  # the job it belongs to (a schedule of several jobs: merge_schedules)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulePhase:
    """One phase of a schedule and what nccl-tests would report for it."""

    name: str
    collective: str
    algorithm: str
    nranks: int
    channels: int
    message_bytes: int  # S as nccl-tests counts it
    busbw_factor: float
    first: int  # message ids first .. last - 1
    last: int
    job: str = ""  # the job it belongs to


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """Every message of one job (or of several running side by side: :func:`merge_schedules`)
    with its dependencies, phase by phase."""

    job: str
    messages: tuple[Message, ...]
    phases: tuple[SchedulePhase, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (what a real-time host process is given)."""
        return {
            "job": self.job,
            "phases": [asdict(p) for p in self.phases],
            "messages": [asdict(m) for m in self.messages],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Schedule:
        """The inverse of :meth:`to_dict` (ValueError naming what is wrong)."""
        try:
            msgs = tuple(
                Message(**{**m, "deps": tuple(int(d) for d in m["deps"])}) for m in data["messages"]
            )
            phases = tuple(SchedulePhase(**p) for p in data["phases"])
            sched = cls(job=str(data["job"]), messages=msgs, phases=phases)
        except (KeyError, TypeError) as e:
            raise ValueError(f"schedule: expected the fields of Schedule.to_dict: {e}") from e
        for i, m in enumerate(msgs):
            if m.id != i or any(not 0 <= d < len(msgs) for d in m.deps):
                raise ValueError(f"schedule: messages[{i}]: ids out of order or unknown dependency")
        return sched

    def flow_bytes(self) -> dict[str, int]:
        """Bytes per network flow id over the whole schedule."""
        out: dict[str, int] = {}
        for m in self.messages:
            if m.flow_id is not None:
                out[m.flow_id] = out.get(m.flow_id, 0) + m.nbytes
        return out

    def host_bytes(self, phase: str | None = None) -> tuple[dict[str, int], dict[str, int]]:
        """(bytes sent, bytes received) per host over the network (of one phase if given)."""
        sent: dict[str, int] = {}
        recv: dict[str, int] = {}
        for m in self.messages:
            if m.flow_id is None or (phase is not None and m.phase != phase):
                continue
            sent[m.src_host] = sent.get(m.src_host, 0) + m.nbytes
            recv[m.dst_host] = recv.get(m.dst_host, 0) + m.nbytes
        return sent, recv


class _Builder:
    """Accumulates messages of one job; ``send`` returns the ids of the slices it created."""

    def __init__(self, job: JobSpec, slices: int) -> None:
        self.job = job
        self.slices = slices
        self.messages: list[Message] = []
        self.barrier: dict[str, tuple[int, ...]] = {}  # host -> previous phase's arrivals at it

    def send(
        self, phase: Phase, ch: int, src: int, dst: int, nbytes: float, deps: list[list[int]]
    ) -> list[int]:
        """Messages src -> dst of ``nbytes`` in ``slices`` pieces; slice j waits for deps[j]
        (and, when it has no dependency of its own, for the previous phase)."""
        hs, hd = self.job.ranks[src].host, self.job.ranks[dst].host
        fid = None if hs == hd else f"{self.job.name}/{phase.name}/c{ch}/r{src}->r{dst}"
        total = max(round(nbytes), self.slices)
        ids = []
        for j in range(self.slices):
            size = total // self.slices + (1 if j < total % self.slices else 0)
            d = tuple(sorted(set(deps[j]))) if deps[j] else self.barrier.get(hs, ())
            mid = len(self.messages)
            self.messages.append(
                Message(
                    id=mid,
                    phase=phase.name,
                    flow_id=fid,
                    src_host=hs,
                    dst_host=hd,
                    nbytes=size,
                    deps=d,
                    job=self.job.name,
                )
            )
            ids.append(mid)
        return ids

    def none(self) -> list[list[int]]:
        """No dependencies for any slice."""
        return [[] for _ in range(self.slices)]


def _ring(b: _Builder, ph: Phase, steps: int) -> None:
    n = len(ph.ranks)
    chunk = ph.message_bytes / ph.channels / n
    for ch in range(ph.channels):
        ring = ph.rings[ch] if ph.rings else ph.ranks
        prev: dict[int, list[int]] = {}  # rank -> slices it received in the last step
        for _step in range(steps):
            got: dict[int, list[int]] = {}
            for i in range(n):
                src, dst = ring[i], ring[(i + 1) % n]
                deps = [[x] for x in prev[src]] if src in prev else b.none()
                got[dst] = b.send(ph, ch, src, dst, chunk, deps)
            prev = got


def _tree(b: _Builder, ph: Phase) -> None:
    size = ph.message_bytes / ph.channels
    for ch in range(ph.channels):
        tree = ph.trees[ch] if ph.trees else default_tree(ph.ranks, ch)
        children: dict[int, list[int]] = {r: [] for r in tree}
        for r, parent in tree.items():
            if parent >= 0:
                children[parent].append(r)
        root = next(r for r, p in tree.items() if p < 0)
        # reduce: children before parents (reverse breadth-first order from the root)
        order = [root]
        for r in order:
            order.extend(sorted(children[r]))
        up: dict[int, list[int]] = {}  # rank -> slices it sent to its parent
        for r in reversed(order[1:]):
            deps = [[up[c][j] for c in children[r]] for j in range(b.slices)]
            up[r] = b.send(ph, ch, r, tree[r], size, deps)
        # broadcast: parents before children
        got: dict[int, list[list[int]]] = {
            root: [[up[c][j] for c in children[root]] for j in range(b.slices)]
        }
        for r in order:
            for c in sorted(children[r]):
                got[c] = [[x] for x in b.send(ph, ch, r, c, size, got[r])]


def _halving_doubling(b: _Builder, ph: Phase) -> None:
    n = len(ph.ranks)
    steps = n.bit_length() - 1
    order = list(range(steps))
    if ph.collective == "all-reduce":
        order = order + order[::-1]
    for ch in range(ph.channels):
        prev: dict[int, list[int]] = {}  # rank -> slices it received in the last step
        for k in order:
            dist = n >> (k + 1)
            vol = ph.message_bytes / (1 << (k + 1)) / ph.channels
            got: dict[int, list[int]] = {}
            for i in range(n):
                src, dst = ph.ranks[i], ph.ranks[i ^ dist]
                deps = [[x] for x in prev[src]] if src in prev else b.none()
                got[dst] = b.send(ph, ch, src, dst, vol, deps)
            prev = got


def _all_to_all(b: _Builder, ph: Phase) -> None:
    n = len(ph.ranks)
    for ch in range(ph.channels):
        for s, d in itertools.permutations(ph.ranks, 2):
            b.send(ph, ch, s, d, ph.message_bytes / n / ph.channels, b.none())


def _send_recv(b: _Builder, ph: Phase) -> None:
    for ch in range(ph.channels):
        into: dict[int, list[list[int]]] = {}  # rank -> slices of every pair into it so far
        for s, d in ph.pairs:
            deps = [[ids[j] for ids in into.get(s, [])] for j in range(b.slices)]
            into.setdefault(d, []).append(
                b.send(ph, ch, s, d, ph.message_bytes / ph.channels, deps)
            )


def build_schedule(job: JobSpec, *, slices: int = 1) -> Schedule:
    """The dependency schedule of every phase of ``job`` (ValueError for what it cannot model)."""
    if slices < 1:
        raise ValueError(f"slices: expected an integer >= 1, got {slices}")
    b = _Builder(job, slices)
    phases: list[SchedulePhase] = []
    for ph in job.phases:
        first = len(b.messages)
        if ph.collective == "send-recv":
            _send_recv(b, ph)
        elif ph.collective == "all-to-all":
            _all_to_all(b, ph)
        elif ph.algorithm == "ring":
            _ring(
                b,
                ph,
                2 * (len(ph.ranks) - 1) if ph.collective == "all-reduce" else len(ph.ranks) - 1,
            )
        elif ph.algorithm == "tree":
            _tree(b, ph)
        elif ph.algorithm == "halving-doubling":
            _halving_doubling(b, ph)
        else:
            raise ValueError(f"phase {ph.name!r}: no schedule for {ph.collective} {ph.algorithm}")
        last = len(b.messages)
        used = {m.src_host for m in b.messages[first:last]}
        n = len(ph.ranks) if ph.collective != "send-recv" else len(used)
        phases.append(
            SchedulePhase(
                name=ph.name,
                collective=ph.collective,
                algorithm=ph.algorithm,
                nranks=len(ph.ranks),
                channels=ph.channels,
                message_bytes=ph.message_bytes,
                busbw_factor=busbw_factor(ph.collective, max(n, 2)),
                first=first,
                last=last,
                job=job.name,
            )
        )
        into: dict[str, list[int]] = {}
        for m in b.messages[first:last]:
            into.setdefault(m.dst_host, []).append(m.id)
        b.barrier = {h: tuple(ids) for h, ids in into.items()}
    return Schedule(job=job.name, messages=tuple(b.messages), phases=tuple(phases))


def merge_schedules(schedules: Sequence[Schedule]) -> Schedule:
    """Several jobs' schedules as one, running side by side from the same start: the messages
    renumbered in order (dependencies with them; no job waits for another), every phase named
    ``JOB/PHASE`` so that phases of different jobs stay apart, the job ``A+B``.  One schedule
    is returned as it is.  ValueError when two jobs share a name."""
    if len(schedules) == 1:
        return schedules[0]
    names = [s.job for s in schedules]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"jobs: expected distinct job names, got {names}")
    messages: list[Message] = []
    phases: list[SchedulePhase] = []
    for s in schedules:
        base = len(messages)
        messages.extend(
            replace(
                m,
                id=m.id + base,
                phase=f"{s.job}/{m.phase}",
                deps=tuple(d + base for d in m.deps),
                job=m.job or s.job,
            )
            for m in s.messages
        )
        phases.extend(
            replace(
                p,
                name=f"{s.job}/{p.name}",
                first=p.first + base,
                last=p.last + base,
                job=p.job or s.job,
            )
            for p in s.phases
        )
    return Schedule(job="+".join(names), messages=tuple(messages), phases=tuple(phases))


def check_against_demand(schedule: Schedule, job: JobSpec) -> list[str]:
    """Flows whose scheduled bytes differ from the demand the controller plans (by > 1 byte per
    message): empty when the two agree."""
    want = {f.flow_id: f.bytes for f in demand_from_job(job)}
    got = schedule.flow_bytes()
    per_flow: dict[str, int] = {}
    for m in schedule.messages:
        if m.flow_id is not None:
            per_flow[m.flow_id] = per_flow.get(m.flow_id, 0) + 1
    out = [f"{fid}: in the schedule, not in the demand" for fid in got if fid not in want]
    out += [f"{fid}: in the demand, not in the schedule" for fid in want if fid not in got]
    out += [
        f"{fid}: {got[fid]} bytes scheduled, {want[fid]:.0f} planned"
        for fid in got
        if fid in want and abs(got[fid] - want[fid]) > per_flow[fid]
    ]
    return out


PostFn = Callable[[Message, float], None]


@dataclass(slots=True)
class WorkloadExecutor:
    """Runs a schedule: posts messages when their dependencies arrived, records the times.

    With ``host`` it runs only that host's share (what a real-time host process does): it posts
    the host's own messages and is told of the messages that arrive at the host; ``done`` means
    all of those arrived and all of its own were posted.
    """

    schedule: Schedule
    post: PostFn  # puts a network message on its flow's queue pair at the given time (us)
    host: str | None = None
    # jobs that have not arrived yet: their first messages wait for :meth:`release`
    held: frozenset[str] = frozenset()
    posted_us: dict[int, float] = field(default_factory=dict)
    arrived_us: dict[int, float] = field(default_factory=dict)
    _waiting: dict[int, int] = field(default_factory=dict)  # message -> deps not yet arrived
    _dependents: dict[int, list[int]] = field(default_factory=dict)
    _expect: int = 0  # messages this executor must see arrive (and post, for a host)

    def __post_init__(self) -> None:
        for m in self.schedule.messages:
            if self.host is not None and self.host not in (m.src_host, m.dst_host):
                continue
            self._waiting[m.id] = len(m.deps)
            for d in m.deps:
                self._dependents.setdefault(d, []).append(m.id)
        self._expect = len(self._waiting)

    def _sends(self, mid: int) -> bool:
        return self.host is None or self.schedule.messages[mid].src_host == self.host

    @property
    def done(self) -> bool:
        """Every message has arrived (host: every message to it arrived, all of its own posted)."""
        if self.host is None:
            return len(self.arrived_us) == self._expect
        return all(
            (mid in self.arrived_us)
            if self.schedule.messages[mid].dst_host == self.host
            else (mid in self.posted_us)
            for mid in self._waiting
        )

    @property
    def remaining(self) -> int:
        """Messages that have not arrived yet (of those this executor follows)."""
        return self._expect - len(self.arrived_us)

    def start(self, now_us: float) -> None:
        """Post every message without dependencies (but those of the ``held`` jobs)."""
        self._post_roots(lambda job: job not in self.held, now_us)

    def release(self, job: str, now_us: float) -> None:
        """A held job arrives: post its messages without dependencies."""
        if job not in self.held:
            raise ValueError(f"job {job!r} is not held (held: {sorted(self.held) or 'none'})")
        self.held = self.held - {job}
        self._post_roots(lambda j: j == job, now_us)

    def _post_roots(self, of_job: Callable[[str], bool], now_us: float) -> None:
        msgs = self.schedule.messages
        self._release(
            (
                mid
                for mid, n in self._waiting.items()
                if n == 0 and self._sends(mid) and of_job(msgs[mid].job)
            ),
            now_us,
        )

    def on_message(self, message_id: int, now_us: float) -> None:
        """A whole message arrived at its receiver (the endpoint's message callback)."""
        known = message_id in self._waiting and (
            message_id in self.posted_us or not self._sends(message_id)
        )
        if message_id in self.arrived_us or not known:
            log.warning(
                "message %d arrived twice, unknown or before it was posted: ignored", message_id
            )
            return
        self._arrive(message_id, now_us)

    def _arrive(self, mid: int, now_us: float) -> None:
        self.arrived_us[mid] = now_us
        ready = []
        for d in self._dependents.get(mid, ()):
            self._waiting[d] -= 1
            if self._waiting[d] == 0 and self._sends(d):
                ready.append(d)
        self._release(ready, now_us)

    def _release(self, ids: Iterable[int], now_us: float) -> None:
        local = []
        for mid in ids:
            self.posted_us[mid] = now_us
            m = self.schedule.messages[mid]
            if m.flow_id is None:
                local.append(mid)
            else:
                self.post(m, now_us)
        for mid in local:  # same host: no network, arrives at once
            self._arrive(mid, now_us)

    def phase_times(self, phase: SchedulePhase) -> tuple[float, float] | None:
        """(first post, last arrival) of a phase in us, None until it finished."""
        ids = range(phase.first, phase.last)
        if not all(i in self.arrived_us for i in ids):
            return None
        return min(self.posted_us[i] for i in ids), max(self.arrived_us[i] for i in ids)

    def flow_times(self) -> dict[str, tuple[float, float]]:
        """Per network flow: (first post, last arrival) in us over the messages that arrived."""
        out: dict[str, tuple[float, float]] = {}
        for mid, t in self.arrived_us.items():
            m = self.schedule.messages[mid]
            if m.flow_id is None:
                continue
            p = self.posted_us[mid]
            old = out.get(m.flow_id)
            out[m.flow_id] = (p, t) if old is None else (min(old[0], p), max(old[1], t))
        return out
