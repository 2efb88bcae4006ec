"""forest.png: reported vs measured, one panel per claim on the claim's own axis (its metric and scale), each
measurement a row with its interval, its reported value and every floor it must beat on lanes of its own (so a floor
at the measured value stays visible), and a measurement without a score named in its row with the reason."""
from __future__ import annotations

import math
from pathlib import Path

from .common import all_measurements, first_reason, views
from .plotting import COLUMNS, FLOORS, floor_style, legend_once, pyplot, save, shared_legend, value_axis, wrap

ROW_IN = 0.5  # inches per measurement row
LABEL_CHARS = 34


def _twin(v: dict, m: dict) -> float | None:
    """The random-weights twin of a measurement: its own, or, for a single layer the claim also measures as a curve
    with a twin (anisotropy), the twin of the curve point with the same score (the same runs give the same number)."""
    own = (m.get("random_weights") or {}).get("measured")
    if own is not None or m.get("measured") is None:
        return own
    matches = [p for _, _, c in all_measurements(v) for p in c.get("curve") or []
               if (p["per_benchmark"].get("avg") or {}).get("measured") is not None
               and math.isclose(p["per_benchmark"]["avg"]["measured"], m["measured"], rel_tol=0, abs_tol=1e-9)
               and "random-weights" in (p.get("floors") or {})]
    return matches[0]["floors"]["random-weights"].get("avg") if len(matches) == 1 else None


def _missing_reason(m: dict) -> str:
    if m.get("degenerate"):
        return "no score: degenerate on " + ", ".join(m["degenerate"]) + " (constant predictions)"
    return "not run: " + (first_reason(m.get("reason", ""), 90) or "this tier does not run it")


def _rows(v: dict) -> list[tuple[str, dict, dict]]:
    """(row label, measurement, markers) per scalar measurement; curves are drawn in curves.png."""
    several = len(views(v)) > 1
    out = []
    for role, name, m in all_measurements(v):
        if m.get("curve"):
            continue
        text = (m.get("label") or name) + (f" [{role}]" if several and role else "")
        marks = {}
        if m.get("reported") is not None:
            marks["reported"] = m["reported"]
        for floor, vals in (m.get("floors") or {}).items():
            if floor != "random-weights" and (vals or {}).get("avg") is not None:
                marks[floor if floor in FLOORS else f"other:{floor}"] = vals["avg"]
        twin = _twin(v, m)
        if twin is not None:
            marks["random-weights"] = twin
        out.append((wrap(text, LABEL_CHARS), m, marks))
    return out


# lane order within a row, top to bottom; a panel gives lanes only to what it draws
LANES = ("reported", "measured", "random-weights", "bow", "tfidf", "chance")  # then other measurements used as floors


def _panel(ax, v: dict, rows: list, once) -> None:
    others = sorted({k for _, _, marks in rows for k in marks if k.startswith("other:")})
    present = [k for k in LANES if k == "measured" or any(k in marks for _, _, marks in rows)] + others
    step = 0.7 / max(len(present) - 1, 1)
    offset = {k: 0.35 - i * step for i, k in enumerate(present)} if len(present) > 1 else {"measured": 0.0}
    xs = []
    for i, (_, m, marks) in enumerate(rows):
        y = len(rows) - 1 - i
        if m.get("measured") is not None:
            lo, hi = m.get("ci_low", m["measured"]), m.get("ci_high", m["measured"])
            lo, hi = (m["measured"] if lo is None else lo), (m["measured"] if hi is None else hi)
            ax.errorbar(m["measured"], y + offset["measured"], xerr=[[m["measured"] - lo], [hi - m["measured"]]],
                        fmt="o", color="C0", markersize=5, capsize=2, label=once("measured (95% CI)"), gid="measured")
            xs += [lo, hi]
        else:
            ax.text(0.02, y, wrap(_missing_reason(m), 64), transform=ax.get_yaxis_transform(), fontsize=6,
                    color="C3", va="center", gid="missing", clip_on=True,
                    bbox={"facecolor": "white", "alpha": 0.85, "linewidth": 0, "pad": 1})
        for kind, x in marks.items():
            if kind == "reported":
                ax.plot(x, y + offset[kind], "x", color="C3", markersize=6, label=once("reported"), gid="reported")
            else:
                marker, colour, text = floor_style(kind)
                text = f"floor: {kind[6:]}" if kind.startswith("other:") else text
                ax.plot(x, y + offset[kind], marker, color=colour, markersize=8 if kind == "chance" else 5,
                        markerfacecolor="none", label=once(text),
                        gid="twin" if kind == "random-weights" else f"floor:{kind.removeprefix('other:')}")
            xs.append(x)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in reversed(rows)], fontsize=6.5)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    for y in range(len(rows) - 1):
        ax.axhline(y + 0.5, color="0.85", lw=0.6)
    if xs:
        lo, hi = min(xs), max(xs)
        pad = (hi - lo) * 0.08 if hi - lo > 1e-6 else max(abs(hi) * 0.05, 1.0)
        ax.set_xlim(lo - pad, hi + pad)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.set_xlabel(value_axis(v), fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{v['id']}: {v.get('verdict', '')}", fontsize=8, loc="left")


def forest_figure(verdicts: list[dict]):
    """The figure (not saved): one panel per claim with a scalar measurement, in a grid of up to COLUMNS columns whose
    rows are as tall as their tallest panel."""
    plt = pyplot()
    panels = [(v, rows) for v in verdicts for rows in [_rows(v)] if rows]
    cols = max(1, min(COLUMNS, len(panels)))
    grid = [panels[i:i + cols] for i in range(0, len(panels), cols)] or [[]]
    heights = [ROW_IN * max((len(r) for _, r in line), default=2) + 0.9 for line in grid]
    fig = plt.figure(figsize=(6.2 * cols, sum(heights) + 0.8), layout="constrained")
    spec = fig.add_gridspec(len(grid), cols, height_ratios=heights)
    once = legend_once()

    for r, line in enumerate(grid):
        for c, (v, rows) in enumerate(line):
            _panel(fig.add_subplot(spec[r, c]), v, rows, once)
    if not panels:
        ax = fig.add_subplot(spec[0, 0])
        ax.text(0.5, 0.5, "no measurement ran", ha="center", transform=ax.transAxes, gid="missing")
        ax.axis("off")
    shared_legend(fig, ["measured (95% CI)", "reported"] + [text for _, _, text in FLOORS.values()], most=99)
    return fig


def forest_plot(verdicts: list[dict], out: Path) -> None:
    save(forest_figure(verdicts), out)
