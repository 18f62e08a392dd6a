"""The etcd store: the shared state of controller replicas on different servers, and their
election (:mod:`.election`).

Keys, under ``<prefix>/<topology>/`` (prefix default ``/icefabric``):

| key | holds |
|---|---|
| ``leader`` | the primary's name, under its lease; its create revision is the term |
| ``replicas/<name>`` | each replica's API and agent addresses and role, under its lease |
| ``state/gen`` | generation, term and replica of the last committed change |
| ``state/meta`` | failed links and switches, links the probes took down |
| ``state/jobs`` | the running jobs (job descriptions) |
| ``state/plan`` | each job's path choices (candidate index per flow, in the job's flow order) |
| ``state/keys`` | real flow keys agents reported |
| ``state/phases``, ``state/caps`` | each job's running phase; each flow's cap (bit/s) |
| ``blob/<sha256>/<i>`` | a document over 64 KiB, in 1 MB chunks (the document names the blob) |

A save writes the chunks of new large documents first (content-addressed: harmless until
named), then **one transaction** guarded by the term (``create_revision(leader) == term``) that
puts every changed document, the new generation and deletes the chunks no document names any
more. A replica reads every document at one revision, so it never sees half a change, and a
replica that is no longer primary cannot commit (``StoreFenced``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from icefabric.control.daemon.state import MAX_STATE_BYTES, SharedState, state_from_data
from icefabric.control.store.base import Snapshot, StoreError, StoreFenced
from icefabric.control.store.election import DEFAULT_LEASE_S, Election, default_replica_name
from icefabric.control.store.etcd_client import (
    EtcdClient,
    EtcdError,
    EtcdSecurity,
    cmp_create_revision,
    op_delete,
    op_put,
    prefix_end,
)
from icefabric.files import parse_json

if TYPE_CHECKING:
    from collections.abc import Iterable

log = logging.getLogger(__name__)

INLINE_MAX = 64 * 1024  # documents up to this size live in their key; larger ones in a blob
CHUNK = 1_000_000  # below etcd's default 1.5 MiB request limit
DOCS = ("meta", "jobs", "plan", "keys", "phases", "caps")
SAVE_TIMEOUT_S = 10.0


class EtcdStore:
    """Shared state in etcd plus this replica's election (see the module docstring)."""

    kind = "etcd"
    elects = True

    def __init__(
        self,
        endpoints: str | list[str],
        topology: str,
        *,
        security: EtcdSecurity | None = None,
        prefix: str = "/icefabric",
        name: str | None = None,
        lease_s: int = DEFAULT_LEASE_S,
        poll_s: float = 0.1,
        timeout_s: float = 2.0,
    ) -> None:
        self.client = EtcdClient(endpoints, security=security, timeout_s=timeout_s)
        self.topology = topology
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in topology)[:100]
        self.prefix = f"{prefix.rstrip('/')}/{safe}/".encode()
        self.name = name or default_replica_name()
        self.election = Election(
            self.client, self.prefix, self.name, lease_s=lease_s, poll_s=poll_s
        )
        self._docs: dict[str, bytes] = {}  # document -> the value committed last (ours or read)
        self._stored: dict[str, bytes] = {}  # document -> its key's value (inline or blob ref)
        self.gen = 0
        self.saves = 0
        self.last_save_ms = 0.0

    # -- election --------------------------------------------------------------------------

    def start(
        self,
        on_elected: Callable[[int], None],
        on_fenced: Callable[[str], None],
    ) -> None:
        """Register and campaign; ``on_elected(term)`` / ``on_fenced(reason)`` run on the
        election thread (queue the work, return quickly)."""
        self.election.on_elected = on_elected
        self.election.on_fenced = on_fenced
        self.election.start()

    def publish(self, **info: Any) -> None:
        """Publish this replica's addresses (API socket, agent channel) in ``replicas/``."""
        self.election.publish(**info)

    @property
    def term(self) -> int:
        """This replica's term while primary, else 0."""
        return self.election.term

    def may_write(self) -> bool:
        """Whether this replica is primary and its lease certainly holds."""
        return self.election.may_write()

    def wait_writable(self) -> bool:
        """``may_write()`` once a pause (a renewal unanswered, the term kept) has ended."""
        return self.election.wait_writable()

    def where(self) -> str:
        """The endpoints and the key prefix."""
        return f"etcd {','.join(self.client.endpoints)} {self.prefix.decode()}"

    # -- save ------------------------------------------------------------------------------

    def _key(self, doc: str) -> bytes:
        return self.prefix + b"state/" + doc.encode()

    def _blob_prefix(self, sha: str) -> bytes:
        return self.prefix + b"blob/" + sha.encode() + b"/"

    @staticmethod
    def documents(snapshot: Snapshot) -> dict[str, bytes]:
        """The snapshot as the state documents' JSON bytes (deterministic)."""
        parts: dict[str, Any] = {
            "meta": {
                "topology": snapshot.topology,
                "failed_links": sorted(snapshot.failed_links),
                "failed_switches": sorted(snapshot.failed_switches),
                "probe_down_links": sorted(snapshot.probe_down_links),
            },
            "jobs": [j.to_dict() for j in snapshot.jobs],
            "plan": snapshot.choices,
            "keys": {k: dict(v) for k, v in sorted(snapshot.flow_keys.items())},
            "phases": dict(sorted(snapshot.phases.items())),
            "caps": {k: round(v, 3) for k, v in sorted(snapshot.caps.items())},
        }
        return {
            k: json.dumps(v, separators=(",", ":"), sort_keys=True).encode()
            for k, v in parts.items()
        }

    def save(self, snapshot: Snapshot) -> bool:
        """Commit the changed documents in one term-guarded transaction; False if none changed."""
        term = self.election.term
        if not term or not self.election.wait_writable():
            raise StoreFenced(f"{self.where()}: {self.name} is not the primary; not saved")
        t0 = time.perf_counter()
        docs = self.documents(snapshot)
        changed = {k: v for k, v in docs.items() if self._docs.get(k) != v}
        if not changed:
            return False
        values: dict[str, bytes] = {}
        try:
            for doc, data in changed.items():
                values[doc] = self._stage(data)
            old_blobs = {_blob_of(self._stored.get(d, b"")) for d in changed} - {None}
            new_blobs = {_blob_of(values[d]) for d in changed} | {
                _blob_of(self._stored.get(d, b"")) for d in DOCS if d not in changed
            }
            ops = [op_put(self._key(d), v) for d, v in values.items()]
            ops += [
                op_delete(self._blob_prefix(sha), prefix_end(self._blob_prefix(sha)))
                for sha in sorted(s for s in old_blobs if s not in new_blobs and s is not None)
            ]
            gen = {"gen": self.gen + 1, "term": term, "replica": self.name, "at": time.time()}
            ops.append(op_put(self._key("gen"), json.dumps(gen).encode()))
            res = self.client.txn(
                [cmp_create_revision(self.election.leader_key, term)], ops, timeout=SAVE_TIMEOUT_S
            )
        except EtcdError as exc:
            raise StoreError(f"{self.where()}: save failed: {exc}") from exc
        if not res.succeeded:
            self.election._fence(f"a save found term {term} no longer leading in etcd")
            raise StoreFenced(f"{self.where()}: term {term} is no longer the leader; not saved")
        self.gen += 1
        self._docs.update(changed)
        self._stored.update(values)
        self.saves += 1
        self.last_save_ms = (time.perf_counter() - t0) * 1e3
        return True

    def _stage(self, data: bytes) -> bytes:
        """The key's value for a document: inline, or written as chunks and named by a ref."""
        if len(data) <= INLINE_MAX:
            return b"=" + data
        sha = hashlib.sha256(data).hexdigest()
        n = (len(data) + CHUNK - 1) // CHUNK
        base = self._blob_prefix(sha)
        for i in range(n):
            self.client.put(base + f"{i:06d}".encode(), data[i * CHUNK : (i + 1) * CHUNK])
        return b"@" + json.dumps({"blob": sha, "parts": n, "bytes": len(data)}).encode()

    # -- load ------------------------------------------------------------------------------

    def load(self, topology: str) -> SharedState:
        """Every document read at one revision; what cannot be read goes to ``errors``."""
        where = self.where()
        try:
            kvs, rev = self.client.range(
                self.prefix + b"state/", prefix_end(self.prefix + b"state/"), timeout=SAVE_TIMEOUT_S
            )
        except EtcdError as exc:
            return SharedState(errors=[f"{where}: cannot read the state: {exc}"])
        stored = {kv.key[len(self.prefix) + 6 :].decode(errors="replace"): kv.value for kv in kvs}
        data: dict[str, Any] = {}
        docs: dict[str, bytes] = {}
        errors: list[str] = []
        total = 0
        for doc in DOCS:
            raw = stored.get(doc)
            if raw is None:
                continue
            try:
                body = self._unstage(raw, rev)
                total += len(body)
                if total > MAX_STATE_BYTES:
                    raise ValueError(f"the state passes {MAX_STATE_BYTES} bytes")
                data[doc] = parse_json(body)
                docs[doc] = body
            except (ValueError, EtcdError) as exc:
                errors.append(f"{where}state/{doc}: {str(exc).splitlines()[0][:200]}")
        gen = stored.get("gen")
        if gen is not None:
            try:
                self.gen = int(parse_json(gen).get("gen", 0))
            except (ValueError, AttributeError):
                errors.append(f"{where}state/gen: not a generation record")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            errors.append(f"{where}state/meta: expected an object")
            meta = {}
        if meta and meta.get("topology") != topology:
            errors.append(f"{where}: state of topology {str(meta.get('topology'))[:100]!r} ignored")
            return SharedState(errors=errors)
        merged = {
            **{k: v for k, v in meta.items() if k != "topology"},
            "jobs": data.get("jobs", []),
            "choices": data.get("plan", {}),
            "flow_keys": data.get("keys", {}),
            "phases": data.get("phases", {}),
            "caps": data.get("caps", {}),
        }
        state = state_from_data(merged, where)
        state.errors[:0] = errors
        self._docs = docs  # a takeover's first save writes only what changed since
        self._stored.clear()
        self._stored.update({d: stored[d] for d in docs})
        return state

    def _unstage(self, raw: bytes, revision: int) -> bytes:
        if raw[:1] == b"=":
            return raw[1:]
        if raw[:1] != b"@":
            raise ValueError("expected an inline document or a blob reference")
        ref = parse_json(raw[1:])
        sha, parts, size = str(ref["blob"]), int(ref["parts"]), int(ref["bytes"])
        if size > MAX_STATE_BYTES or not 0 < parts <= MAX_STATE_BYTES // CHUNK + 1:
            raise ValueError(f"blob {sha[:12]}: {size} bytes in {parts} parts is out of bounds")
        base = self._blob_prefix(sha)
        kvs, _ = self.client.range(
            base, prefix_end(base), revision=revision, timeout=SAVE_TIMEOUT_S
        )
        body = b"".join(kv.value for kv in sorted(kvs, key=lambda kv: kv.key))
        if len(kvs) != parts or len(body) != size or hashlib.sha256(body).hexdigest() != sha:
            raise ValueError(f"blob {sha[:12]}: {len(kvs)}/{parts} parts, checksum mismatch")
        return body

    # -- views -----------------------------------------------------------------------------

    def replicas(self) -> list[dict[str, Any]]:
        """Every registered replica (their leases alive), by name."""
        base = self.prefix + b"replicas/"
        out = _replica_records(self.client, base, timeout=2.0)
        return sorted(out, key=lambda d: str(d.get("name", "")))

    def agent_addresses(self) -> list[str]:
        """Every replica's agent channel addresses, the primary's first."""
        return primary_first_addresses(self.replicas())

    def describe(self) -> dict[str, Any]:
        """Store, this replica's role and term, the leader, every replica, every member."""
        el = self.election
        out: dict[str, Any] = {
            "kind": self.kind,
            "where": self.where(),
            "endpoints": list(self.client.endpoints),
            "replica": self.name,
            "role": "primary" if el.term else "standby",
            "term": el.term,
            "leader": el.leader.get("name"),
            "leader_term": el.leader_term,
            "lease_s": el.ttl or el.lease_s,
            "lease_left_s": round(el.lease_left_s(), 3),
            "writes_paused_s": round(time.monotonic() - el.paused_since, 2)
            if el.paused_since
            else 0.0,
            "fenced": el.fenced_reason,
            "generation": self.gen,
            "saves": self.saves,
            "last_save_ms": round(self.last_save_ms, 2),
        }
        try:
            out["replicas"] = self.replicas()
        except EtcdError as exc:
            out["replicas"] = []
            out["error"] = str(exc)
        out["members"] = [self._member(ep) for ep in self.client.endpoints]
        return out

    def _member(self, endpoint: str) -> dict[str, Any]:
        st = self.client.endpoint_status(endpoint)
        if st is None:
            return {"endpoint": endpoint, "up": False, "leader": False}
        me = st.get("header", {}).get("member_id")
        return {"endpoint": endpoint, "up": True, "leader": st.get("leader") == me}

    def resign(self) -> None:
        """Give up the current term (a takeover that failed): stop writing, let another win."""
        self.election._fence("resigned the term")

    def close(self) -> None:
        """Resign (revoke the lease: a standby takes over at once) and close connections."""
        self.election.stop(resign=True)
        self.client.close()


