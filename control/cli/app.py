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
from typing import Any

from icefabric.control.api import ApiError, ApiUnavailable
from icefabric.control.cli.common import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError
from icefabric.control.cli.daemon import (
    cmd_int,
    cmd_jobs_add,
    cmd_jobs_ls,
    cmd_jobs_rm,
    cmd_link,
    cmd_links,
    cmd_mode,
    cmd_paths,
    cmd_shell,
    cmd_stats,
    cmd_status,
    shell_command,
)
from icefabric.control.cli.topo import cmd_topo_check, cmd_topo_gen, cmd_topo_show
from icefabric.control.paths import default_socket

log = logging.getLogger("icectl")

__all__ = [
    "EXIT_OK",
    "EXIT_RUNTIME",
    "EXIT_USAGE",
    "CliError",
    "build_parser",
    "main",
    "shell_command",
]


class _Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and the program path in the message (as argparse does)."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        raise CliError(f"{self.prog}: {message}", EXIT_USAGE)


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
        default=os.environ.get("ICECTL_SOCKET", str(default_socket())),
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
        g.set_defaults(func=cmd_topo_gen)
    show = tsub.add_parser("show", help="print switches, hosts and links of a spec")
    show.add_argument("topo", metavar="TOPO")
    _add_json(show)
    show.set_defaults(func=cmd_topo_show)
    check = tsub.add_parser("check", help="validate a spec (exit 2 and every problem if bad)")
    check.add_argument("topo", metavar="TOPO")
    _add_json(check)
    check.set_defaults(func=cmd_topo_check)

    # plan (dry run)
    from icefabric.control.cli.plan import add_plan_parser, add_run_parser

    add_plan_parser(sub, _add_json)
    add_run_parser(sub)

    from icefabric.experiment.cli import add_experiment_parser

    add_experiment_parser(sub, _add_json)

    from icefabric.control.cli.ccl import add_ccl_parser, add_log_options

    add_ccl_parser(sub, _add_json, _Parser)

    from icefabric.sim.cli import add_sim_parser

    add_sim_parser(sub, _add_json)

    st = sub.add_parser("status", help="the daemon: role, mode, switches, jobs")
    _add_json(st)
    _add_socket(st)
    st.set_defaults(func=cmd_status)

    # jobs
    jobs = sub.add_parser("jobs", help="add, remove and list jobs on the running controller")
    jsub = jobs.add_subparsers(dest="jobs_command", metavar="SUBCOMMAND", parser_class=_Parser)
    jsub.required = True
    add = jsub.add_parser("add", help="plan a job and install its paths")
    add.add_argument("job", metavar="JOB", nargs="?", help="job description (YAML/JSON)")
    add_log_options(add, topo_flag=True)
    _add_json(add)
    _add_socket(add)
    add.set_defaults(func=cmd_jobs_add)
    rm = jsub.add_parser("rm", help="remove a job and its entries")
    rm.add_argument("name", metavar="NAME")
    _add_json(rm)
    _add_socket(rm)
    rm.set_defaults(func=cmd_jobs_rm)
    lsj = jsub.add_parser("ls", help="list jobs")
    _add_json(lsj)
    _add_socket(lsj)
    lsj.set_defaults(func=cmd_jobs_ls)
    from icefabric.control.cli.agents import add_agent_parsers

    add_agent_parsers(sub, jsub, _add_json, _add_socket)
    from icefabric.control.cli.telemetry import add_top_parser

    add_top_parser(sub, _add_json, _add_socket)

    paths = sub.add_parser("paths", help="planned path of every flow (or one FLOW)")
    paths.add_argument("flow", metavar="FLOW", nargs="?", help="flow id (job/phase/cN/rA->rB)")
    paths.add_argument("--job", default=None, help="only the flows of this job")
    _add_json(paths)
    _add_socket(paths)
    paths.set_defaults(func=cmd_paths)

    stats = sub.add_parser("stats", help="port, tag and drop counters of the switches")
    stats.add_argument("--switch", default=None, help="one switch only")
    _add_json(stats)
    _add_socket(stats)
    stats.set_defaults(func=cmd_stats)

    tel = sub.add_parser(
        "int", help="every link's utilisation, queue depth and drops; recent INT reports"
    )
    tel.add_argument("-n", "--limit", type=int, default=20, help="how many (default 20)")
    tel.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new reports (Ctrl-C stops)"
    )
    tel.add_argument("--interval", type=float, default=0.5, help="--follow poll interval, s")
    _add_json(tel)
    _add_socket(tel)
    tel.set_defaults(func=cmd_int)

    mode = sub.add_parser("mode", help="switch every first hop to ICE or the ECMP baseline")
    mode.add_argument("mode", choices=("ice", "planned-ecmp", "ecmp"))
    _add_socket(mode)
    mode.set_defaults(func=cmd_mode)

    link = sub.add_parser("link", help="mark a link down or up and replan the flows on it")
    link.add_argument("state", choices=("down", "up"))
    link.add_argument("a", metavar="SWITCH_A")
    link.add_argument("b", metavar="SWITCH_B")
    _add_json(link)
    _add_socket(link)
    link.set_defaults(func=cmd_link)

    links = sub.add_parser(
        "links",
        help="link liveness from the LLDP probes: state, last probe, down/up events and times",
    )
    _add_json(links)
    _add_socket(links)
    links.set_defaults(func=cmd_links)

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
    _add_socket(shell)
    shell.set_defaults(func=cmd_shell)
    return p


def _add_socket(p: argparse.ArgumentParser) -> None:
    """--socket after the subcommand too (it overrides the global one only when given)."""
    p.add_argument("--socket", default=argparse.SUPPRESS, help="the controller's API socket")


def _error_code(exc: BaseException) -> int | None:
    """Exit code for the project's known exception types (None: unexpected)."""
    from icefabric.control.fabric import FabricError
    from icefabric.control.p4rt import PipelineConfigError
    from icefabric.control.p4rt.errors import P4RtError
    from icefabric.control.topology import TopologyError
    from icefabric.target.p4.errors import P4CompileError
    from icefabric.topo.spec import SpecError

    if isinstance(
        exc, (SpecError, TopologyError, FabricError, PipelineConfigError, P4CompileError)
    ):
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
