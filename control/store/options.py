"""``icectl run``'s store options (``--store``, the etcd TLS and user options, ``--lease``) and
building the store they name."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from icefabric.control.store.base import StateStore
from icefabric.control.store.election import DEFAULT_LEASE_S
from icefabric.control.store.etcd_client import EtcdSecurity, parse_endpoints
from icefabric.control.store.filestore import FileStore
from icefabric.files import read_text


class StoreOptionError(ValueError):
    """A bad store option (one line, names the option)."""


def add_store_options(p: argparse.ArgumentParser) -> None:
    """Register the store options on ``icectl run``."""
    p.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help="where replicas share jobs, plans, agent keys and caps: a state file (default, "
        "--state) or etcd://HOST:2379[,HOST:2379...] (etcds:// for TLS): replicas on different "
        "servers elect the primary through etcd (control/README.md, 'Replicas')",
    )
    p.add_argument("--etcd-cacert", default=None, metavar="FILE", help="CA bundle for etcds://")
    p.add_argument("--etcd-cert", default=None, metavar="FILE", help="client certificate (TLS)")
    p.add_argument("--etcd-key", default=None, metavar="FILE", help="client certificate's key")
    p.add_argument("--etcd-user", default=None, metavar="NAME", help="etcd user (etcd auth)")
    p.add_argument(
        "--etcd-password-file",
        default=None,
        metavar="FILE",
        help="the etcd user's password, first line of a file only you can read",
    )
    p.add_argument(
        "--etcd-prefix", default="/icefabric", metavar="KEY", help="key prefix (default /icefabric)"
    )
    p.add_argument(
        "--lease",
        type=int,
        default=DEFAULT_LEASE_S,
        metavar="S",
        help=f"etcd lease of this replica in seconds (default {DEFAULT_LEASE_S}; a primary that "
        "cannot renew it stops writing before it ends, a standby takes over after it)",
    )
    p.add_argument(
        "--replica-name",
        default=None,
        metavar="NAME",
        help="this replica's name in etcd (default HOSTNAME-PID)",
    )


def _read_password(path: str) -> str:
    p = Path(path)
    try:
        st = os.stat(p)
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise StoreOptionError(
                f"--etcd-password-file {path}: readable by others (mode {st.st_mode & 0o777:o}); "
                "chmod 600 it"
            )
        text = read_text(p, what="etcd password file", limit=4096)
    except (OSError, ValueError) as exc:
        msg = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StoreOptionError(f"--etcd-password-file {path}: {msg}") from None
    line = text.splitlines()[0] if text else ""
    if not line:
        raise StoreOptionError(f"--etcd-password-file {path}: empty")
    return line


def make_store(args: argparse.Namespace, topology: str, state_file: Path) -> StateStore:
    """The store the options name (StoreOptionError for a bad value)."""
    url = args.store
    if url is None or url.startswith("file:"):
        return FileStore(Path(url[5:]) if url else state_file)
    try:
        endpoints = parse_endpoints(url)
    except ValueError as exc:
        raise StoreOptionError(f"--store: {exc}") from None
    if not 1 <= args.lease <= 3600:
        raise StoreOptionError(f"--lease: expected 1..3600 seconds, got {args.lease}")
    for opt in ("etcd_cacert", "etcd_cert", "etcd_key"):
        f = getattr(args, opt)
        if f is not None and not Path(f).is_file():
            raise StoreOptionError(f"--{opt.replace('_', '-')} {f}: no such file")
    if (args.etcd_cert is None) != (args.etcd_key is None):
        raise StoreOptionError("--etcd-cert and --etcd-key go together")
    password = None
    if args.etcd_password_file is not None:
        if args.etcd_user is None:
            raise StoreOptionError("--etcd-password-file needs --etcd-user")
        password = _read_password(args.etcd_password_file)
    security = EtcdSecurity(
        cacert=args.etcd_cacert,
        cert=args.etcd_cert,
        key=args.etcd_key,
        user=args.etcd_user,
        password=password,
    )
    from icefabric.control.store.etcd import EtcdStore

    if not args.etcd_prefix.startswith("/") or len(args.etcd_prefix) > 200:
        raise StoreOptionError(
            f"--etcd-prefix: expected /KEY (<= 200 chars), got {args.etcd_prefix!r}"
        )
    return EtcdStore(
        endpoints,
        topology,
        security=security,
        prefix=args.etcd_prefix,
        name=args.replica_name,
        lease_s=args.lease,
    )
