"""How results look to people: the side-by-side table (rich) and comparison.png (matplotlib)."""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from icefabric.control import render
from icefabric.experiment.config import Experiment
from icefabric.experiment.runner import Outcome, run_experiment
from icefabric.files import write_output

log = logging.getLogger(__name__)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def comparison_table(doc: Mapping[str, Any]) -> Table:
    """One column per mode, one row per measure."""
    modes = doc["modes"]
    exp = doc["experiment"]
    scale = float(exp.get("rates", {}).get("scale", 1.0))
    cmp = doc.get("comparison", {})
    speed = cmp.get("speedup", {})
    base = cmp.get("baseline")
    engine = exp.get("engine", "virtual")
    target = exp.get("target", "embedded")
    on = f" on {target}" if target != "embedded" else ""
    t = Table(
        title=f"{exp['name']}: {len(modes)} mode(s), same topology, workload and seed "
        f"({engine} engine{on}, links at {scale:g} x the spec's rates; "
        "Gbit/s scaled back)",
        title_justify="left",
        pad_edge=False,
    )
    t.add_column("measure")
    for m in modes:
        t.add_column(m["mode"], justify="right")

    def row(label: str, fn: Any) -> None:
        t.add_row(label, *(fn(m) for m in modes))

    row("completed", lambda m: "yes" if m["ok"] else f"[red]no[/red]: {m.get('error') or '?'}")
    row(
        "busbw (Gbit/s)",
        lambda m: _num(m["busbw_gbps"] / scale if m["busbw_gbps"] else None, "{:.1f}"),
    )
    row(
        "non-blocking bound (Gbit/s)",
        lambda m: _num(m["bound_busbw_gbps"] / scale if m["bound_busbw_gbps"] else None, "{:.1f}"),
    )
    row("busbw / bound", lambda m: _pct(m["busbw_over_bound"]))
    row(f"busbw / {base}", lambda m: _num(speed.get(m["mode"]), "{:.2f}x"))
    row(
        f"completion (ms, {'virtual' if engine == 'virtual' else 'real'} time)",
        lambda m: _num(m["completion_us"] and m["completion_us"] / 1e3, "{:.2f}"),
    )
    row(
        "slowest flow (ms)",
        lambda m: _num(
            m["flows"]["slowest"]["completion_us"] and m["flows"]["slowest"]["completion_us"] / 1e3,
            "{:.2f}",
        ),
    )
    row("busiest link utilisation", lambda m: _pct(m["max_link_utilisation"]))
    row("queue p50 / p99 / max (pkts)", _queue_cell)
    row("drops", lambda m: str(m["drops"]))
    row("ECN marks / CNPs", lambda m: f"{m['ecn_marks']} / {m['cnps']}")
    row("data packets", lambda m: str(m["data_packets"]))
    wall = doc.get("run", {}).get("wall_s", {})
    if wall:
        row("wall time (s)", lambda m: _num(wall.get(m["mode"]), "{:.1f}"))
    return t


def _queue_cell(m: Mapping[str, Any]) -> str:
    """Queue percentiles, or ``-`` where none were measured (a mode whose packets carry no
    INT records in the real-time engine: 0 / 0 / 0 there would read as empty queues)."""
    q = m["queue_packets"]
    if not q.get("samples"):
        return "- (not measured)"
    return "{p50:.0f} / {p99:.0f} / {max:.0f}".format(**q)


def links_table(doc: Mapping[str, Any], *, fabric_only: bool = True) -> Table:
    """Per-link utilisation side by side (switch-to-switch links unless told otherwise)."""
    modes = doc["modes"]
    hosts = {h["name"] for h in doc["experiment"]["topology"]["hosts"]}
    names: list[str] = []
    for m in modes:
        for ln in m["links"]:
            a, _, b = ln["link"].partition(">")
            if ln["link"] not in names and (not fabric_only or (a not in hosts and b not in hosts)):
                names.append(ln["link"])
    util = {m["mode"]: {ln["link"]: ln["utilisation"] for ln in m["links"]} for m in modes}
    return render.table(
        "per-link utilisation over the run",
        ["link", *(m["mode"] for m in modes)],
        [[n, *(_pct(util[m["mode"]].get(n)) for m in modes)] for n in names],
    )


def write_plot(doc: Mapping[str, Any], path: Path) -> Path:
    """comparison.png: busbw per mode with the bound, per-link utilisation, queue-depth CDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = doc["modes"]
    scale = float(doc["experiment"].get("rates", {}).get("scale", 1.0))
    hosts = {h["name"] for h in doc["experiment"]["topology"]["hosts"]}
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.8))
    names = [m["mode"] for m in modes]
    bw = [(m["busbw_gbps"] or 0.0) / scale for m in modes]
    bound = [(m["bound_busbw_gbps"] or 0.0) / scale for m in modes]
    bars = ax1.bar(names, bw, color=["#999999" if "ecmp" in n else "#1f77b4" for n in names])
    if any(bound):
        ax1.axhline(max(bound), color="red", linestyle="--", label="non-blocking bound")
        ax1.legend(loc="lower right")
    for b, v, m in zip(bars, bw, modes, strict=True):
        frac = m["busbw_over_bound"]
        ax1.annotate(
            f"{v:.1f}" + (f"\n{frac * 100:.0f} %" if frac else ""),
            (b.get_x() + b.get_width() / 2, v),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax1.set_ylabel("busbw (Gbit/s at the spec's rates)")
    ax1.set_title("collective bus bandwidth")
    links = (
        [ln["link"] for ln in modes[0]["links"] if not ({*ln["link"].split(">")} & hosts)]
        if modes
        else []
    )
    width = 0.8 / max(len(modes), 1)
    for i, m in enumerate(modes):
        u = {ln["link"]: ln["utilisation"] for ln in m["links"]}
        ax2.bar(
            [j + i * width for j in range(len(links))],
            [u.get(n, 0.0) * 100 for n in links],
            width=width,
            label=m["mode"],
        )
    ax2.set_xticks([j + width * (len(modes) - 1) / 2 for j in range(len(links))])
    ax2.set_xticklabels(links, rotation=70, fontsize=6)
    ax2.set_ylabel("utilisation (%)")
    ax2.set_title("switch-to-switch links")
    ax2.legend(fontsize=7)
    for m in modes:
        pts = m["queue_packets"]["cdf"]
        if pts:
            ax3.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=m["mode"])
    ax3.set_xlabel("egress queue depth (packets)")
    ax3.set_ylabel("fraction of samples <= depth")
    ax3.set_title("queue depth CDF (all switch ports)")
    ax3.legend(fontsize=7)
    fig.suptitle(doc["experiment"]["name"])
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    write_output(path, png.getvalue())  # never through a link planted at the path
    return path


def run_with_progress(
    exp: Experiment,
    console: Console,
    *,
    out_base: Path | None,
    plot: bool = True,
    label: str = "{mode}",
    quiet: bool = False,
) -> Outcome:
    """``run_experiment`` with one transient bar per mode on ``console`` (share of messages
    done); ``label`` names a bar (``{mode}`` is the mode); ``quiet`` shows none."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f} % of messages"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=quiet,
    ) as bar:
        tasks = {m: bar.add_task(label.format(mode=m), total=1.0) for m in exp.modes}

        def progress(mode: str, frac: float) -> None:
            bar.update(tasks[mode], completed=frac)

        return run_experiment(exp, out_base=out_base, progress=progress, plot=plot)
