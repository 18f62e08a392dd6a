"""Telemetry: INT reports from the switches (packet-ins), per-link and per-queue time series, the
Prometheus endpoint."""
