"""Fixtures every tier shares: a 3-member etcd cluster on loopback ports in a temporary folder
(skips without etcd)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from icefabric.control.store.localcluster import LocalEtcdCluster, etcd_binary


@pytest.fixture
def etcd3(tmp_path: Path) -> Iterator[LocalEtcdCluster]:
    """Three etcd members, started and stopped around one test (a test may kill members)."""
    if etcd_binary() is None:
        pytest.skip("etcd not on PATH (make setup installs Debian's etcd-server)")
    cluster = LocalEtcdCluster(tmp_path / "etcd", members=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()
