"""Compile errors for P4 source: ``file:line:col: error: message`` plus the source line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A position in a source file (1-based line and column) and the text of that line."""

    file: str
    line: int
    col: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One error message at one location."""

    file: str
    line: int
    col: int
    message: str
    text: str = ""

    def render(self) -> str:
        """Render as ``file:line:col: error: message`` with the source line and a caret."""
        if self.line <= 0:
            where = "" if self.file == "<unknown>" else f"{self.file}: "
            return f"{where}error: {self.message}"
        head = f"{self.file}:{self.line}:{self.col}: error: {self.message}"
        if not self.text:
            return head
        caret = " " * max(self.col - 1, 0) + "^"
        return f"{head}\n{self.text}\n{caret}"


class P4CompileError(Exception):
    """A P4 program could not be compiled; ``errors`` lists every diagnostic."""

    def __init__(self, message: str, loc: SourceLoc | None = None) -> None:
        if loc is None:
            diag = Diagnostic("<unknown>", 0, 0, message)
        else:
            diag = Diagnostic(loc.file, loc.line, loc.col, message, loc.text)
        self.errors: list[Diagnostic] = [diag]
        super().__init__(diag.render())

    @property
    def message(self) -> str:
        """The first diagnostic's message without location."""
        return self.errors[0].message

    def __str__(self) -> str:
        return "\n".join(d.render() for d in self.errors)
