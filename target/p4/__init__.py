"""P4_16 front end of the embedded target: preprocessor, lexer, parser and AST."""

from icefabric.target.p4.errors import Diagnostic, P4CompileError, SourceLoc

__all__ = ["Diagnostic", "P4CompileError", "SourceLoc"]
