"""`make bench`: run every benchmark the project has and print the measured figures.

Each benchmark is a module with a `main(argv) -> int`; they run one after another in this
process so that the figures come from the same machine state.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import time
from collections.abc import Sequence

BENCHMARKS: dict[str, str] = {
    "target": "icefabric.target.bench",
    "planner": "icefabric.control.planner.bench",
    "waterfill": "icefabric.control.congestion.bench",
    "nccl-log": "icefabric.control.ccl.nccl.bench",
    "endpoint": "icefabric.experiment.bench",
    "sim": "icefabric.sim.bench",
    "matrix": "icefabric.sim.matrix",
    "store": "icefabric.control.store.bench",
}
# what --quick passes to a benchmark: the simulator's leaves out its 16,384-GPU runs (over 10 of
# the bench's CPU minutes; the figures for 16,384 GPUs come from the full run)
QUICK_ARGS: dict[str, list[str]] = {"sim": ["--quick"]}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the named benchmarks (all by default); exit status is non-zero if any failed."""
    parser = argparse.ArgumentParser(prog="python -m icefabric.bench", description=__doc__)
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="leave out the long runs (the simulator's 16,384-GPU ring all-reduce and data-parallel "
        "step, over 10 CPU minutes); `make bench QUICK=1`",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; expected one of {', '.join(BENCHMARKS)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    failed: list[str] = []
    for name in args.names or list(BENCHMARKS):
        print(f"== bench: {name} ({BENCHMARKS[name]}) ==", flush=True)
        start = time.perf_counter()
        module = importlib.import_module(BENCHMARKS[name])
        rc = int(module.main(QUICK_ARGS.get(name, []) if args.quick else []) or 0)
        print(f"== bench: {name} finished in {time.perf_counter() - start:.1f} s, exit {rc} ==\n")
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
