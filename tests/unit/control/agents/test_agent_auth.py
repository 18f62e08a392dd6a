"""Who may talk on the agent channel: peer credentials, tokens, token files."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from icefabric.control.agents import auth


def test_peer_pid_of_a_socketpair_is_our_own() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert auth.peer_pid(a) == os.getpid()


def test_tokens() -> None:
    t = auth.new_token()
    assert len(t) >= 32 and t != auth.new_token()
    assert auth.token_matches(None, None) and auth.token_matches(None, "x")
    assert auth.token_matches(t, t)
    assert not auth.token_matches(t, None) and not auth.token_matches(t, t + "x")


def test_token_file_must_be_private(tmp_path: Path) -> None:
    p = tmp_path / "token"
    p.write_text("a" * 32 + "\n")
    p.chmod(0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        auth.read_token(p)
    p.chmod(0o600)
    assert auth.read_token(p) == "a" * 32
    p.write_text("short")
    with pytest.raises(ValueError, match=r"16\.\.1024"):
        auth.read_token(p)
    with pytest.raises(ValueError, match="cannot read"):
        auth.read_token(tmp_path / "missing")
