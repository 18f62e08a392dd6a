"""icectl events (what happened to the fabric, in order) and icectl tables (a switch's table
entries, decoded)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from icefabric.control import render
from icefabric.control.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Verbs,
    api_call,
    api_client,
)
from icefabric.control.controller.eventlog import format_event, read_events
from icefabric.files import DataFileError


def cmd_events(args: argparse.Namespace) -> int:
    """icectl events: the controller's event history (--follow: then each new one)."""
    if args.last < 0:
        raise CliError(f"--last: expected an integer >= 0, got {args.last}", EXIT_USAGE)
    if args.file is not None:
        if args.follow:
            raise CliError("--file and --follow: follow the running daemon instead", EXIT_USAGE)
        try:
            kept = read_events(args.file, strict=True)
        except (DataFileError, OSError) as exc:
            raise CliError(f"events --file: {exc}", EXIT_USAGE) from None
        _print_events(kept[-args.last :] if args.last else [], args.json)
        return EXIT_OK
    if not args.follow:
        res = api_call(args, "events", since=0, limit=args.last)
        _print_events(res["events"], args.json)
        return EXIT_OK
    with api_client(args) as client:
        res = client.call("events", since=0, limit=args.last)
        _print_events(res["events"], args.json, lines=True)
        seen = int(res["seq"])
        try:
            while True:
                time.sleep(args.interval)
                res = client.call("events", since=seen, limit=1000)
                _print_events(res["events"], args.json, lines=True)
                seen = max(seen, int(res["seq"]))
        except KeyboardInterrupt:
            return EXIT_OK


def _print_events(events: list[dict[str, Any]], as_json: bool, *, lines: bool = False) -> None:
    if as_json and not lines:
        render.emit_json(events)
        return
    for ev in events:
        print(json.dumps(ev, sort_keys=True) if as_json else format_event(ev), flush=True)


def cmd_tables(args: argparse.Namespace) -> int:
    """icectl tables: one switch's table entries (or one table's), decoded."""
    res = api_call(args, "tables", switch=args.switch, table=args.table)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    rows = res["entries"]
    con = render.console()
    con.print(
        render.table(
            f"{res['switch']}: {len(rows)} entr{'y' if len(rows) == 1 else 'ies'}"
            + (f" of {args.table}" if args.table else ""),
            ["table", "match", "action", "parameters", "priority"],
            [
                (
                    r["table"],
                    " ".join(f"{k}={v}" for k, v in r["match"].items())
                    or ("(default)" if r["default"] else "*"),
                    r["action"],
                    " ".join(f"{k}={v}" for k, v in r["params"].items()),
                    r["priority"] or "",
                )
                for r in rows
            ],
        )
    )
    return EXIT_OK


def register(verbs: Verbs) -> None:
    """``icectl events`` and ``icectl tables``."""
    ev = verbs.add(
        "events",
        help="what happened to the fabric, in order: switches, links, jobs, replans, agents, caps",
    )
    ev.add_argument("-f", "--follow", action="store_true", help="then print each new event")
    ev.add_argument(
        "-n", "--last", type=int, default=50, metavar="N", help="the last N events (default 50)"
    )
    ev.add_argument(
        "--file",
        type=Path,
        help="read an event file (STATE.events.jsonl next to the state file) with no daemon",
    )
    ev.add_argument(
        "--interval", type=float, default=0.5, help="--follow: poll every S seconds (0.5)"
    )
    verbs.add_json(ev)
    verbs.add_socket(ev)
    ev.set_defaults(func=cmd_events)
    tb = verbs.add(
        "tables",
        help="a switch's table entries, decoded (addresses, actions and parameters by name)",
    )
    tb.add_argument("switch", metavar="SWITCH")
    tb.add_argument("table", metavar="TABLE", nargs="?", help="one table (e.g. flow_path)")
    verbs.add_json(tb)
    verbs.add_socket(tb)
    tb.set_defaults(func=cmd_tables)
