"""The job description the controller's tests plan, in the unit and the e2e tiers (importable
from any test: pytest puts this folder, which holds the tests' top conftest.py, on sys.path)."""

from __future__ import annotations

from typing import Any


def ring_job(
    name: str = "ring", hosts: tuple[str, ...] = ("h1", "h3", "h5", "h7")
) -> dict[str, Any]:
    """A ring all-reduce of 64 MiB over ``hosts`` (one rank each, 2 channels), as a job file."""
    return {
        "name": name,
        "hosts": list(hosts),
        "phases": [
            {
                "name": "ar",
                "collective": "all-reduce",
                "algorithm": "ring",
                "channels": 2,
                "message_bytes": "64MiB",
            }
        ],
    }
