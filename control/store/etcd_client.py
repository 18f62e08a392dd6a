"""A small etcd v3 client over etcd's gRPC gateway (JSON over HTTP), standard library only.

Why not a PyPI client: ``etcd3`` (0.12, 2020) talks to one endpoint only and ships protobuf code
generated for old protoc releases; generating etcd's protos at build time needs etcd's source.
The gateway is part of every etcd 3.4+ server (``/v3/kv/range``, ``/v3/kv/txn``,
``/v3/lease/grant`` ...), takes the same messages as the gRPC API (bytes fields base64, 64-bit
integers as strings, default values left out) and needs nothing but ``http.client``.

Several endpoints are tried in turn: a request that cannot reach one (refused, timed out, a
member without quorum) moves to the next, so losing one member of three changes nothing. TLS:
a CA file, optionally a client certificate and key. User and password: the token from
``/v3/auth/authenticate`` goes in the ``Authorization`` header and is renewed when the server
says it expired. Every failure is an :class:`EtcdError` with one line naming the endpoint.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from icefabric.files import parse_json
from icefabric.waiting import Deadline

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 512 * 1024 * 1024  # a whole 100k-GPU state fits many times over
DEFAULT_TIMEOUT_S = 2.0


class EtcdError(Exception):
    """etcd could not be reached or refused a request (one line: endpoint, path, reason)."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code  # the gRPC status code etcd answered with, when it answered


class EtcdUnavailable(EtcdError):
    """No endpoint answered in time (all down, partitioned, or the cluster has no quorum)."""


@dataclass(slots=True, frozen=True, kw_only=True)
class KeyValue:
    """One key as etcd returns it."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclass(slots=True, kw_only=True)
class TxnResult:
    """A transaction's outcome: which branch ran, the store revision, each op's response."""

    succeeded: bool
    revision: int
    responses: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True, frozen=True, kw_only=True)
class EtcdSecurity:
    """TLS and authentication options, as etcdctl takes them (--cacert, --cert, --key, --user)."""

    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    user: str | None = None
    password: str | None = None
    insecure_skip_verify: bool = False


def b64(data: bytes | str) -> str:
    """etcd's JSON encoding of a bytes field."""
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str) -> bytes:
    """A bytes field back from etcd's JSON."""
    return base64.b64decode(text)


def prefix_end(prefix: bytes) -> bytes:
    """The range end that selects every key starting with ``prefix`` (etcdctl --prefix)."""
    p = bytearray(prefix)
    for i in range(len(p) - 1, -1, -1):
        if p[i] < 0xFF:
            p[i] += 1
            return bytes(p[: i + 1])
    return b"\x00"


def parse_endpoints(text: str) -> list[str]:
    """``etcd://h:p[,h:p]``, ``etcds://...`` (TLS) or ``http(s)://h:p,...`` -> base URLs."""
    if "://" not in text:
        raise ValueError(f"etcd endpoints: expected etcd://HOST:PORT[,HOST:PORT...], got {text!r}")
    scheme, rest = text.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("etcd", "http"):
        proto = "http"
    elif scheme in ("etcds", "https"):
        proto = "https"
    else:
        raise ValueError(
            f"etcd endpoints: unknown scheme {scheme!r} (expected etcd:// or etcds://)"
        )
    out = []
    for part in rest.strip("/").split(","):
        part = part.strip()
        if part.startswith(("http://", "https://")):
            part = part.split("://", 1)[1]
        u = urlsplit(f"{proto}://{part}")
        try:
            port = u.port
        except ValueError:
            port = None
        if not u.hostname or port is None or u.path not in ("", "/"):
            raise ValueError(f"etcd endpoints: expected HOST:PORT, got {part!r} in {text!r}")
        host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
        out.append(f"{proto}://{host}:{port}")
    if len(out) > 64:
        raise ValueError(f"etcd endpoints: at most 64, got {len(out)}")
    return out


