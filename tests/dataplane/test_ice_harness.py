"""The harness itself: target selection and clean skips."""

from __future__ import annotations

import harness
import pytest
from leaf_spine import build_leaf_spine

pytestmark = pytest.mark.dataplane


def test_unknown_target_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(harness.TARGET_ENV, "tofino")
    with pytest.raises(ValueError, match="expected 'embedded' or 'bmv2'"):
        harness.target_name()


def test_bmv2_without_tools_is_unavailable_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = harness.bmv2_unavailable_reason()
    if reason is None:
        pytest.skip("BMv2 tools are installed here")
    monkeypatch.setenv(harness.TARGET_ENV, "bmv2")
    with pytest.raises(harness.TargetUnavailable, match="needs"):
        build_leaf_spine()


def test_missing_program_override_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(harness.PROGRAM_ENV, "/nonexistent/ice.p4")
    with pytest.raises(FileNotFoundError, match="no P4 program"):
        harness.program_path()
