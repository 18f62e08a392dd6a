"""icectl commands that read the running controller: status, jobs, paths, stats and int (mode,
link and links are in ``links.py``, shell in ``shell.py``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from icefabric.control import render
from icefabric.control.cli.ccl import add_log_options
from icefabric.control.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Verbs,
    api_call,
    api_client,
)


def cmd_status(args: argparse.Namespace) -> int:
    """icectl status: the daemon's role, mode, switches and jobs."""
    st = api_call(args, "status")
    if args.json:
        render.emit_json(st)
        return EXIT_OK
    con = render.console()
    health = st.get("health") or {"state": "ok", "summary": "", "problems": []}
    colour = {"ok": "green", "degraded": "yellow", "down": "red"}.get(health["state"], "red")
    con.print(f"[bold {colour}]{health['summary']}[/bold {colour}]", highlight=False)
    con.print(
        f"controller [bold]{st['role']}[/bold] (election id {st['election_id']}), mode "
        f"[bold]{st['mode']}[/bold], topology {st['topology']}, {st['jobs']} job(s), "
        f"{st['flows']} planned flow(s), max link load {render.load_ms(st['max_load'])}"
    )
    _print_store(con, st.get("store", {}))
    con.print(
        render.table(
            "switches",
            ["switch", "address", "device id", "connected", "primary", "entries"],
            [
                (n, s["address"], s["device_id"], s["connected"], s["primary"], s["entries"])
                for n, s in sorted(st["switches"].items())
            ],
        )
    )
    probes = st.get("link_probes", {})
    if probes.get("enabled"):
        down = probes["down"]
        unknown = [x["link"] for x in probes["links"] if x.get("state") == "unknown"]
        con.print(
            f"link probes every {probes['interval_ms']:.0f} ms: {len(probes['links'])} link(s), "
            f"{len(down)} down{' (' + ', '.join(down) + ')' if down else ''}, "
            f"{len(unknown)} unknown{' (' + ', '.join(unknown) + ')' if unknown else ''}, "
            f"{len(probes['miswired'])} miswiring warning(s) (details: icectl links)"
        )
    else:
        con.print("link probes off")
    return EXIT_OK


def _print_store(con: Any, store: dict[str, Any]) -> None:
    """The store line; for etcd also the term, the leader, every replica and member."""
    if store.get("kind") != "etcd":
        con.print(f"store: {store.get('kind', 'none')} {store.get('where', '')}".rstrip())
        return
    con.print(
        f"store: etcd {','.join(store['endpoints'])}; this replica {store['replica']} is "
        f"[bold]{store['role']}[/bold] (term {store['term'] or '-'}), leader "
        f"{store.get('leader') or 'none'} (term {store.get('leader_term') or '-'}), lease "
        f"{store['lease_s']} s ({store['lease_left_s']:.2f} s left), generation "
        f"{store['generation']}"
    )
    if store.get("fenced"):
        con.print(f"[red]last stopped writing: {store['fenced']}[/red]")
    if store.get("error"):
        con.print(f"[red]etcd: {store['error']}[/red]")
    con.print(
        render.table(
            "replicas",
            ["replica", "role", "term", "host", "API", "agents"],
            [
                (
                    r.get("name", "?"),
                    r.get("role", "?"),
                    r.get("term") or "-",
                    r.get("host", ""),
                    r.get("api", ""),
                    " ".join(r.get("agent", []) or []),
                )
                for r in store.get("replicas", [])
            ],
        )
    )
    members = store.get("members", [])
    up = sum(1 for m in members if m["up"])
    con.print(
        f"etcd members: {up} of {len(members)} answering"
        + "".join(f"; {m['endpoint']} down" for m in members if not m["up"])
    )


def _read_job_arg(args: argparse.Namespace) -> dict[str, Any]:
    """The job as plain data: a job file, or an NCCL log with the collective named."""
    from icefabric.control.ccl.job import load_job

    if args.nccl_log or args.hccl_rank_table:
        job = _job_from_log(args)
    else:
        if not args.job:
            raise CliError(
                "jobs add: give a JOB file or --nccl-log LOG (or --hccl-rank-table JSON)",
                EXIT_USAGE,
            )
        job = load_job(args.job)
    data: dict[str, Any] = job.to_dict()
    return data


