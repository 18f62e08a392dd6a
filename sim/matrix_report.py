"""The peers matrix rendered (``sim/matrix.py`` computes it): a heatmap PNG of scenarios x
schemes and Markdown tables, one row per scenario or one per scheme, for the READMEs."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from icefabric.files import write_output


def plot_matrix(doc: dict[str, Any], path: Path) -> None:
    """A heatmap: scenarios x schemes (median busbw ÷ bound), the best peer boxed, ICE ÷ best
    peer (median [p10, p90]) at the end of each row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    scs = list(doc["scenarios"])
    schemes = list(doc.get("schemes_order") or next(iter(doc["scenarios"].values()))["schemes"])
    cols = [*schemes, "ceiling"]
    grid = np.array(
        [
            [
                doc["scenarios"][sc]["schemes"][s]["busbw_over_bound"]["median"]
                if s != "ceiling"
                else doc["scenarios"][sc]["ceiling"]["median"]
                for s in cols
            ]
            for sc in scs
        ]
    )
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 4, 0.6 * len(scs) + 2.6))
    im = ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i, sc in enumerate(scs):
        cell = doc["scenarios"][sc]
        for j, _ in enumerate(cols):
            ax.text(
                j,
                i,
                f"{grid[i, j]:.2f}",
                ha="center",
                va="center",
                color="white" if grid[i, j] < 0.6 else "black",
                fontsize=8,
            )
        best = cell.get("best_peer")
        if best in cols:
            j = cols.index(best)
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=2))
        d = cell.get("ice_over_best_peer_dist")
        if d:
            ax.text(
                len(cols) - 0.3,
                i,
                f"ICE÷best {d['median']:.2f} [{d['p10']:.2f}, {d['p90']:.2f}]",
                va="center",
                fontsize=8,
            )
    ax.set_xticks(range(len(cols)), cols, rotation=35, ha="right")
    ax.set_yticks(range(len(scs)), scs)
    ax.set_title(
        f"busbw ÷ bound, median of {len(doc['seeds'])} seeds ({doc['engine']}, "
        + (f"{doc['gpus']} GPUs" if "gpus" in doc else "packet-level presets")
        + "); red: best peer",
        fontsize=9,
    )
    fig.colorbar(im, ax=ax, orientation="horizontal", fraction=0.05, pad=0.25)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_output(path, png.getvalue())


def markdown(doc: dict[str, Any]) -> str:
    """The matrix as Markdown: per scenario ICE ÷ best peer (median [p10, p90]), ICE ÷ ECMP +
    DCQCN, then every scheme's median busbw ÷ bound and the ceiling."""
    schemes = list(doc["schemes_order"])
    head = ["scenario", "best peer", "ICE ÷ best peer", "ICE ÷ ECMP+DCQCN", *schemes, "ceiling"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sc, cell in doc["scenarios"].items():
        d = cell.get("ice_over_best_peer_dist")
        e = cell.get("ice_over_ecmp_dcqcn")
        row = [
            sc,
            cell.get("best_peer", "-"),
            f"{d['median']:.2f} [{d['p10']:.2f}, {d['p90']:.2f}]" if d else "-",
            f"{e['median']:.2f} [{e['p10']:.2f}, {e['p90']:.2f}]" if e else "-",
            *(f"{cell['schemes'][s]['busbw_over_bound']['median']:.3f}" for s in schemes),
            f"{cell['ceiling']['median']:.3f}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def markdown_spread(doc: dict[str, Any]) -> str:
    """The matrix as Markdown, one row per scheme (then the ceiling, the best peer and ICE ÷
    best peer), one column per scenario: median [p10, p90] over the seeds."""
    scs = list(doc["scenarios"])
    cells = doc["scenarios"]

    def fmt(d: dict[str, float], digits: int = 3) -> str:
        return f"{d['median']:.{digits}f} [{d['p10']:.{digits}f}, {d['p90']:.{digits}f}]"

    lines = ["| scheme | " + " | ".join(scs) + " |", "|" + "---|" * (len(scs) + 1)]
    for s in doc["schemes_order"]:
        row = [fmt(cells[sc]["schemes"][s]["busbw_over_bound"]) for sc in scs]
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    lines.append("| ceiling | " + " | ".join(fmt(cells[sc]["ceiling"]) for sc in scs) + " |")
    lines.append(
        "| best peer | " + " | ".join(cells[sc].get("best_peer", "-") for sc in scs) + " |"
    )
    for key, label in (
        ("ice_over_best_peer_dist", "ICE ÷ best peer"),
        ("ice_over_ecmp_dcqcn", "ICE ÷ ECMP+DCQCN"),
    ):
        row = [fmt(cells[sc][key], 2) if key in cells[sc] else "-" for sc in scs]
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
