#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine: Debian packages, .venv, the project (editable).
# A second run does nothing slow: each step checks before it acts.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# prometheus: tests/e2e/test_prometheus.py scrapes icectl run with it; tmux: the README tour test;
# etcd-server, etcd-client: the etcd store's tests start a 3-member cluster (etcdctl to inspect it)
DEB_PKGS=(mininet bridge-utils iproute2 iputils-ping tcpdump ethtool python3-venv python3-pip procps
          prometheus tmux etcd-server etcd-client)

missing=()
for p in "${DEB_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing Debian packages: ${missing[*]}" >&2
        echo "setup: run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi

# Debian's python with system site packages, so Mininet's module (dist-packages) imports.
if [[ ! -x $VENV/bin/python ]]; then
    echo "setup: creating $VENV from /usr/bin/python3 (with system site packages)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi

stamp=$VENV/.icefabric-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
    echo "setup: installing icefabric[dev] into $VENV (log: $VENV/pip-install.log)"
    if ! { "$VENV/bin/python" -m pip install -q --upgrade "pip>=23" \
           && "$VENV/bin/python" -m pip install -q -e ".[dev]"; } >"$VENV/pip-install.log" 2>&1; then
        tail -n 30 "$VENV/pip-install.log" >&2
        echo "setup: pip install failed; full log in $VENV/pip-install.log" >&2
        exit 1
    fi
    "$VENV/bin/python" -c "import icefabric, p4runtime_sh, scapy, networkx, mininet" \
        || { echo "setup: install check failed (see $VENV/pip-install.log)" >&2; exit 1; }
    touch "$stamp"
fi