def _job_from_log(args: argparse.Namespace) -> Any:
    from icefabric.control.ccl.nccl.tojob import single_host_note
    from icefabric.control.cli.ccl import job_from_args

    job = job_from_args(args)
    note = single_host_note(job)
    if note:
        print(note, file=sys.stderr)
    return job


def cmd_jobs_add(args: argparse.Namespace) -> int:
    """icectl jobs add: send a job (file or NCCL log) to the daemon."""
    job = _read_job_arg(args)
    res = api_call(args, "jobs.add", job=job)
    if args.json:
        render.emit_json(res)
    else:
        print(
            f"job {res['job']}: {res['flows']} flow(s) planned, {res['entries']} entries "
            f"written in {res['install_ms']:.1f} ms; max link load {render.load_ms(res['max_load'])}"
        )
    return EXIT_OK


def cmd_jobs_rm(args: argparse.Namespace) -> int:
    """icectl jobs rm: remove a job and its entries."""
    res = api_call(args, "jobs.rm", name=args.name)
    if args.json:
        render.emit_json(res)
    else:
        print(f"job {res['job']} removed: {res['entries']} entries deleted")
    return EXIT_OK


def cmd_jobs_ls(args: argparse.Namespace) -> int:
    """icectl jobs ls: the running jobs."""
    jobs = api_call(args, "jobs.ls")
    if args.json:
        render.emit_json(jobs)
        return EXIT_OK
    render.console().print(
        render.table(
            "jobs",
            ["job", "ranks", "hosts", "phases", "flows", "bytes"],
            [
                (
                    j["name"],
                    j["ranks"],
                    j["hosts"],
                    j["phases"],
                    j["flows"],
                    render.human_bytes(j["bytes"]),
                )
                for j in jobs
            ],
        )
    )
    return EXIT_OK


def cmd_paths(args: argparse.Namespace) -> int:
    """icectl paths: planned path of every flow or one."""
    res = api_call(args, "paths", flow=args.flow, job=args.job)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    if args.flow and not res:
        raise CliError(f"no planned flow {args.flow!r} (see `icectl paths`)", EXIT_USAGE)
    render.console().print(
        render.table(
            "planned paths",
            ["flow", "src", "dst", "switch", "tag", "path", "bytes"],
            [
                (
                    p["flow"],
                    p["src"],
                    p["dst"],
                    p["first_hop"],
                    p["tag"],
                    p["path"],
                    render.human_bytes(p["bytes"]),
                )
                for p in res
            ],
        )
    )
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    """icectl stats: port, tag and drop counters read from the switches."""
    res = api_call(args, "stats", switch=args.switch)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    con = render.console()
    for name, st in sorted(res.items()):
        if "error" in st:
            con.print(f"[red]{name}: {st['error']}[/red]")
            continue
        con.print(
            render.table(
                f"{name}: ports",
                ["port", "kind", "rx pkts", "rx bytes", "tx pkts", "tx bytes"],
                [
                    (
                        p["port"],
                        p["kind"],
                        p["rx_packets"],
                        p["rx_bytes"],
                        p["tx_packets"],
                        p["tx_bytes"],
                    )
                    for p in st["ports"]
                ],
            )
        )
        if st["tags"]:
            con.print(
                render.table(
                    f"{name}: path tags",
                    ["tag", "packets", "bytes"],
                    [(t["tag"], t["packets"], t["bytes"]) for t in st["tags"]],
                )
            )
        if st["drops"]:
            con.print(
                render.table(
                    f"{name}: drops",
                    ["reason", "packets"],
                    [(d["reason"], d["packets"]) for d in st["drops"]],
                )
            )
    return EXIT_OK


def _hops_text(r: dict[str, Any], names: dict[str, str] | None = None) -> str:
    """A report's hops, first first: ``leaf1:1>3 q=0`` (switch names when known)."""
    names = names or {}
    return " ".join(
        f"{names.get(str(h['switch_id']), h['switch_id'])}:{h['ingress_port']}>{h['egress_port']}"
        f" q={h['qdepth']}"
        for h in reversed(r["hops"])
    )


