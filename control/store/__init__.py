"""Where a controller keeps the state its replicas share: the local state file (the default)
or an etcd cluster (replicas on different servers, leader election). See ``base.py``."""

from icefabric.control.store.base import (
    Snapshot,
    StateStore,
    StoreError,
    StoreFenced,
)
from icefabric.control.store.filestore import FileStore

__all__ = ["FileStore", "Snapshot", "StateStore", "StoreError", "StoreFenced"]
