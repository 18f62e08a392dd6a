"""Global congestion control along the schedule in the virtual-time engine: the controller's
max-min caps for the phases now running, and each host's start table, pushed to the agents over
the agent channel's own framing one control delay later (experiment/README.md)."""

from __future__ import annotations

from typing import Any

from icefabric.traffic.workload import Message, Schedule


class PhaseCaps:
    """Global congestion control along the schedule: whenever a phase starts or ends, the
    controller's :class:`RateAllocator` computes max-min fair caps for the flows of the phases
    now running (the CCL schedule says which flows share the fabric) and pushes them to every
    agent over the agent channel's own framing, arriving ``delay_us`` later
    (:meth:`VirtualFabric.push_caps`).  A phase known ahead (:meth:`ahead`) has its caps in
    place when it starts; one learned as it starts runs on the end side's control until they
    arrive.  With ``starts`` each host's start table goes with its caps (what the caps leave
    for flows no plan covers, control/congestion/starts.py)."""

    def __init__(
        self,
        ctl: Any,
        fab: Any,
        schedule: Schedule,
        scale: float,
        delay_us: float = 0.0,
        *,
        starts: bool = True,
    ) -> None:
        self.ctl, self.fab, self.scale, self.delay_us = ctl, fab, scale, delay_us
        self.starts = starts
        self.phase_of: dict[int, str] = {}
        self.flows: dict[str, set[str]] = {}
        self.left: dict[str, int] = {}
        for m in schedule.messages:
            if m.flow_id is not None:
                self.phase_of[m.id] = m.phase
                self.flows.setdefault(m.phase, set()).add(m.flow_id)
                self.left[m.phase] = self.left.get(m.phase, 0) + 1
        self.started: set[str] = set()
        self.running: list[str] = []
        self.pushes = 0

    def ahead(self, phases: set[str]) -> None:
        """The controller knows ``phases`` start next: push their caps now."""
        new = [p for p in sorted(phases) if p not in self.started]
        if new:
            self.started.update(new)
            self.running.extend(new)
            self.push()

    def posted(self, m: Message) -> None:
        """A message is posted: its phase may be starting."""
        if m.phase not in self.started:
            self.started.add(m.phase)
            self.running.append(m.phase)
            self.push()

    def arrived(self, mid: int) -> None:
        """A message arrived: its phase may be over."""
        phase = self.phase_of.get(mid)
        if phase is None:
            return
        self.left[phase] -= 1
        if self.left[phase] == 0:
            self.running.remove(phase)
            self.push()

    def push(self) -> None:
        """Caps for the running phases' flows; every other flow has none."""
        active = set().union(*(self.flows[p] for p in self.running)) if self.running else set()
        caps, starts = caps_for(self.ctl, self.scale, active, ", ".join(self.running))
        self.fab.push_caps(caps, starts=starts if self.starts else None, delay_us=self.delay_us)
        self.pushes += 1


def caps_for(
    ctl: Any, scale: float, active: set[str], phases: str
) -> tuple[dict[Any, float], dict[str, tuple[tuple[str, float], ...]]]:
    """The controller's max-min fair caps for the ``active`` flows, keyed as the agents see
    their flows, and every host's start table, at the run's link rates (the controller
    computes them at the spec's)."""
    hub = ctl.agents
    with ctl.lock:
        rates = ctl.rates.compute(
            ctl.planner.plan(), active, reason=f"experiment: phases {phases or 'none'} running"
        )
        out: dict[Any, float] = {}
        for caps in hub.caps_by_host(rates).values():
            out.update({k: v * scale for k, v in caps.items()})
        starts = {
            host: tuple((dst, bps * scale) for dst, bps in table)
            for host, table in hub.starts_by_host().items()
        }
    return out, starts
