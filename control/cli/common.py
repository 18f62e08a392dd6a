"""Shared pieces of the icectl modules: exit codes, the error type main() reports, API calls."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from icefabric.control.api import ApiClient

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure to report on stderr with an exit code (2 usage/validation, 1 runtime)."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code


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
