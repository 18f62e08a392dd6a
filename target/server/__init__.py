"""P4Runtime gRPC server for the embedded target."""

from icefabric.target.server.service import P4RuntimeService, serve

__all__ = ["P4RuntimeService", "serve"]
