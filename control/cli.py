"""icectl: the operator's command line for the ICE controller.

Exit codes scripts can trust: 0 success, 1 runtime failure (controller unreachable, a switch
failed, a write was refused), 2 usage or validation error (bad option, bad topology/job file).
Every read command takes ``--json``. Errors name the file, key or switch and never show a
traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from icefabric.control import render
from icefabric.control.api import DEFAULT_SOCKET, ApiClient, ApiError, ApiUnavailable

log = logging.getLogger("icectl")

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure to report on stderr with an exit code (2 usage/validation, 1 runtime)."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and the program path in the message (as argparse does)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise CliError(f"{self.prog}: {message}", EXIT_USAGE)


# ---------------------------------------------------------------------------------------------
# topo


def _cmd_topo_gen(args: argparse.Namespace) -> int:
    from icefabric.topo import generators
    from icefabric.topo.spec import save_topology

    if args.shape == "leaf-spine":
        spec = generators.leaf_spine(
            leaves=args.leaves,
            spines=args.spines,
            hosts_per_leaf=args.hosts_per_leaf,
            host_rate_gbps=args.host_rate,
            uplink_rate_gbps=args.uplink_rate,
            oversubscription=args.oversubscription,
            links_per_spine=args.links_per_spine,
            name=args.name,
            grpc_base_port=args.grpc_base_port,
        )
    else:
        spec = generators.fat_tree(
            args.k,
            rate_gbps=args.rate,
            hosts_per_tor=args.hosts_per_tor,
            name=args.name,
            grpc_base_port=args.grpc_base_port,
        )
    if args.output:
        try:
            save_topology(spec, args.output)
        except OSError as exc:
            raise CliError(f"{args.output}: cannot write: {exc.strerror or exc}") from exc
        print(
            f"wrote {args.output}: {spec.name}, {len(spec.switches)} switches, "
            f"{len(spec.hosts)} hosts, {len(spec.links)} links",
            file=sys.stderr,
        )
    elif args.format == "json":
        render.emit_json(spec.to_dict())
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(spec.to_dict(), sort_keys=False, default_flow_style=None))
    return EXIT_OK


def _load_topology(path: str) -> Any:
    from icefabric.topo.spec import load_topology

    return load_topology(path)


def _topology_summary(spec: Any) -> dict[str, Any]:
    from icefabric.control.topology import Topology
    from icefabric.topo.generators import oversubscription

    topo = Topology(spec)
    pairs = topo.leaf_pairs()
    counts = [len(topo.candidate_array(a, b)) for a, b in pairs]
    return {
        "name": spec.name,
        "switches": len(spec.switches),
        "leaves": len(topo.leaves),
        "hosts": len(spec.hosts),
        "links": len(spec.links),
        "leaf_pairs": len(pairs),
        "candidate_paths_min": min(counts) if counts else 0,
        "candidate_paths_max": max(counts) if counts else 0,
        "oversubscription": {leaf: oversubscription(spec, leaf) for leaf in topo.leaves},
        "problems": topo.check_connected(),
    }


def _cmd_topo_show(args: argparse.Namespace) -> int:
    spec = _load_topology(args.topo)
    summary = _topology_summary(spec)
    if args.json:
        render.emit_json({"spec": spec.to_dict(), "summary": summary})
        return EXIT_OK
    con = render.console()
    con.print(
        f"[bold]{spec.name}[/bold]: {summary['switches']} switches ({summary['leaves']} leaves), "
        f"{summary['hosts']} hosts, {summary['links']} links; "
        f"{summary['candidate_paths_min']}..{summary['candidate_paths_max']} candidate paths "
        "per leaf pair"
    )
    con.print(
        render.table(
            "switches",
            ["name", "role", "device id", "gRPC", "switch id", "oversub"],
            [
                (
                    s.name,
                    s.role,
                    s.device_id,
                    s.grpc_addr,
                    s.switch_id,
                    summary["oversubscription"].get(s.name),
                )
                for s in spec.switches
            ],
        )
    )
    con.print(
        render.table(
            "hosts",
            ["name", "ip", "mac", "leaf", "port", "Gbit/s"],
            [(h.name, h.ip, h.mac, h.leaf, h.port, spec.host_rate(h)) for h in spec.hosts],
        )
    )
    con.print(
        render.table(
            "links",
            ["a", "b", "Gbit/s", "delay us"],
            [
                (
                    f"{ln.a.node}:{ln.a.port}",
                    f"{ln.b.node}:{ln.b.port}",
                    spec.link_rate(ln),
                    spec.link_delay(ln),
                )
                for ln in spec.links
            ],
        )
    )
    for problem in summary["problems"]:
        con.print(f"[red]problem:[/red] {problem}")
    return EXIT_OK


def _cmd_topo_check(args: argparse.Namespace) -> int:
    from icefabric.topo.spec import SpecError

    try:
        spec = _load_topology(args.topo)
    except SpecError as exc:
        if args.json:
            render.emit_json({"ok": False, "file": args.topo, "errors": exc.errors})
        else:
            for line in exc.errors:
                print(line, file=sys.stderr)
        return EXIT_USAGE
    summary = _topology_summary(spec)
    problems = [f"{args.topo}: {p}" for p in summary["problems"]]
    for s in spec.switches:
        if s.tier == 0 and not any(h.leaf == s.name for h in spec.hosts):
            log.info("%s: leaf %s has no hosts", args.topo, s.name)
    ok = not problems
    if args.json:
        render.emit_json({"ok": ok, "file": args.topo, "errors": problems, "summary": summary})
    elif ok:
        print(
            f"{args.topo}: ok: {spec.name}, {summary['switches']} switches, {summary['hosts']} "
            f"hosts, {summary['links']} links, {summary['candidate_paths_min']}.."
            f"{summary['candidate_paths_max']} candidate paths per leaf pair"
        )
    else:
        for p in problems:
            print(p, file=sys.stderr)
    return EXIT_OK if ok else EXIT_USAGE


# ---------------------------------------------------------------------------------------------
# daemon client commands


def _client(args: argparse.Namespace) -> ApiClient:
    return ApiClient(args.socket, timeout=args.timeout)


def _call(args: argparse.Namespace, op: str, **kwargs: Any) -> Any:
    with _client(args) as client:
        return client.call(op, **kwargs)


def _cmd_status(args: argparse.Namespace) -> int:
    st = _call(args, "status")
    if args.json:
        render.emit_json(st)
        return EXIT_OK
    con = render.console()
    con.print(
        f"controller [bold]{st['role']}[/bold] (election id {st['election_id']}), mode "
        f"[bold]{st['mode']}[/bold], topology {st['topology']}, {st['jobs']} job(s), "
        f"{st['flows']} planned flow(s), max link load {st['max_load']:.3g}"
    )
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
    return EXIT_OK


def _read_job_arg(args: argparse.Namespace) -> dict[str, Any]:
    """The job as plain data: a job file, or an NCCL log with the collective named."""
    from icefabric.control.ccl.job import load_job

    if args.nccl_log:
        job = _job_from_log(args)
    else:
        if not args.job:
            raise CliError("jobs add: give a JOB file or --nccl-log LOG", EXIT_USAGE)
        job = load_job(args.job)
    data: dict[str, Any] = job.to_dict()
    return data


def _job_from_log(args: argparse.Namespace) -> Any:
    from icefabric.control.ccl.job import parse_size
    from icefabric.control.ccl.nccl_log import load_nccl_log, to_job

    try:
        size = parse_size(args.message_bytes)
    except ValueError as exc:
        raise CliError(f"--message-bytes: {exc}", EXIT_USAGE) from exc
    host_map: dict[str, str] = {}
    for item in args.host_map or []:
        if "=" not in item:
            raise CliError(f"--host-map: expected LOGHOST=TOPOHOST, got {item!r}", EXIT_USAGE)
        k, v = item.split("=", 1)
        host_map[k] = v
    try:
        parsed = load_nccl_log(args.nccl_log)
    except OSError as exc:
        raise CliError(f"{args.nccl_log}: cannot read: {exc.strerror or exc}", EXIT_USAGE) from exc
    for w in parsed.warnings:
        print(f"warning: {w}", file=sys.stderr)
    name = args.name or Path(args.nccl_log).stem
    try:
        return to_job(
            parsed,
            name=name,
            collective=args.collective,
            message_bytes=size,
            algorithm=args.algorithm,
            host_map=host_map,
        )
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


def _cmd_jobs_add(args: argparse.Namespace) -> int:
    job = _read_job_arg(args)
    res = _call(args, "jobs.add", job=job)
    if args.json:
        render.emit_json(res)
    else:
        print(
            f"job {res['job']}: {res['flows']} flow(s) planned, {res['entries']} entries "
            f"written in {res['install_ms']:.1f} ms; max link load {res['max_load']:.3g}"
        )
    return EXIT_OK


def _cmd_jobs_rm(args: argparse.Namespace) -> int:
    res = _call(args, "jobs.rm", name=args.name)
    if args.json:
        render.emit_json(res)
    else:
        print(f"job {res['job']} removed: {res['entries']} entries deleted")
    return EXIT_OK


def _cmd_jobs_ls(args: argparse.Namespace) -> int:
    jobs = _call(args, "jobs.ls")
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


def _cmd_paths(args: argparse.Namespace) -> int:
    res = _call(args, "paths", flow=args.flow, job=args.job)
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


def _cmd_stats(args: argparse.Namespace) -> int:
    res = _call(args, "stats", switch=args.switch)
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


def _cmd_int(args: argparse.Namespace) -> int:
    res = _call(args, "int", limit=args.limit)
    if args.json:
        render.emit_json(res)
        return EXIT_OK
    con = render.console()
    con.print(f"{res['received']} report(s) received, showing the last {len(res['reports'])}")
    con.print(
        render.table(
            "telemetry reports",
            ["time", "switch", "flow", "tag", "reason", "hops (switch:in>out q=depth)"],
            [
                (
                    f"{r['time']:.3f}",
                    r["switch"],
                    r["flow"],
                    r["tag"],
                    r["reason"],
                    " ".join(
                        f"{h['switch_id']}:{h['ingress_port']}>{h['egress_port']} q={h['qdepth']}"
                        for h in r["hops"]
                    ),
                )
                for r in res["reports"]
            ],
        )
    )
    return EXIT_OK


def _cmd_mode(args: argparse.Namespace) -> int:
    res = _call(args, "mode", mode=args.mode)
    print(f"mode {res['mode']} on {res['switches']} switch(es)")
    return EXIT_OK


def _cmd_link(args: argparse.Namespace) -> int:
    res = _call(args, "link", a=args.a, b=args.b, state=args.state)
    if args.json:
        render.emit_json(res)
    else:
        print(
            f"link {args.a}-{args.b} {args.state}: {res['moved']} flow(s) moved, "
            f"{res['entries']} entries written; replan {res['plan_ms']:.1f} ms + install "
            f"{res['install_ms']:.1f} ms"
        )
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# shell


def shell_command(
    info: dict[str, Any], *, election_id: str, config: tuple[str, str] | None
) -> list[str]:
    """The p4runtime-shell command line for one switch (info: address, device_id)."""
    cmd = [
        sys.executable,
        "-m",
        "p4runtime_sh",
        "--grpc-addr",
        str(info["address"]),
        "--device-id",
        str(info["device_id"]),
        "--election-id",
        election_id,
    ]
    if config is not None:
        cmd += ["--config", f"{config[0]},{config[1]}"]
    return cmd


def _cmd_shell(args: argparse.Namespace) -> int:
    if args.topo:
        spec = _load_topology(args.topo)
        try:
            sw = spec.switch(args.switch)
        except KeyError:
            names = ", ".join(s.name for s in spec.switches)
            raise CliError(
                f"{args.topo}: no switch {args.switch!r} (switches: {names})", EXIT_USAGE
            ) from None
        info: dict[str, Any] = {"address": sw.grpc_addr, "device_id": sw.device_id}
    else:
        switches = _call(args, "switches")
        if args.switch not in switches:
            names = ", ".join(sorted(switches))
            raise CliError(f"no switch {args.switch!r} (switches: {names})", EXIT_USAGE)
        info = switches[args.switch]
    config = None
    if args.config:
        parts = args.config.split(",")
        if len(parts) != 2:
            raise CliError("--config: expected P4INFO,DEVICE_CONFIG", EXIT_USAGE)
        config = (parts[0], parts[1])
    cmd = shell_command(info, election_id=args.election_id, config=config)
    if args.print:
        print(" ".join(cmd))
        return EXIT_OK
    try:
        os.execv(cmd[0], cmd)
    except OSError as exc:
        raise CliError(f"cannot start p4runtime-shell: {exc.strerror or exc}") from exc
    return EXIT_RUNTIME  # not reached: execv replaced the process


# ---------------------------------------------------------------------------------------------
# parser


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")


def build_parser() -> argparse.ArgumentParser:
    """The icectl argument parser (every subcommand)."""
    p = _Parser(
        prog="icectl",
        description="Operate the ICE controller: topologies, plans, the daemon, jobs, telemetry.",
        epilog="exit codes: 0 ok, 1 runtime failure, 2 usage or validation error",
    )
    p.add_argument(
        "--socket",
        default=os.environ.get("ICECTL_SOCKET", DEFAULT_SOCKET),
        help="the controller's API socket (default $ICECTL_SOCKET or %(default)s)",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="API call timeout in seconds")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv debug)")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    # topo
    topo = sub.add_parser("topo", help="generate, show and check topology spec files")
    tsub = topo.add_subparsers(dest="topo_command", metavar="SUBCOMMAND", parser_class=_Parser)
    tsub.required = True
    gen = tsub.add_parser("gen", help="generate a leaf-spine or fat-tree spec")
    gsub = gen.add_subparsers(dest="shape", metavar="SHAPE", parser_class=_Parser)
    gsub.required = True
    ls = gsub.add_parser("leaf-spine", help="two-tier leaf-spine")
    ls.add_argument("--leaves", type=int, required=True)
    ls.add_argument("--spines", type=int, required=True)
    ls.add_argument("--hosts-per-leaf", type=int, required=True)
    ls.add_argument("--host-rate", type=float, default=100.0, help="Gbit/s (default 100)")
    ls.add_argument(
        "--uplink-rate", type=float, default=None, help="Gbit/s (default: from --oversubscription)"
    )
    ls.add_argument("--oversubscription", type=float, default=1.0, help="default 1.0")
    ls.add_argument("--links-per-spine", type=int, default=1)
    ft = gsub.add_parser("fat-tree", help="three-tier fat-tree(k)")
    ft.add_argument("--k", type=int, required=True, help="even port count")
    ft.add_argument("--rate", type=float, default=100.0, help="Gbit/s of every link")
    ft.add_argument("--hosts-per-tor", type=int, default=None, help="default k/2")
    for g in (ls, ft):
        g.add_argument("--name", default=None)
        g.add_argument("--grpc-base-port", type=int, default=50051)
        g.add_argument("-o", "--output", help="write to FILE (.json: JSON, else YAML)")
        g.add_argument("--format", choices=("yaml", "json"), default="yaml", help="stdout format")
        g.set_defaults(func=_cmd_topo_gen)
    show = tsub.add_parser("show", help="print switches, hosts and links of a spec")
    show.add_argument("topo", metavar="TOPO")
    _add_json(show)
    show.set_defaults(func=_cmd_topo_show)
    check = tsub.add_parser("check", help="validate a spec (exit 2 and every problem if bad)")
    check.add_argument("topo", metavar="TOPO")
    _add_json(check)
    check.set_defaults(func=_cmd_topo_check)

    # plan (dry run)
    from icefabric.control.cli_plan import add_plan_parser, add_run_parser

    add_plan_parser(sub, _add_json)
    add_run_parser(sub)

    st = sub.add_parser("status", help="the daemon: role, mode, switches, jobs")
    _add_json(st)
    st.set_defaults(func=_cmd_status)

    # jobs
    jobs = sub.add_parser("jobs", help="add, remove and list jobs on the running controller")
    jsub = jobs.add_subparsers(dest="jobs_command", metavar="SUBCOMMAND", parser_class=_Parser)
    jsub.required = True
    add = jsub.add_parser("add", help="plan a job and install its paths")
    add.add_argument("job", metavar="JOB", nargs="?", help="job description (YAML/JSON)")
    _add_log_options(add)
    _add_json(add)
    add.set_defaults(func=_cmd_jobs_add)
    rm = jsub.add_parser("rm", help="remove a job and its entries")
    rm.add_argument("name", metavar="NAME")
    _add_json(rm)
    rm.set_defaults(func=_cmd_jobs_rm)
    lsj = jsub.add_parser("ls", help="list jobs")
    _add_json(lsj)
    lsj.set_defaults(func=_cmd_jobs_ls)

    paths = sub.add_parser("paths", help="planned path of every flow (or one FLOW)")
    paths.add_argument("flow", metavar="FLOW", nargs="?", help="flow id (job/phase/cN/rA->rB)")
    paths.add_argument("--job", default=None, help="only the flows of this job")
    _add_json(paths)
    paths.set_defaults(func=_cmd_paths)

    stats = sub.add_parser("stats", help="port, tag and drop counters of the switches")
    stats.add_argument("--switch", default=None, help="one switch only")
    _add_json(stats)
    stats.set_defaults(func=_cmd_stats)

    tel = sub.add_parser("int", help="recent INT telemetry reports received by the controller")
    tel.add_argument("-n", "--limit", type=int, default=20, help="how many (default 20)")
    _add_json(tel)
    tel.set_defaults(func=_cmd_int)

    mode = sub.add_parser("mode", help="switch every first hop to ICE or the ECMP baseline")
    mode.add_argument("mode", choices=("ice", "planned-ecmp", "ecmp"))
    mode.set_defaults(func=_cmd_mode)

    link = sub.add_parser("link", help="mark a link down or up and replan the flows on it")
    link.add_argument("state", choices=("down", "up"))
    link.add_argument("a", metavar="SWITCH_A")
    link.add_argument("b", metavar="SWITCH_B")
    _add_json(link)
    link.set_defaults(func=_cmd_link)

    shell = sub.add_parser("shell", help="p4runtime-shell connected to one switch")
    shell.add_argument("switch", metavar="SWITCH")
    shell.add_argument(
        "--topo", default=None, help="take the address from this spec instead of the daemon"
    )
    shell.add_argument(
        "--election-id",
        default="0,1",
        help="HIGH,LOW (default 0,1: below the controller's, so the shell is a read-only backup)",
    )
    shell.add_argument(
        "--config",
        default=None,
        metavar="P4INFO,DEVCONFIG",
        help="push this pipeline (wipes the switch's entries); default: read P4Info from the switch",
    )
    shell.add_argument("--print", action="store_true", help="print the command, do not run it")
    shell.set_defaults(func=_cmd_shell)
    return p


def _add_log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nccl-log", default=None, help="build the job from an NCCL_DEBUG=INFO log")
    p.add_argument("--name", default=None, help="job name (with --nccl-log; default: file stem)")
    p.add_argument("--collective", default="all-reduce", help="with --nccl-log")
    p.add_argument("--algorithm", default=None, help="with --nccl-log (default: from the log)")
    p.add_argument("--message-bytes", default="256MiB", help="with --nccl-log (default 256MiB)")
    p.add_argument(
        "--host-map", action="append", metavar="LOGHOST=TOPOHOST", help="rename log hosts"
    )


def _error_code(exc: BaseException) -> int | None:
    """Exit code for the project's known exception types (None: unexpected)."""
    from icefabric.control.p4rt.errors import P4RtError
    from icefabric.control.topology import TopologyError
    from icefabric.topo.spec import SpecError

    if isinstance(exc, (SpecError, TopologyError)):
        return EXIT_USAGE
    if isinstance(exc, P4RtError):
        return EXIT_RUNTIME
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run icectl; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except CliError as exc:
        print(f"icectl: {exc}", file=sys.stderr)
        return exc.code
    except ApiUnavailable as exc:
        print(f"icectl: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except ApiError as exc:
        print(f"icectl: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.kind == "usage" else EXIT_RUNTIME
    except KeyboardInterrupt:
        print("icectl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        code = _error_code(exc)
        if code is None:
            if args.debug:
                raise
            print(
                f"icectl: internal error: {type(exc).__name__}: {exc} (run with --debug for the "
                "traceback)",
                file=sys.stderr,
            )
            return EXIT_RUNTIME
        print(f"icectl: {exc}", file=sys.stderr)
        return code
