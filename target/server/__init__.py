"""P4Runtime gRPC server for the embedded target."""