def _clock(t: float) -> str:
    """A report's Unix time as the local wall clock with milliseconds."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def cmd_int(args: argparse.Namespace) -> int:
    """icectl int: the state of every link and the recent telemetry reports (--follow: keep
    printing new reports)."""
    if args.follow:
        return _follow_int(args)
    res = api_call(args, "int", limit=args.limit)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    from icefabric.control.cli.telemetry import print_links

    print_links(res)
    con = render.console()
    con.print(f"{res['received']} report(s) received, showing the last {len(res['reports'])}")
    names = res.get("switch_names") or {}
    con.print(
        render.table(
            "telemetry reports (hops first to last: switch:in port>out port q=queue depth pkts)",
            ["time", "switch", "flow", "tag", "reason", "hops"],
            [
                (
                    _clock(r["time"]),
                    r["switch"],
                    r["flow"],
                    r["tag"],
                    r["reason"],
                    _hops_text(r, names),
                )
                for r in res["reports"]
            ],
        )
    )
    return EXIT_OK


def _follow_int(args: argparse.Namespace) -> int:
    """Print each new report as it arrives (JSON lines with --json) until interrupted."""
    seen = None
    with api_client(args) as client:
        while True:
            try:
                time.sleep(args.interval if seen is not None else 0)
            except KeyboardInterrupt:
                return EXIT_OK
            res = client.call("int", limit=0)
            total = int(res["received"])
            fresh: list[dict[str, Any]] = (
                []
                if seen is None
                else res["reports"][max(0, len(res["reports"]) - (total - seen)) :]
            )
            seen = total
            names = res.get("switch_names") or {}
            for r in fresh:
                if args.json:
                    print(json.dumps(r, sort_keys=True), flush=True)
                else:
                    print(
                        f"{_clock(r['time'])} {r['switch']} {r['flow']} tag {r['tag']} "
                        f"{r['reason']}: {_hops_text(r, names)}",
                        flush=True,
                    )


def register(verbs: Verbs) -> None:
    """``icectl status``, ``jobs add|rm|ls``, ``paths``, ``stats`` and ``int``."""
    st = verbs.add("status", help="the daemon: role, mode, switches, jobs")
    verbs.add_json(st)
    verbs.add_socket(st)
    st.set_defaults(func=cmd_status)

    # jobs
    jsub = verbs.group(
        "jobs",
        help="jobs on the running controller: add, rm (remove), ls (list), phase",
        dest="jobs_command",
    )
    add = jsub.add_parser("add", help="plan a job and install its paths")
    add.add_argument("job", metavar="JOB", nargs="?", help="job description (YAML/JSON)")
    add_log_options(add, topo_flag=True)
    verbs.add_json(add)
    verbs.add_socket(add)
    add.set_defaults(func=cmd_jobs_add)
    rm = jsub.add_parser("rm", help="remove a job and its entries")
    rm.add_argument("name", metavar="NAME")
    verbs.add_json(rm)
    verbs.add_socket(rm)
    rm.set_defaults(func=cmd_jobs_rm)
    lsj = jsub.add_parser("ls", help="list jobs")
    verbs.add_json(lsj)
    verbs.add_socket(lsj)
    lsj.set_defaults(func=cmd_jobs_ls)
    paths = verbs.add("paths", help="planned path of every flow (or one FLOW)")
    paths.add_argument("flow", metavar="FLOW", nargs="?", help="flow id (job/phase/cN/rA->rB)")
    paths.add_argument("--job", default=None, help="only the flows of this job")
    verbs.add_json(paths)
    verbs.add_socket(paths)
    paths.set_defaults(func=cmd_paths)

    stats = verbs.add("stats", help="port, tag and drop counters of the switches")
    stats.add_argument("--switch", default=None, help="one switch only")
    verbs.add_json(stats)
    verbs.add_socket(stats)
    stats.set_defaults(func=cmd_stats)

    tel = verbs.add(
        "int", help="every link's utilisation, queue depth and drops; recent INT reports"
    )
    tel.add_argument("-n", "--limit", type=int, default=20, help="how many (default 20)")
    tel.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new reports (Ctrl-C stops)"
    )
    tel.add_argument("--interval", type=float, default=0.5, help="--follow poll interval, s")
    verbs.add_json(tel)
    verbs.add_socket(tel)
    tel.set_defaults(func=cmd_int)
