"""What the report's figures share: the headless backend, one style per floor (the same marker and colour in every
figure), the axis a claim's numbers are on, what a claim file says about a measurement (its params and checks), and
the atomic save. Every artist a reader needs carries a gid (measured, reported, twin, floor:<name>, margin,
judged-point, degenerate, missing, zero-shot, full-finetuning), so tests find it without reading pixels."""
from __future__ import annotations

import re
from pathlib import Path

# floor name -> (marker, colour, legend text); a floor not named here is another measurement of the claim
FLOORS = {"chance": ("|", "0.35", "chance"), "random-weights": ("s", "C1", "random-weights twin"),
          "bow": ("^", "C2", "bag-of-words floor"), "tfidf": ("v", "C4", "TF-IDF floor")}
OTHER_FLOOR = ("D", "C7", "floor: another measurement")
CURVE_LINES = {"chance": ":", "random-weights": "--", "bow": (0, (1, 1.5)), "tfidf": (0, (4, 1.5, 1, 1.5))}


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def legend_once():
    """A labeller for one figure: key the first time it is asked for, '_nolegend_' after, so a legend built from
    every panel's handles lists each entry once."""
    seen: set[str] = set()

    def once(key: str) -> str:
        if key in seen:
            return "_nolegend_"
        seen.add(key)
        return key

    return once


COLUMNS = 3  # panels per row in the multi-panel figures


def panel_grid(count: int, width: float, height: float, missing: str):
    """A figure of `count` equal panels, up to COLUMNS a row, the unused cells hidden; with none, one panel that says
    `missing`. Returns the figure and its panels in reading order."""
    plt = pyplot()
    cols = min(COLUMNS, max(count, 1))
    rows = max(1, -(-count // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.6), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[count:]:
        ax.axis("off")
    if not count:
        axes[0][0].text(0.5, 0.5, missing, ha="center", transform=axes[0][0].transAxes, gid="missing")
    return fig, list(axes.flat[:count])


def shared_legend(fig, order: list[str] | None = None, most: int = 7) -> None:
    """One legend for every panel, above them (it covers no line): each label once, in `order` where given."""
    found = {lab: h for ax in fig.axes for h, lab in zip(*ax.get_legend_handles_labels())}
    labels = list(found)
    if order is not None:
        labels.sort(key=lambda lab: order.index(lab) if lab in order else len(order))
    if labels:
        fig.legend([found[lab] for lab in labels], labels, loc="outside upper center", ncol=min(len(labels), most),
                   fontsize=8, frameon=False)


def save(fig, out: Path, dpi: int = 110) -> None:
    plt = pyplot()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(out)


def floor_style(name: str) -> tuple[str, str, str]:
    return FLOORS.get(name, OTHER_FLOOR)


def value_axis(v: dict) -> str:
    """The unit of a claim's numbers, e.g. 'spearman x 100' (a claim's own metric and scale, never shared)."""
    proto = v.get("protocol") or {}
    metric = proto.get("metric", "score")
    metrics = set((proto.get("task_metrics") or {}).values())
    if len(metrics) > 1:
        metric = "/".join(sorted(metrics))
    return f"{metric} x {proto.get('scale', 100):g}"


def claim_data(v: dict) -> dict:
    """The claim as loaded when its verdict was decided (the verdict's provenance); {} for a verdict without it."""
    return ((v.get("provenance") or {}).get("config") or {}).get("claim") or {}


def params_of(v: dict, name: str) -> dict:
    return ((claim_data(v).get("measurements") or {}).get(name.split(" [")[0]) or {}).get("params") or {}


CHECK_RE = re.compile(r"^(?P<a>[\w-]+) (?P<op>>=|<=|>|<) (?P<b>[\w-]+)(?: (?P<sign>[-+]) (?P<margin>[\d.]+))? "
                      r"on (?P<target>\S+)$")


def relations(v: dict) -> list[dict]:
    """The claim's pairwise checks as {type, a, b, margin, target} (margin: a non-inferiority or approx-equal check's
    delta, a greater check's margin): from the claim file (provenance) where the verdict has it, else read from each
    check's description ('a >= b - 2.0 on avg')."""
    specs = [c for c in claim_data(v).get("checks") or [] if c.get("a") and c.get("b")]
    if specs:
        return [{"type": c["type"], "a": c["a"], "b": c["b"], "target": c.get("target", "avg"),
                 "margin": float(c.get("delta", c.get("margin")) or 0.0)} for c in specs]
    out = []
    for c in v.get("checks") or []:
        m = CHECK_RE.match(c.get("description", ""))
        if m:
            out.append({"type": c.get("type", ""), "a": m["a"], "b": m["b"], "margin": float(m["margin"] or 0.0),
                        "target": m["target"]})
    return out


AXES = {"layer": "layer (0: the embeddings)", "step": "pre-training step", "seeds": "run of the seed grid",
        "checkpoint": "pre-training checkpoint"}
FRACTIONS = {"head-pruning": "fraction of attention heads masked", "magnitude-pruning": "fraction of weights pruned"}


def curve_axis(v: dict, name: str, m: dict) -> str:
    """What a curve's x is: the measurement's swept parameter (its value 'all' or a list in the claim file), named
    for a reader; from the method where the verdict does not carry the claim."""
    swept = [k for k, val in params_of(v, name).items() if val == "all" or isinstance(val, list)]
    key = swept[0] if swept else None
    if key is None:
        key = ("fraction" if m.get("method") in FRACTIONS else "seeds" if m.get("seed_variance")
               else "layer" if (v.get("protocol") or {}).get("family") in ("probing", "intrinsic") else None)
    if key == "fraction":
        return FRACTIONS.get(m.get("method"), "fraction compressed")
    if key == "seeds":
        grid = next(iter((m.get("seed_variance") or {}).values()), None)
        if grid:
            return f"run of the seed grid ({len(grid['heads'])} head seeds x {len(grid['orders'])} order seeds)"
    return AXES.get(key, key or "point")


def point_x(v: dict, name: str) -> float | None:
    """The x a single measurement sits at on its claim's curve (a fraction or a step given as a number)."""
    for key in ("fraction", "step"):
        val = params_of(v, name).get(key)
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            return float(val)
    return None


def wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text
