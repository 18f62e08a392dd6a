"""The gateway client against a real 3-member etcd: KV, transactions, leases, failover."""

from __future__ import annotations

import pytest

from icefabric.control.store.etcd_client import (
    EtcdClient,
    EtcdError,
    EtcdUnavailable,
    cmp_create_revision,
    op_get,
    op_put,
    parse_endpoints,
    prefix_end,
)
from icefabric.control.store.localcluster import LocalEtcdCluster


def test_endpoints_parse_and_bad_ones_are_named() -> None:
    assert parse_endpoints("etcd://a:2379,b:2380") == ["http://a:2379", "http://b:2380"]
    assert parse_endpoints("etcds://10.0.0.1:2379") == ["https://10.0.0.1:2379"]
    for bad, word in [("a:2379", "etcd://"), ("etcd://a", "HOST:PORT"), ("ftp://a:1", "scheme")]:
        with pytest.raises(ValueError, match=word):
            parse_endpoints(bad)


def test_kv_txn_and_prefix(etcd3: LocalEtcdCluster) -> None:
    c = EtcdClient(etcd3.endpoints)
    c.put(b"/t/a", b"1")
    c.put(b"/t/b", b"2")
    c.put(b"/u", b"3")
    kvs, rev = c.range(b"/t/", prefix_end(b"/t/"))
    assert [(kv.key, kv.value) for kv in kvs] == [(b"/t/a", b"1"), (b"/t/b", b"2")]
    assert rev >= 4
    # create-if-absent: the first txn wins, the second reads the winner
    won = c.txn([cmp_create_revision(b"/lead", 0)], [op_put(b"/lead", b"x")], [op_get(b"/lead")])
    lost = c.txn([cmp_create_revision(b"/lead", 0)], [op_put(b"/lead", b"y")], [op_get(b"/lead")])
    assert won.succeeded and not lost.succeeded
    kv = c.get(b"/lead")
    assert kv is not None and kv.value == b"x" and kv.create_revision == won.revision
    old = c.range(b"/t/a", revision=rev - 1)[0]  # reads at an older revision
    assert old and old[0].value == b"1"
    assert c.delete(b"/t/", prefix_end(b"/t/")) == 2


def test_lease_keys_vanish_when_revoked(etcd3: LocalEtcdCluster) -> None:
    c = EtcdClient(etcd3.endpoints)
    lease, ttl = c.lease_grant(1)
    assert ttl == 1  # the cluster runs with a 500 ms election timeout: 1 s leases are granted
    c.put(b"/l", b"v", lease=lease)
    assert c.lease_keepalive(lease) == 1
    c.lease_revoke(lease)
    assert c.get(b"/l") is None
    assert c.lease_keepalive(lease) == 0
    c.lease_revoke(lease)  # already gone: not an error
    with pytest.raises(EtcdError, match="lease not found"):
        c.put(b"/l", b"v", lease=lease)


def test_one_member_down_changes_nothing_all_down_is_one_line(etcd3: LocalEtcdCluster) -> None:
    c = EtcdClient(etcd3.endpoints, timeout_s=3.0)  # etcd elects a new leader within ~1 s
    c.put(b"/k", b"1")
    etcd3.stop_member(0)
    c.put(b"/k", b"2")  # moves to the next endpoint
    kv = c.get(b"/k")
    assert kv is not None and kv.value == b"2"
    for i in (1, 2):
        etcd3.stop_member(i)
    with pytest.raises(EtcdUnavailable, match="no endpoint answered") as err:
        c.get(b"/k", timeout=1.0)
    assert "\n" not in str(err.value)
