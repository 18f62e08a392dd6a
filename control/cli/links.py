"""icectl mode, link and links: how the first hops forward, which links are marked down, and
link liveness from the LLDP probes."""

from __future__ import annotations

import argparse
import re

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, EXIT_USAGE, CliError, Verbs, api_call
from icefabric.control.fabric import MODES


def cmd_mode(args: argparse.Namespace) -> int:
    """icectl mode: ICE or the ECMP baseline on every leaf."""
    res = api_call(args, "mode", mode=args.mode)
    print(f"mode {res['mode']} on {res['switches']} switch(es)")
    return EXIT_OK


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def cmd_links(args: argparse.Namespace) -> int:
    """icectl links: link liveness from the LLDP probes (state, last probe, events)."""
    res = api_call(args, "links")
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    con = render.console()
    if not res["enabled"]:
        con.print("link probing is off (icectl run --probe-interval 0, or a standby controller)")
        return EXIT_OK
    con.print(
        f"LLDP probes every {res['interval_ms']:.0f} ms on every fabric port, a link is down "
        f"after {res['misses']} missed intervals; {res['probes_sent']} sent, "
        f"{res['probes_received']} received, {res['send_errors']} send errors, "
        f"{res['stalled_rounds']} stalled rounds not counted, "
        f"{res.get('alive_by_traffic', 0)} misses outweighed by traffic (rx counter grew)"
    )
    con.print(
        render.table(
            "fabric links (last seen: the staler direction)",
            ["link", "state", "last seen ms ago", "events", "marked down"],
            [
                (
                    r["link"],
                    r["state"],
                    _ms(r["last_seen_ms"]),
                    r["events"],
                    "yes" if r.get("failed") else "",
                )
                for r in res["links"]
            ],
        )
    )
    if res["events"]:
        con.print(
            render.table(
                "events (detection: last probe seen -> declared; replan/install: the controller)",
                [
                    "link",
                    "event",
                    "detection ms",
                    "moved",
                    "replan ms",
                    "install ms",
                    "base ms",
                    "note",
                ],
                [
                    (
                        e["link"],
                        e["kind"],
                        _ms(e["detection_ms"]),
                        "-" if e["moved"] is None else e["moved"],
                        "-" if e["plan_ms"] is None else f"{e['plan_ms']:.1f}",
                        "-" if e["install_ms"] is None else f"{e['install_ms']:.1f}",
                        "-" if e["base_ms"] is None else f"{e['base_ms']:.1f}",
                        e["note"] or "",
                    )
                    for e in res["events"]
                ],
            )
        )
    for m in res["miswired"]:
        con.print(
            f"[yellow]miswiring[/yellow]: {m['seen']} ({m['count']}x, last {m['last_ms']:.0f} ms "
            f"ago); topology: {m['expected']}"
        )
    for port, count in sorted(res.get("foreign_lldp", {}).items()):
        con.print(f"foreign LLDP on host port {port}: {count} frame(s)")
    return EXIT_OK


def link_ends(a: str, b: str | None) -> tuple[str, str]:
    """The two switches of ``icectl link``'s arguments: ``A B``, or one link as ``icectl
    links`` and ``status`` name it (``leaf1:3-spine1:1``) or ``leaf1-spine1``."""
    if b is not None:
        return a.split(":", 1)[0], b.split(":", 1)[0]
    m = re.fullmatch(r"(.+?):\d+-(.+?):\d+", a) or re.fullmatch(r"([^-]+)-([^-]+)", a)
    if m is None:
        raise CliError(
            f"link {a!r}: expected SWITCH_A SWITCH_B, or a link as icectl links names it "
            "(leaf1:3-spine1:1)",
            EXIT_USAGE,
        )
    return m.group(1), m.group(2)


def cmd_link(args: argparse.Namespace) -> int:
    """icectl link down|up: mark a link and replan."""
    a, b = link_ends(args.a, args.b)
    res = api_call(args, "link", a=a, b=b, state=args.state)
    if args.json:
        render.emit_json(res)
    else:
        print(
            f"link {a}-{b} {args.state}: {res['moved']} flow(s) moved, "
            f"{res['entries']} entries written; replan {res['plan_ms']:.1f} ms + install "
            f"{res['install_ms']:.1f} ms"
        )
    return EXIT_OK


def register(verbs: Verbs) -> None:
    """``icectl mode``, ``link`` and ``links``."""
    mode = verbs.add(
        "mode", help="switch every first hop to ICE, the ECMP baseline or per-packet spray"
    )
    mode.add_argument("mode", choices=tuple(MODES))
    verbs.add_socket(mode)
    mode.set_defaults(func=cmd_mode)

    link = verbs.add("link", help="mark a link down or up and replan the flows on it")
    link.add_argument("state", choices=("down", "up"))
    link.add_argument(
        "a", metavar="SWITCH_A", help="a switch, or the link as icectl links names it"
    )
    link.add_argument("b", metavar="SWITCH_B", nargs="?", help="the other switch")
    verbs.add_json(link)
    verbs.add_socket(link)
    link.set_defaults(func=cmd_link)

    links = verbs.add(
        "links",
        help="link liveness from the LLDP probes: state, last probe, down/up events and times",
    )
    verbs.add_json(links)
    verbs.add_socket(links)
    links.set_defaults(func=cmd_links)