def _replica_records(client: EtcdClient, base: bytes, **kw: Any) -> list[dict[str, Any]]:
    """The replica records under ``base``, for ``replicas()`` and ``agent_discovery``; a value
    that is not a JSON object is skipped."""
    kvs, _ = client.range(base, prefix_end(base), **kw)
    out = []
    for kv in kvs:
        try:
            d = parse_json(kv.value)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def primary_first_addresses(replicas: Iterable[dict[str, Any]]) -> list[str]:
    """The agent addresses of ``replicas`` with the primary's first."""
    rows = sorted(replicas, key=lambda r: (r.get("role") != "primary", str(r.get("name", ""))))
    out: list[str] = []
    for r in rows:
        for a in r.get("agent", []) or []:
            if isinstance(a, str) and a not in out:
                out.append(a)
    return out


def _blob_of(value: bytes) -> str | None:
    if value[:1] != b"@":
        return None
    try:
        return str(parse_json(value[1:])["blob"])
    except (ValueError, KeyError, TypeError):
        return None


def agent_discovery(
    endpoints: str | list[str],
    topology: str,
    *,
    prefix: str = "/icefabric",
    security: EtcdSecurity | None = None,
) -> Callable[[], list[str]]:
    """For ``AgentClient(discover=...)``: every replica's agent addresses from etcd, the
    primary's first (read each time it is called; no campaign, no lease)."""
    client = EtcdClient(endpoints, security=security, timeout_s=1.0)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in topology)[:100]
    base = f"{prefix.rstrip('/')}/{safe}/replicas/".encode()

    def discover() -> list[str]:
        return primary_first_addresses(_replica_records(client, base))

    return discover
