"""ICE (Intelligent Control Ethernet): P4 data plane plus P4Runtime control plane for RoCEv2 fabrics."""

__version__ = "0.1.0"
