"""Shared pieces of the icectl modules: exit codes, the error type icectl reports, how a verb
module registers its verbs (``Verbs``), API calls."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from icefabric.control.daemon.api import ApiClient

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure to report on stderr with an exit code (2 usage/validation, 1 runtime)."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and the program path in the message (as argparse does)."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        raise CliError(f"{self.prog}: {message}", EXIT_USAGE)


class Verbs:
    """Where a verb module registers its icectl verbs: every one has ``register(verbs)``.

    ``sub`` is icectl's COMMAND subparsers; :meth:`group` makes a verb with subcommands that a
    later module can add to by name (``icectl jobs phase`` comes from ``agents.py``).
    """

    def __init__(self, sub: Any) -> None:
        self.sub = sub
        self._groups: dict[str, Any] = {}

    def add(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """A new verb ``icectl NAME`` (``add_parser`` keyword arguments)."""
        parser: argparse.ArgumentParser = self.sub.add_parser(name, **kwargs)
        return parser

    def group(self, name: str, *, help: str, dest: str) -> Any:
        """The subcommands of ``icectl NAME`` (created on the first call, then shared)."""
        if name not in self._groups:
            parser = self.sub.add_parser(name, help=help)
            sub = parser.add_subparsers(dest=dest, metavar="SUBCOMMAND", parser_class=Parser)
            sub.required = True
            self._groups[name] = sub
        return self._groups[name]

    @staticmethod
    def add_json(p: argparse.ArgumentParser) -> None:
        """``--json``: print JSON for scripts instead of tables."""
        p.add_argument(
            "--json", action="store_true", help="print JSON for scripts instead of tables"
        )

    @staticmethod
    def add_socket(p: argparse.ArgumentParser) -> None:
        """--socket after the subcommand too (it overrides the global one only when given)."""
        p.add_argument("--socket", default=argparse.SUPPRESS, help="the controller's API socket")


Register = Callable[[Verbs], None]
"""A verb module's ``register``: adds its verbs to icectl."""


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in [low, high] (no upper bound when None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            upper = "" if high is None else f" and <= {high:,}"
            raise argparse.ArgumentTypeError(f"expected >= {low}{upper}, got {text!r}")
        return value

    return parse


def api_client(args: argparse.Namespace) -> ApiClient:
    """A client of the daemon's API at ``--socket`` with ``--timeout``."""
    return ApiClient(args.socket, timeout=args.timeout)


def api_call(args: argparse.Namespace, op: str, **kwargs: Any) -> Any:
    """One API request to the daemon (``--socket``, ``--timeout``); its result."""
    with api_client(args) as client:
        return client.call(op, **kwargs)
