"""P4 compiler of the embedded target: P4 source -> Python code + P4Info."""

from icefabric.target.compiler.pipeline import (
    CloneRequest,
    EgressResult,
    IngressResult,
    PacketContext,
    Pipeline,
    PipelineEnv,
)
from icefabric.target.compiler.program import Program, compile_source, load_program
from icefabric.target.p4.errors import P4CompileError

__all__ = [
    "CloneRequest",
    "EgressResult",
    "IngressResult",
    "P4CompileError",
    "PacketContext",
    "Pipeline",
    "PipelineEnv",
    "Program",
    "compile_source",
    "load_program",
]
