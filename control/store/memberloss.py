"""Does a primary keep its term when etcd loses its leader member?
``python -m icefabric.control.store.memberloss [--kills N] [--lease S]``.

A local 3-member etcd (``LocalEtcdCluster``: 100 ms heartbeat, 500 ms election timeout) and one
:class:`~icefabric.control.store.election.Election` that becomes primary; then, ``--kills``
times: SIGKILL the member that is etcd's raft leader, wait until a renewal is answered again
(or the primary fences itself), bring the member back. Per kill it prints the age of the last
acknowledged renewal at the kill, when etcd answered a renewal again (seconds after the kill)
and whether the term held; then how many kills kept the term. The figures in control/README.md
("Losing etcd's leader member") come from this command.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time

from icefabric.control.store.election import DEFAULT_LEASE_S, Election
from icefabric.control.store.etcd_client import EtcdClient
from icefabric.control.store.localcluster import LocalEtcdCluster, etcd_binary
from icefabric.waiting import poll_until


def etcd_leader(cluster: LocalEtcdCluster) -> int | None:
    """The index of the member that is etcd's raft leader now (None while there is none)."""
    c = EtcdClient(cluster.endpoints)
    try:
        for i, ep in enumerate(cluster.endpoints):
            st = c.endpoint_status(ep)
            if st is not None and st.get("leader") == st.get("header", {}).get("member_id"):
                return i
    finally:
        c.close()
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the kills and print one line each, then the summary; 1 if any kill lost the term."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.control.store.memberloss", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--kills", type=int, default=10, help="leader members killed (default 10)")
    ap.add_argument("--lease", type=int, default=DEFAULT_LEASE_S, help="lease TTL, s")
    args = ap.parse_args(argv)
    if not 1 <= args.kills <= 1000:
        ap.error(f"--kills: expected 1..1000, got {args.kills}")
    if etcd_binary() is None:
        print("memberloss: etcd not on PATH (make setup installs etcd-server)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    held = 0
    with tempfile.TemporaryDirectory(prefix="ice-memberloss-") as tmp:
        cluster = LocalEtcdCluster(tmp).start()
        fenced: list[str] = []
        el = Election(
            EtcdClient(cluster.endpoints), b"/memberloss/", "p", lease_s=args.lease,
            on_fenced=fenced.append,
        )  # fmt: skip
        el.start()
        try:
            for k in range(args.kills):
                if not poll_until(lambda: el.term > 0 and etcd_leader(cluster) is not None, 30):
                    print(f"kill {k}: no primary or no etcd leader in 30 s", file=sys.stderr)
                    return 1
                poll_until(lambda: False, 1.0, interval=0.1)  # a settled cluster before a kill
                lost = etcd_leader(cluster)
                if lost is None:
                    continue
                term, n_fenced, acks = el.term, len(fenced), el._ka_acks
                t_kill = time.monotonic()
                age = t_kill - el._last_ka
                cluster.stop_member(lost)

                def answered_or_fenced(acks: int = acks, n_fenced: int = n_fenced) -> bool:
                    return el._ka_acks > acks or len(fenced) > n_fenced

                poll_until(answered_or_fenced, 10)
                answered = time.monotonic() - t_kill
                ok = el.term == term and len(fenced) == n_fenced
                held += ok
                print(
                    f"kill {k}: member m{lost}; last renewal {age:.2f} s old; etcd answered a "
                    f"renewal {answered:.2f} s after the kill; term "
                    + ("held" if ok else f"lost ({fenced[-1] if fenced else 'replaced'})"),
                    flush=True,
                )
                cluster.start_member(lost)
        finally:
            el.stop()
            cluster.close()
    print(f"{held} of {args.kills} leader-member kills kept the term (lease {args.lease} s)")
    return 0 if held == args.kills else 1


if __name__ == "__main__":
    raise SystemExit(main())
