"""icectl commands for the host agents and their caps: ``agents``, ``caps``, ``jobs phase``."""

from __future__ import annotations

import argparse

from rich.markup import escape

from icefabric.control import render
from icefabric.control.cli.common import EXIT_OK, Verbs, api_call


def _gbps(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e9:.3f}"


def cmd_agents(args: argparse.Namespace) -> int:
    """icectl agents: connected host agents, their flows, refused reports, counters."""
    res = api_call(args, "agents")
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    con = render.console()
    c = res["counters"]
    con.print(
        f"agent channel on {', '.join(res['listening']) or 'nothing (not listening)'}: "
        f"{len(res['agents'])} agent(s) connected, {res['real_keys']} real flow key(s); "
        f"accepted {c['accepted']}, refused {c['refused']}, malformed frames {c['malformed']}, "
        f"lost {c['lost']}, cap pushes {c['caps_pushed']}"
    )
    con.print(
        render.table(
            "agents",
            [
                "host",
                "session",
                "peer",
                "flows",
                "accepted",
                "no job",
                "refused",
                "caps",
                "last seen ms",
            ],
            [
                (
                    a["host"],
                    a["session"],
                    a["peer"],
                    a["flows"],
                    a["accepted"],
                    a.get("unplanned", 0),
                    len(a["rejected"]),
                    a["caps"],
                    a["last_seen_ms"],
                )
                for a in res["agents"]
            ],
        )
    )
    for a in res["agents"]:
        for why in a["rejected"]:
            con.print(f"  {a['host']}: refused {escape(why)}")
    if res["lost"]:
        con.print(f"lost (caps released): {', '.join(res['lost'])}")
    for k in res["key_installs"]:
        con.print(f"real keys: {k['why']}: {k['entries']} entries in {k['ms']:.1f} ms")
    return EXIT_OK


def cmd_caps(args: argparse.Namespace) -> int:
    """icectl caps: the max-min fair cap of every active flow, and why it was last computed."""
    res = api_call(args, "caps", host=args.host)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    con = render.console()
    phases = ", ".join(f"{j}: {p}" for j, p in res["phases"].items()) or "no jobs"
    con.print(
        f"caps fill links to {res['target'] * 100:.0f} %; phases {phases}; recomputed "
        f"{res['recomputed']} time(s)"
    )
    con.print(
        render.table(
            "caps",
            ["flow", "host", "cap Gbit/s", "pushed", "key", "key from", "agent", "agent Gbit/s"],
            [
                (
                    r["flow"],
                    r["host"],
                    _gbps(r["cap_bps"]),
                    "yes" if r["pushed"] else "no",
                    f"{r['key']['src_ip']}:{r['key']['sport']}->{r['key']['dst_ip']} "
                    f"qp {r['key']['qp']}",
                    r["key_source"],
                    r["agent_state"] or "-",
                    _gbps(r["agent_rate_bps"]),
                )
                for r in res["flows"]
            ],
        )
    )
    for h in res["history"][-5:]:
        con.print(
            f"  {h['reason']}: {h['flows']} flow(s), {h['full_links']} full link(s), "
            f"{h['ms']:.1f} ms, {_gbps(h['min_bps'])}..{_gbps(h['max_bps'])} Gbit/s"
        )
    return EXIT_OK


def cmd_jobs_phase(args: argparse.Namespace) -> int:
    """icectl jobs phase JOB PHASE: the job moves to PHASE; caps are pushed before it starts."""
    res = api_call(args, "jobs.phase", job=args.name, phase=args.phase)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    render.console().print(
        f"job {res['job']}: phase {res['phase']}; {res['flows']} active flow(s), caps pushed to "
        f"{res['hosts_pushed']} host(s) in {res['ms']:.1f} ms"
    )
    return EXIT_OK


def cmd_agent_token(args: argparse.Namespace) -> int:
    """icectl agent-token: the TCP token of one host, derived from the controller's secret."""
    from pathlib import Path

    from icefabric.control.agents.auth import host_token, read_token
    from icefabric.control.agents.protocol import MAX_NAME
    from icefabric.control.cli.common import EXIT_USAGE, CliError
    from icefabric.files import write_output

    host = args.host
    if not 1 <= len(host) <= MAX_NAME or not host.isprintable():
        raise CliError(
            f"HOST: expected a printable host name of 1..{MAX_NAME} characters", EXIT_USAGE
        )
    try:
        secret = read_token(Path(args.agent_token_file))
    except ValueError as exc:
        raise CliError(f"--agent-token-file: {exc}", EXIT_USAGE) from None
    token = host_token(secret, host)
    if args.output is None:
        print(token)
        return EXIT_OK
    try:
        write_output(args.output, token + "\n", mode=0o600)
    except OSError as exc:
        raise CliError(f"{args.output}: cannot write: {exc.strerror or exc}", EXIT_USAGE) from None
    print(f"wrote the agent token of {host} to {args.output} (give it to that host only)")
    return EXIT_OK


def register(verbs: Verbs) -> None:
    """``icectl agents``, ``agent-token``, ``caps`` and ``jobs phase``."""
    jsub = verbs.group(
        "jobs", help="add, remove and list jobs on the running controller", dest="jobs_command"
    )
    ag = verbs.add("agents", help="host rate agents connected to the controller")
    verbs.add_json(ag)
    verbs.add_socket(ag)
    ag.set_defaults(func=cmd_agents)
    tok = verbs.add(
        "agent-token",
        help="the TCP token of one host (bound to its name; no controller needed)",
        description="Print (or write 0600 to -o FILE) the token host HOST presents on the TCP "
        "agent channel: HMAC-SHA256 of HOST under the controller's secret. A token speaks for "
        "its host only.",
    )
    tok.add_argument("host", metavar="HOST")
    tok.add_argument(
        "--agent-token-file",
        required=True,
        metavar="F",
        help="the controller's secret (the file given to icectl run --agent-token-file)",
    )
    tok.add_argument("-o", "--output", default=None, metavar="FILE", help="write it here (0600)")
    tok.set_defaults(func=cmd_agent_token)
    caps = verbs.add("caps", help="max-min fair rate caps of the active flows")
    caps.add_argument("--host", default=None, help="only the flows this host sends")
    verbs.add_json(caps)
    verbs.add_socket(caps)
    caps.set_defaults(func=cmd_caps)
    ph = jsub.add_parser("phase", help="move a job to another phase (caps pushed first)")
    ph.add_argument("name", metavar="JOB")
    ph.add_argument("phase", metavar="PHASE")
    verbs.add_json(ph)
    verbs.add_socket(ph)
    ph.set_defaults(func=cmd_jobs_phase)
