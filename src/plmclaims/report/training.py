"""contrastive-training.png: the contrastive runs the verdicts read, over training steps, one column per objective
(small multiples, so no two objectives share a colour or a tangle): STS-B dev Spearman (checkpoint selection), and
the uniformity and alignment of the dev vectors (SimCSE section 5). Each objective's seeds are solid lines, the same
training from random weights dashed grey; the dev-score row carries the lexical floors the verdicts use (STS-B test:
the split the verdicts judge) for reference. Rows share their y axis, so columns compare."""
from __future__ import annotations

import json
from pathlib import Path

from .plotting import CURVE_LINES, FLOORS, legend_once, pyplot, save

# what each row plots from a run's history: (key, title, axis label, scale)
TRAINING_PANELS = (
    ("stsb_dev_spearman", "STS-B dev Spearman (checkpoint selection)", "STS-B dev Spearman x 100", 100.0),
    ("uniformity", "uniformity of the dev vectors", "uniformity (log E exp(-2d^2); lower: more spread)", 1.0),
    ("alignment", "alignment of the dev paraphrases", "alignment (gold > 4 pairs, E d^2; lower: closer)", 1.0))
LEXICAL = ("tfidf", "bow")


def trained_runs(verdicts: list[dict]) -> dict[str, list[tuple[dict, bool]]]:
    """objective -> [(history rows, from random weights)] of every trained contrastive run the verdicts read."""
    paths = sorted({p for v in verdicts if (v.get("protocol") or {}).get("family") == "contrastive"
                    for p in v.get("runs", []) if "/runs/contrastive/" in p and Path(p).exists()})
    out: dict[str, list] = {}
    for p in paths:
        values = json.loads(Path(p).read_text())["values"]
        history = values.get("history") or []
        if len(history) < 2:  # a released checkpoint evaluated without training: no curve
            continue
        method = p.split("/runs/contrastive/")[1].split("/")[1]
        out.setdefault(method, []).append((history, bool(values.get("random_weights"))))
    return out


def _lexical(verdicts: list[dict]) -> dict[str, float]:
    """The lexical floors on STS-B (test) that the contrastive verdicts use, x 100."""
    out = {}
    for v in verdicts:
        if (v.get("protocol") or {}).get("family") != "contrastive":
            continue
        for m in (v.get("measurements") or {}).values():
            for floor in LEXICAL:
                value = ((m.get("floors") or {}).get(floor) or {}).get("STSBenchmark")
                if value is not None:
                    out.setdefault(floor, value)
    return out


def training_figure(verdicts: list[dict]):
    """(figure, runs drawn per history key)."""
    plt = pyplot()
    runs = trained_runs(verdicts)
    methods = sorted(runs) or ["none"]
    fig, axes = plt.subplots(len(TRAINING_PANELS), len(methods), figsize=(2.9 * len(methods) + 1.0, 8.2),
                             squeeze=False, sharey="row", layout="constrained")
    drawn = {key: 0 for key, *_ in TRAINING_PANELS}
    lexical = _lexical(verdicts)
    once = legend_once()

    for col, method in enumerate(methods):
        for row, (key, title, label, scale) in enumerate(TRAINING_PANELS):
            ax = axes[row][col]
            for history, random in runs.get(method, []):
                points = [(h["step"], scale * h[key]) for h in history if key in h]
                if len(points) < 2:
                    continue
                if random:
                    ax.plot(*zip(*points), "--", color="0.45", lw=1, label=once("from random weights"), gid="twin")
                else:
                    ax.plot(*zip(*points), "-", color=f"C{col % 10}", lw=1.3, label=once("trained (one line a seed)"),
                            gid="measured")
                drawn[key] += 1
            if row == 0:
                for floor, value in lexical.items():
                    ax.axhline(value, color=FLOORS[floor][1], ls=CURVE_LINES[floor], lw=1,
                               label=once(f"{FLOORS[floor][2]} (STS-B test)"), gid=f"floor:{floor}")
                ax.set_title(method, fontsize=10, fontweight="bold")
            if not any(line.get_gid() in ("measured", "twin") for line in ax.get_lines()):
                ax.text(0.5, 0.5, "no run recorded this" if runs else "no contrastive training ran", ha="center",
                        fontsize=7, transform=ax.transAxes, gid="missing")
            if col == 0:
                ax.set_ylabel(f"{title}\n{label}", fontsize=7)
            if row == len(TRAINING_PANELS) - 1:
                ax.set_xlabel("training step", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    found = {lab: h for ax in fig.axes for h, lab in zip(*ax.get_legend_handles_labels())}
    if found:
        fig.legend(list(found.values()), list(found), loc="outside upper center", fontsize=8, frameon=False,
                   ncol=min(len(found), 2 if len(methods) < 4 else 4))
    return fig, drawn


def training_plot(verdicts: list[dict], out: Path) -> dict[str, int]:
    """Draws training_figure into `out`; returns the number of runs drawn per row (its history key)."""
    fig, drawn = training_figure(verdicts)
    save(fig, out)
    return drawn
