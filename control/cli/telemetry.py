"""icectl's telemetry views: the per-link table of ``icectl int`` and the live ``icectl top``."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.table import Table

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, Verbs, api_client

# What each drop reason of ice.p4's drop_reason_counter means (p4src/common/defines.p4).
DROP_MEANING = {
    "parser-error": "malformed header",
    "truncated": "frame shorter than its headers",
    "bad-checksum": "IPv4 header checksum wrong",
    "bad-length": "IPv4/UDP length beyond the frame",
    "unknown-tag": "path tag with no tag_forward entry",
    "hop-limit": "path tag's hop limit exhausted",
    "ttl-expired": "IPv4 TTL expired on a routed hop",
    "no-route": "no ipv4_route entry",
    "unsupported": "neither IPv4, ARP nor ICE: IPv6 and other frames hosts send even when idle",
    "shim-from-host": "a host sent a path tag",
    "route-drop": "an ipv4_route entry says drop",
}


def _pct(u: float | None) -> str:
    return "-" if u is None else f"{u * 100:.1f}"


def links_table(links: list[dict[str, Any]], *, limit: int | None = None) -> Table:
    """Per link: utilisation, queue depth now and max, wire drops, records, age."""
    now = time.time()
    rows = sorted(links, key=lambda r: (-(r["utilisation"] or 0.0), -r["max_qdepth"], r["link"]))
    if limit is not None:
        rows = rows[:limit]
    return render.table(
        "links (from INT records and port counters)",
        [
            "link",
            "util %",
            "rate Gbit/s",
            "capacity Gbit/s",
            "queue pkts",
            "max queue pkts",
            "wire drops",
            "INT records",
            "age s",
        ],
        [
            (
                r["name"],
                _pct(r["utilisation"]),
                "-"
                if r["utilisation"] is None
                else f"{r['utilisation'] * r['capacity_bps'] / 1e9:.3g}",
                f"{r['capacity_bps'] / 1e9:g}",
                r["qdepth"],
                r["max_qdepth"],
                r["drops"],
                r["records"],
                f"{max(0.0, now - r['last_seen']):.1f}" if r["last_seen"] else "-",
            )
            for r in rows
        ],
    )


def summary_line(res: dict[str, Any]) -> str:
    """Counters of the telemetry store in one line."""
    c = res.get("counters") or {}
    drops = res.get("switch_drops") or {}
    dropped = sum(sum(v.values()) for v in drops.values())
    return (
        f"{c.get('reports', 0)} report(s) ({res.get('undecodable', 0)} undecodable), "
        f"{c.get('hop_records', 0)} hop record(s) ({c.get('unknown_hops', 0)} unknown), "
        f"planned-path checks {c.get('path_checked', 0)}, mismatches "
        f"{c.get('path_mismatches', 0)}, links above target {c.get('over_target_events', 0)} "
        f"time(s), program drops {dropped}"
    )


def drop_lines(switch_drops: dict[str, dict[str, int]]) -> list[str]:
    """One line per drop reason: packets in all, the switches, what the reason means."""
    total: dict[str, int] = {}
    where: dict[str, list[str]] = {}
    for sw, by_reason in sorted(switch_drops.items()):
        for reason, n in by_reason.items():
            total[reason] = total.get(reason, 0) + n
            where.setdefault(reason, []).append(f"{sw} {n}")
    return [
        f"  drops {reason}: {total[reason]} ({', '.join(where[reason])}): "
        f"{DROP_MEANING.get(reason, 'see p4src/common/defines.p4')}"
        for reason in sorted(total, key=lambda r: -total[r])
    ]


def print_links(res: dict[str, Any]) -> None:
    """The per-link part of ``icectl int`` (nothing when the daemon has no link data)."""
    if "links" not in res:
        return
    con = render.console()
    con.print(summary_line(res))
    for line in drop_lines(res.get("switch_drops") or {}):
        con.print(line, highlight=False)
    con.print(links_table(res["links"]))
    for m in res.get("mismatches", [])[-3:]:
        con.print(
            f"  path mismatch: {m['flow']} planned {' > '.join(m['planned'])}, "
            f"actual {' > '.join(m['actual'])}"
        )


def cmd_top(args: argparse.Namespace) -> int:
    """icectl top: a live view of links, flows and agents (Ctrl-C stops)."""
    with api_client(args) as client:

        def snap() -> dict[str, Any]:
            res: dict[str, Any] = client.call("int", limit=1)
            res["status"] = client.call("status")
            res["caps"] = client.call("caps")
            res["agents"] = client.call("agents")
            return res

        if args.json:
            return _repeat(args, lambda: print(json.dumps(snap(), sort_keys=True), flush=True))
        con = render.console()
        with Live(console=con, auto_refresh=False, transient=False) as live:

            def draw() -> None:
                res = snap()
                st, caps, ag = res["status"], res["caps"], res["agents"]
                health = st.get("health") or {}
                head = (
                    f"{time.strftime('%H:%M:%S')}  {health.get('summary', '')}\n"
                    f"{st['role']} controller, mode {st['mode']}, {st['jobs']} job(s), "
                    f"{st['flows']} planned flow(s), {len(caps['flows'])} capped, "
                    f"{len(ag['agents'])} agent(s) connected, {len(ag['lost'])} lost"
                )
                live.update(
                    Group(head, summary_line(res), links_table(res["links"], limit=args.rows)),
                    refresh=True,
                )

            return _repeat(args, draw)


def _repeat(args: argparse.Namespace, fn: Callable[[], None]) -> int:
    n = 0
    try:
        while True:
            fn()
            n += 1
            if args.count and n >= args.count:
                return EXIT_OK
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK


def register(verbs: Verbs) -> None:
    """``icectl top``."""
    top = verbs.add("top", help="live view: busiest links, queues, drops, flows, agents")
    top.add_argument("--interval", type=float, default=1.0, help="refresh every S seconds")
    top.add_argument("--rows", type=int, default=20, help="links shown (busiest first)")
    top.add_argument(
        "-c", "--count", type=int, default=0, help="stop after N refreshes (default: Ctrl-C)"
    )
    verbs.add_json(top)
    verbs.add_socket(top)
    top.set_defaults(func=cmd_top)
