"""The comparison table says '-' for what a mode did not measure, not a zero."""

from __future__ import annotations

from icefabric.experiment.report import _queue_cell


def test_queue_percentiles_only_where_samples_exist() -> None:
    measured = {"queue_packets": {"samples": 40, "p50": 1.0, "p99": 12.0, "max": 15.0}}
    assert _queue_cell(measured) == "1 / 12 / 15"
    # an ECMP mode in Mininet: no INT records, so no queue samples beside its ECN marks
    none = {"queue_packets": {"samples": 0, "p50": 0.0, "p99": 0.0, "max": 0}}
    assert _queue_cell(none) == "- (not measured)"
