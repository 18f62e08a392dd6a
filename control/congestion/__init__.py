"""Global active congestion control: max-min fair rates over the planned paths, caps to agents."""

from icefabric.control.congestion.waterfill import max_min_fill, max_min_rates

__all__ = ["max_min_fill", "max_min_rates"]