class EtcdClient:
    """Requests to an etcd cluster (thread-safe: one request at a time per client object)."""

    def __init__(
        self,
        endpoints: Sequence[str] | str,
        *,
        security: EtcdSecurity | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.endpoints = (
            parse_endpoints(endpoints) if isinstance(endpoints, str) else list(endpoints)
        )
        if not self.endpoints:
            raise ValueError("etcd: no endpoint given")
        self.security = security or EtcdSecurity()
        self.timeout_s = timeout_s
        self._current = 0  # index of the endpoint that answered last
        self._conns: dict[str, http.client.HTTPConnection] = {}
        self._lock = threading.Lock()
        self._token: str | None = None
        self._ssl: ssl.SSLContext | None = None
        if any(e.startswith("https://") for e in self.endpoints):
            self._ssl = self._ssl_context()

    def _ssl_context(self) -> ssl.SSLContext:
        sec = self.security
        try:
            ctx = ssl.create_default_context(cafile=sec.cacert)
            if sec.cert:
                ctx.load_cert_chain(sec.cert, sec.key)
        except (OSError, ssl.SSLError) as exc:
            raise EtcdError(f"etcd TLS: cannot load certificates: {exc}") from exc
        if sec.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def copy(self) -> EtcdClient:
        """Another client for the same cluster (its own connections: a keepalive thread must not
        wait behind a large read)."""
        c = EtcdClient(self.endpoints, security=self.security, timeout_s=self.timeout_s)
        c._token = self._token
        return c

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to first."""
        return self.endpoints[self._current]

    # -- transport -------------------------------------------------------------------------

    def _conn(self, endpoint: str, timeout: float) -> http.client.HTTPConnection:
        conn = self._conns.get(endpoint)
        if conn is None:
            u = urlsplit(endpoint)
            assert u.hostname is not None and u.port is not None
            if u.scheme == "https":
                conn = http.client.HTTPSConnection(
                    u.hostname, u.port, timeout=timeout, context=self._ssl
                )
            else:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
            self._conns[endpoint] = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self, endpoint: str) -> None:
        conn = self._conns.pop(endpoint, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            for ep in list(self._conns):
                self._drop(ep)

    def request(
        self, path: str, body: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """POST one gateway request. Endpoints are tried in turn, round after round, until one
        answers or ``timeout`` (default ``timeout_s``) has passed: a member that is down or
        has no leader for a moment (an election after a member loss) is skipped."""
        t = self.timeout_s if timeout is None else timeout
        deadline = Deadline(t)
        data = json.dumps(body, separators=(",", ":")).encode()
        with self._lock:
            errors: dict[str, str] = {}
            n = len(self.endpoints)
            i = 0
            while True:
                idx = (self._current + i) % n
                ep = self.endpoints[idx]
                left = deadline.left()
                try:
                    # a member without quorum hangs rather than refuses: give each a share
                    reply = self._post(ep, path, data, max(0.05, min(left, max(0.25, t / n))))
                except _Retry as exc:
                    errors[ep] = str(exc)
                    i += 1
                    if deadline.expired:
                        break
                    if i % n == 0:
                        time.sleep(min(0.05, deadline.left()))
                    continue
                self._current = idx
                return reply
            detail = "; ".join(f"{ep}: {why}" for ep, why in errors.items())
            raise EtcdUnavailable(f"etcd {path}: no endpoint answered in {t:g} s ({detail})")

    def _post(self, ep: str, path: str, data: bytes, timeout: float) -> dict[str, Any]:
        for attempt in range(2):
            headers = {"Content-Type": "application/json"}
            if self._token:
                headers["Authorization"] = self._token
            conn = self._conn(ep, timeout)
            try:
                conn.request("POST", path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
            except (OSError, http.client.HTTPException) as exc:
                self._drop(ep)
                if attempt == 0 and isinstance(
                    exc, http.client.RemoteDisconnected | BrokenPipeError
                ):
                    continue  # a kept-alive connection the server closed: once more, fresh
                reason = (
                    "timed out"
                    if isinstance(exc, socket.timeout)
                    else str(exc) or type(exc).__name__
                )
                raise _Retry(reason) from exc
            if len(raw) > MAX_RESPONSE_BYTES:
                self._drop(ep)
                raise EtcdError(f"etcd {ep}{path}: response over {MAX_RESPONSE_BYTES} bytes")
            try:
                reply: Any = parse_json(raw) if raw else {}
            except ValueError as exc:
                raise _Retry(f"HTTP {resp.status}: not JSON ({raw[:80]!r})") from exc
            if not isinstance(reply, dict):
                raise _Retry(f"HTTP {resp.status}: expected a JSON object")
            if resp.status == 200 and "error" not in reply:
                return reply
            msg = str(reply.get("message") or reply.get("error") or f"HTTP {resp.status}")
            code = reply.get("code")
            if "token" in msg and self.security.user and attempt == 0:
                self._authenticate(ep, timeout)  # expired or missing token: renew, once
                continue
            if code in (14, 4) or "leader" in msg or "timed out" in msg or resp.status >= 502:
                raise _Retry(msg)  # unavailable / deadline / no leader: another member may do
            raise EtcdError(f"etcd {ep}{path}: {msg}", code=code if isinstance(code, int) else None)
        raise _Retry("authentication did not take")

    def _authenticate(self, ep: str, timeout: float) -> None:
        sec = self.security
        body = json.dumps({"name": sec.user, "password": sec.password or ""}).encode()
        conn = self._conn(ep, timeout)
        try:
            conn.request(
                "POST",
                "/v3/auth/authenticate",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            reply = parse_json(resp.read(1 << 20) or b"{}")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self._drop(ep)
            raise _Retry(f"authenticate: {exc}") from exc
        token = reply.get("token") if isinstance(reply, dict) else None
        if resp.status != 200 or not token:
            msg = reply.get("message", f"HTTP {resp.status}") if isinstance(reply, dict) else ""
            raise EtcdError(f"etcd {ep}: user {sec.user!r}: authentication failed: {msg}")
        self._token = str(token)

    # -- KV --------------------------------------------------------------------------------

    def get(self, key: bytes, *, timeout: float | None = None) -> KeyValue | None:
        """One key (linearizable read), or None."""
        kvs, _ = self.range(key, timeout=timeout)
        return kvs[0] if kvs else None

    def range(
        self,
        key: bytes,
        range_end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        timeout: float | None = None,
    ) -> tuple[list[KeyValue], int]:
        """Keys in [key, range_end) at ``revision`` (0: now); returns (kvs, store revision)."""
        body: dict[str, Any] = {"key": b64(key)}
        if range_end is not None:
            body["range_end"] = b64(range_end)
        if revision:
            body["revision"] = str(revision)
        if limit:
            body["limit"] = str(limit)
        reply = self.request("/v3/kv/range", body, timeout=timeout)
        return [_kv(d) for d in reply.get("kvs", [])], _revision(reply)

    def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        """Set a key; the store revision after it."""
        body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return _revision(self.request("/v3/kv/put", body))

    def delete(self, key: bytes, range_end: bytes | None = None) -> int:
        """Delete a key (or a range); the number deleted."""
        body: dict[str, Any] = {"key": b64(key)}
        if range_end is not None:
            body["range_end"] = b64(range_end)
        return int(self.request("/v3/kv/deleterange", body).get("deleted", 0))

    def txn(
        self,
        compare: list[dict[str, Any]],
        success: list[dict[str, Any]],
        failure: list[dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> TxnResult:
        """An etcd transaction (ops built with :func:`op_put`, :func:`op_delete`, ...)."""
        body: dict[str, Any] = {"compare": compare, "success": success}
        if failure:
            body["failure"] = failure
        reply = self.request("/v3/kv/txn", body, timeout=timeout)
        return TxnResult(
            succeeded=bool(reply.get("succeeded", False)),
            revision=_revision(reply),
            responses=list(reply.get("responses", [])),
        )

    # -- leases ----------------------------------------------------------------------------

    def lease_grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease: (id, TTL the server granted; it raises TTLs below its minimum)."""
        reply = self.request("/v3/lease/grant", {"TTL": str(ttl_s)})
        return int(reply["ID"]), int(reply.get("TTL", ttl_s))

    def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int:
        """Refresh a lease; the TTL it now has (0 when it has expired)."""
        reply = self.request("/v3/lease/keepalive", {"ID": str(lease)}, timeout=timeout)
        result = reply.get("result", reply)
        return int(result.get("TTL", 0)) if isinstance(result, dict) else 0

    def lease_revoke(self, lease: int, *, timeout: float | None = None) -> None:
        """End a lease now (its keys are deleted); a lease already gone is not an error."""
        try:
            self.request("/v3/lease/revoke", {"ID": str(lease)}, timeout=timeout)
        except EtcdError as exc:
            if exc.code != 5:  # NotFound: already expired
                raise

    # -- cluster ---------------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """The cluster's members (name, client URLs)."""
        return list(self.request("/v3/cluster/member/list", {}).get("members", []))

    def endpoint_status(self, endpoint: str, *, timeout: float = 0.5) -> dict[str, Any] | None:
        """One member's status (leader, raft term, db size), or None when it does not answer."""
        data = b"{}"
        with self._lock:
            try:
                return self._post(endpoint, "/v3/maintenance/status", data, timeout)
            except (_Retry, EtcdError):
                return None


class _Retry(Exception):
    """This endpoint failed in a way another endpoint may not."""


def op_put(key: bytes, value: bytes, *, lease: int = 0) -> dict[str, Any]:
    """A put inside a transaction."""
    req: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        req["lease"] = str(lease)
    return {"request_put": req}


def op_delete(key: bytes, range_end: bytes | None = None) -> dict[str, Any]:
    """A delete (of a key or a range) inside a transaction."""
    req: dict[str, Any] = {"key": b64(key)}
    if range_end is not None:
        req["range_end"] = b64(range_end)
    return {"request_delete_range": req}


def op_get(key: bytes) -> dict[str, Any]:
    """A read inside a transaction."""
    return {"request_range": {"key": b64(key)}}


def cmp_create_revision(key: bytes, revision: int) -> dict[str, Any]:
    """Compare: the key was created at ``revision`` (0: the key does not exist)."""
    return {
        "key": b64(key),
        "target": "CREATE",
        "result": "EQUAL",
        "create_revision": str(revision),
    }


def _kv(d: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=unb64(d.get("key", "")),
        value=unb64(d.get("value", "")),
        create_revision=int(d.get("create_revision", 0)),
        mod_revision=int(d.get("mod_revision", 0)),
        version=int(d.get("version", 0)),
        lease=int(d.get("lease", 0)),
    )


def _revision(reply: dict[str, Any]) -> int:
    header = reply.get("header", {})
    return int(header.get("revision", 0)) if isinstance(header, dict) else 0
