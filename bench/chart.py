"""Draw a benchmark result (JSON from bench.run) as a PNG: one small bar pair per figure.

Run by `bench.run` with the reference venv's Python, which has matplotlib
(our operator's venv does not need it): `python bench/chart.py RESULT.json OUT.png`.
Standalone on purpose: it imports nothing from the repository.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLORS = {"python": "#3572A5", "go": "#00ADD8"}
NAMES = {"python": "ours (Python)", "go": "Go v1.42.3"}


def draw(data: dict, out: Path) -> None:
    rows = [r for r in data["figures"] if r["python"] is not None or r["go"] is not None]
    cols = 5
    lines = max(1, math.ceil(len(rows) / cols))
    fig, axes = plt.subplots(lines, cols, figsize=(3.2 * cols, 2.6 * lines), squeeze=False)
    for ax, row in zip(axes.flat, rows, strict=False):
        values = [row["python"] or 0.0, row["go"] or 0.0]
        bars = ax.bar(
            [NAMES["python"], NAMES["go"]], values, color=[COLORS["python"], COLORS["go"]]
        )
        for bar, value in zip(bars, values, strict=True):
            ax.annotate(
                f"{value:.3g}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ratio = row.get("ratio")
        suffix = f"  (ours/Go {ratio:.2f}x)" if isinstance(ratio, int | float) else ""
        title = textwrap.fill(f"{row['label']} [{row['unit']}]", 42) + suffix
        ax.set_title(title, fontsize=7)
        ax.tick_params(axis="both", labelsize=7)
        ax.set_ylim(0, max(values) * 1.25 or 1.0)
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    sizes = data["meta"]["sizes"]
    fig.suptitle(
        f"ansible-operator: ours vs Go v1.42.3 — {data['meta']['started']}, "
        f"concurrency {sizes['concurrency']}, {data['meta']['machine']['cpus']} CPUs "
        "(lower is better except throughput)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: chart.py RESULT.json OUT.png", file=sys.stderr)
        return 2
    draw(json.loads(Path(argv[0]).read_text()), Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
