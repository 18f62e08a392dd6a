"""Shared pieces of the icectl modules: exit codes and the error type main() reports."""

from __future__ import annotations

import argparse
from collections.abc import Callable

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
