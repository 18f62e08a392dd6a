"""The health summary is never greener than the tables it sums up."""

from __future__ import annotations

from typing import Any

from icefabric.control.controller.health import fabric_health


def _status(**over: Any) -> dict[str, Any]:
    st: dict[str, Any] = {
        "role": "primary",
        "switches": {n: {"connected": True, "primary": True} for n in ("leaf1", "leaf2", "spine1")},
        "failed_links": [],
        "state_errors": [],
        "link_probes": {
            "enabled": True,
            "links": [
                {"link": "leaf1:3-spine1:1", "state": "up", "failed": False},
                {"link": "leaf2:3-spine1:2", "state": "up", "failed": False},
            ],
            "miswired": [],
        },
    }
    st.update(over)
    return st


def test_all_fine_is_ok() -> None:
    h = fabric_health(_status())
    assert h["state"] == "ok" and h["problems"] == []
    assert h["summary"] == "OK: 3 switch(es) connected, 2 link(s) up"


def test_a_dead_switch_is_the_first_thing_said() -> None:
    st = _status()
    st["switches"]["spine1"] = {"connected": False, "primary": False}
    for row in st["link_probes"]["links"]:
        row["state"] = "unknown"  # what the probes say while spine1 is unreachable
    h = fabric_health(st, failed_switches={"spine1"}, down_since={"spine1": 10.0}, now=13.25)
    assert h["state"] == "degraded"
    assert h["summary"].startswith(
        "DEGRADED: switch spine1 DOWN (unreachable for 3.2 s; failed over, flows routed around it)"
    )
    assert len(h["problems"]) == 3 and "(+1 more)" in h["summary"]


def test_links_down_failed_or_unknown_are_never_ok() -> None:
    for row in ({"state": "down", "failed": False}, {"state": "unknown", "failed": False}):
        st = _status()
        st["link_probes"]["links"][0].update(row)
        assert fabric_health(st)["state"] == "degraded"
    assert fabric_health(_status(failed_links=["leaf1-spine1"]))["state"] == "degraded"
    assert fabric_health(_status(state_errors=["bad"]))["state"] == "degraded"


def test_no_switch_held_is_down() -> None:
    st = _status()
    for s in st["switches"].values():
        s.update(connected=False, primary=False)
    h = fabric_health(st)
    assert h["state"] == "down" and h["summary"].startswith("DOWN: switch leaf1 DOWN")
