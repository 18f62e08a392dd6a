"""Shared pieces of the icectl modules: exit codes and the error type main() reports."""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure to report on stderr with an exit code (2 usage/validation, 1 runtime)."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code
