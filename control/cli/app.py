"""icectl's frame: the global options, exit codes and error reporting around the verbs.

Exit codes scripts can trust: 0 success, 1 runtime failure (controller unreachable, a switch
failed, a write was refused), 2 usage or validation error (bad option, bad topology/job file).
Every read command takes ``--json``. Errors name the file, key or switch and never show a
traceback unless ``--debug`` is given.

The verbs come from ``register(verbs)`` functions (:class:`~icefabric.control.cli.common.Verbs`),
one per verb module; which ones icectl has is decided by the entry point, ``icefabric/icectl.py``,
above every package (so the controller's CLI never imports the experiment engines or the
simulator whose verbs it shows).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from icefabric.control.cli.common import (
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    CliError,
    Parser,
    Register,
    Verbs,
)
from icefabric.control.daemon.api import ApiError, ApiUnavailable
from icefabric.control.daemon.paths import default_socket

log = logging.getLogger("icectl")


def build_parser(registrars: Sequence[Register]) -> argparse.ArgumentParser:
    """The icectl argument parser: the global options, then each registrar's verbs in order."""
    p = Parser(
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
    import icefabric

    p.add_argument("--version", action="version", version=f"icectl {icefabric.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    verbs = Verbs(sub)
    for register in registrars:
        register(verbs)
    return p


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


def run(registrars: Sequence[Register], argv: Sequence[str] | None = None) -> int:
    """Run icectl with the verbs of ``registrars``; returns the exit code."""
    parser = build_parser(registrars)
    try:
        args = parser.parse_args(argv)
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    # the daemon logs what it does (start-up, changes, reconnections) at INFO; one-shot commands
    # only what went wrong
    base = logging.INFO if args.command == "run" else logging.WARNING
    logging.basicConfig(
        level=base - 10 * min(args.verbose, 2 if base == logging.WARNING else 1),
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
