"""Plot the fleet's memory at rest against its size, both operators: `fleet-memory.png`.

Run by `bench.run` after a fleet run, with the reference venv's Python (matplotlib),
like bench/chart.py: `python bench/fleet_chart.py RESULTS_DIR OUT.png`. Reads every
result file in RESULTS_DIR (latest.json excepted: it is a copy) that holds fleet
results, keeps the newest per operator and fleet size, and draws PSS of the process
tree against N: after `fleet_idle` seconds idle (solid), just converged (dashed), and
of the operator process alone after the idle period (dotted). An operator whose
convergence was capped was not at rest: its PSS at the cap (tree and process alone)
is drawn as hollow markers, labelled with how many CRs were Successful by then.
Standalone on purpose: it imports nothing from the repository.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COLORS = {"python": "#3572A5", "go": "#00ADD8"}
NAMES = {"python": "ours (Python)", "go": "Go v1.42.3"}


def points(results_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(operator, N) → the newest fleet result of that size, with its file and date."""
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(results_dir.glob("*.json")):
        if path.name == "latest.json":
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
            continue
        started = str((data.get("meta") or {}).get("started", ""))
        commit = str(((data.get("meta") or {}).get("ours") or {}).get("commit", ""))
        for operator, res in data["results"].items():
            result = (res or {}).get("fleet") if isinstance(res, dict) else None
            if not isinstance(result, dict) or "error" in result or not result.get("crs"):
                continue
            key = (operator, int(result["crs"]))
            if key not in found or started > found[key]["started"]:
                found[key] = {**result, "started": started, "file": path.name, "commit": commit}
    return found


def draw(found: dict[tuple[str, int], dict[str, Any]], out: Path) -> None:
    # Imported here: `points` is also used (and tested) where matplotlib is not installed.
    import matplotlib  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 5))
    for operator in ("python", "go"):
        mine = sorted((n, r) for (op, n), r in found.items() if op == operator)
        color, name = COLORS.get(operator, "gray"), NAMES.get(operator, operator)
        for key, style, label, offset in (
            ("idle_pss_mib", "-", "after the idle period", (4, 4)),
            ("rest_pss_mib", "--", "just converged", (4, -12)),
            ("idle_main_pss_mib", ":", "operator process alone, after the idle period", (4, 4)),
        ):
            xs = [n for n, r in mine if r.get(key) is not None]
            ys = [r[key] for n, r in mine if r.get(key) is not None]
            if xs:
                ax.plot(xs, ys, style, marker="o", color=color, label=f"{name}, {label}")
                for x, y in zip(xs, ys, strict=True):
                    ax.annotate(f"{y:.0f}", (x, y), textcoords="offset points", xytext=offset)
        capped = [(n, r) for n, r in mine if r.get("capped") and r.get("at_cap_pss_mib")]
        for index, (n, r) in enumerate(capped):
            for key, what in (("at_cap_pss_mib", "tree"), ("at_cap_main_pss_mib", "process alone")):
                if r.get(key) is None:
                    continue
                ax.plot(
                    [n],
                    [r[key]],
                    marker="o",
                    markerfacecolor="none",
                    color=color,
                    linestyle="none",
                    label=f"{name}, capped: at the cap, busy (hollow)"
                    if index == 0 and what == "tree"
                    else None,
                )
                ax.annotate(
                    f"{name} {what}: {r[key]:.0f} at the cap, {r.get('succeeded')}/{n} done",
                    (n, r[key]),
                    textcoords="offset points",
                    xytext=(8, -3) if what == "tree" else (8, -14),
                    fontsize=7,
                    ha="left",
                )
    sizes = sorted({n for _, n in found})
    ax.set_xscale("log")
    ax.set_xlim(min(sizes) / 1.6, max(sizes) * 1.6)
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("CRs in the fleet (N)")
    ax.set_ylabel("PSS, MiB")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    commits = sorted({r["commit"] for r in found.values() if r.get("commit")})
    ax.set_title(
        "Fleet at rest: memory against N, ours vs Go v1.42.3\n"
        f"(ours at {', '.join(commits) or '?'}; hollow: capped, not at rest)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: fleet_chart.py RESULTS_DIR OUT.png", file=sys.stderr)
        return 2
    found = points(Path(argv[0]))
    if not found:
        print("no fleet results", file=sys.stderr)
        return 1
    draw(found, Path(argv[1]))
    print(", ".join(f"{op} N={n} from {r['file']}" for (op, n), r in sorted(found.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
