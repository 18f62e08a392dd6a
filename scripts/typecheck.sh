#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping (icefabric.control -> control/), so give it
# the same view through a tree of links under build/typecheck, then check the icefabric package.
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/typecheck/icefabric
rm -rf build/typecheck && mkdir -p "$root"
for f in icefabric/*.py; do ln -s "$PWD/$f" "$root/$(basename "$f")"; done
for d in control target topo traffic sim p4src experiment; do ln -s "$PWD/$d" "$root/$d"; done
cd build/typecheck
exec ../../.venv/bin/python -m mypy --config-file ../../pyproject.toml -p icefabric "$@"
