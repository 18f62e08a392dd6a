"""One health summary of the controller's status, never greener than the tables it sums up.

Every row of ``icectl status`` and ``icectl links`` that is not fine is one problem here: a
switch not connected or not primary (and whether it was failed over), a failed link, a link the
probes see down or cannot see (``unknown``: an end switch unreachable), a state file that did
not load, miswired ports, writes paused while etcd answers no lease renewal. ``state`` is ``ok`` only when there is none; ``down`` when this
controller holds no switch as primary; ``degraded`` otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any


def fabric_health(
    status: Mapping[str, Any],
    *,
    failed_switches: Iterable[str] = (),
    down_since: Mapping[str, float] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """``{"state": ok|degraded|down, "problems": [one line each], "summary": str}``."""
    now = time.monotonic() if now is None else now
    failed = set(failed_switches)
    since = down_since or {}
    problems: list[str] = []
    switches = status.get("switches", {})
    standby = status.get("role") != "primary"
    for name, s in sorted(switches.items()):
        if not s.get("connected"):
            ago = f" for {now - since[name]:.1f} s" if name in since else ""
            what = "failed over, flows routed around it" if name in failed else "not failed over"
            problems.append(f"switch {name} DOWN (unreachable{ago}; {what})")
        elif not s.get("primary") and not standby:
            problems.append(f"switch {name} connected but not primary")
    for link in status.get("failed_links", []):
        problems.append(f"link {link} failed")
    probes = status.get("link_probes", {})
    for row in probes.get("links", []):
        if row.get("state") == "down" and not row.get("failed"):
            problems.append(f"link {row['link']} down (probes)")
        elif row.get("state") == "unknown":
            problems.append(f"link {row['link']} unknown (an end switch unreachable)")
    miswired = probes.get("miswired", [])
    if miswired:
        problems.append(f"{len(miswired)} miswired port(s) (icectl links)")
    paused = (status.get("store") or {}).get("writes_paused_s") or 0
    if paused:
        problems.append(
            f"writes paused {paused:.1f} s: etcd has not answered a lease renewal (term kept)"
        )
    for err in status.get("state_errors", []):
        problems.append(f"state file: {err}")
    primaries = sum(1 for s in switches.values() if s.get("connected") and s.get("primary"))
    if standby:
        state = "degraded" if problems else "ok"
    elif switches and primaries == 0:
        state = "down"
    else:
        state = "degraded" if problems else "ok"
    n = len(switches)
    if problems:
        more = f" (+{len(problems) - 2} more)" if len(problems) > 2 else ""
        summary = f"{state.upper()}: " + "; ".join(problems[:2]) + more
    else:
        links = len(probes.get("links", [])) if probes.get("enabled") else None
        summary = f"OK: {n} switch(es) connected" + (
            f", {links} link(s) up" if links is not None else ""
        )
    return {"state": state, "problems": problems, "summary": summary}
