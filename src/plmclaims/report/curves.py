"""curves.png: every curve measurement (layers, pre-training steps, fractions compressed, a seed grid) with its
interval, its random-weights twin and lexical floors, the single measurements the checks judge drawn at their x, the
margin of a non-inferiority check as a band, and a degenerate point marked where its score is missing. One panel per
(claim, measurement, target); a claim judged on the average over benchmarks gets one panel, on that average."""
from __future__ import annotations

import math
from pathlib import Path

from .common import all_measurements, asset_of
from .plotting import (CURVE_LINES, FLOORS, curve_axis, floor_style, legend_once, panel_grid, point_x, relations, save,
                       shared_legend, value_axis, wrap)
from .tables import curves


def _num(vals) -> list[float]:
    return [math.nan if x is None else x for x in vals]


def panels(verdicts: list[dict]) -> list[tuple[dict, str, dict, str]]:
    """(verdict, measurement name, measurement, target) per panel: the benchmarks a curve has, or only their average
    where the claim aggregates several benchmarks and judges it on the average."""
    out, done = [], set()
    for v, name, m, t in curves(verdicts):
        if (v["id"], name) in done:
            continue
        done.add((v["id"], name))
        targets = [t2 for v2, n2, _, t2 in curves([v]) if n2 == name]
        judged_on_avg = any(r["target"] == "avg" for r in relations(v)) or any(
            c.get("description", "").endswith(" on avg") for c in v.get("checks") or [])
        if judged_on_avg and "avg" in m["curve"][0]["per_benchmark"]:
            targets = ["avg"]
        out += [(v, name, m, target) for target in targets]
    return out


def reported_xy(rc: dict, t: str, tier_xs: list) -> tuple[list[float], list[float]]:
    """A reported curve's points on the tier's axis: with `of` (the source's depth or last step) a source point x is
    drawn at x / of of the tier's own span (layer 7 of 12 on a 4-layer model at 2.33), so the shapes line up;
    without it, at x itself (fractions of weights pruned mean the same on every model)."""
    pairs = [(x, y) for x, y in zip(rc["points"], rc["values"].get(t, [])) if y is not None]
    if rc.get("of"):
        lo, hi = min(tier_xs), max(tier_xs)
        pairs = [(lo + (hi - lo) * x / rc["of"], y) for x, y in pairs]
    return [x for x, _ in pairs], [y for _, y in pairs]


def _value(m: dict, t: str) -> tuple[float | None, float | None, float | None]:
    row = m if t == "avg" else (m.get("per_benchmark") or {}).get(t) or {}
    return row.get("measured"), row.get("ci_low"), row.get("ci_high")


def _judged(v: dict, t: str) -> list[tuple[str, float, float, float, float]]:
    """(name, x, measured, ci low, ci high) of each single measurement of the claim that sits on the curve's axis."""
    out = []
    for _, name, m in all_measurements(v):
        x = point_x(v, name)
        y, lo, hi = _value(m, t)
        if x is not None and y is not None and not m.get("curve"):
            out.append((name, x, y, y if lo is None else lo, y if hi is None else hi))
    return out


# how a check's margin sits around its reference b: (low end, high end) as multiples of the margin
BANDS = {"non-inferior": (-1.0, 0.0), "greater": (0.0, 1.0), "approx-equal": (-1.0, 1.0)}


def _margins(v: dict, t: str) -> list[tuple[str, float, float, float]]:
    """(what the band says, reference score, band low, band high) of each check with a margin on target t; a claim
    of one benchmark judges it as its average."""
    scores = {name: _value(m, t)[0] for _, name, m in all_measurements(v)}
    single = (v.get("protocol") or {}).get("benchmarks") == [t]
    out = []
    for r in relations(v):
        score = scores.get(r["b"])
        on_t = r["target"] == t or single and r["target"] == "avg"
        if r["type"] in BANDS and r["margin"] and score is not None and on_t:
            lo, hi = BANDS[r["type"]]
            sign = {"non-inferior": "-", "greater": "+", "approx-equal": "±"}[r["type"]]
            out.append((f"{r['b']} {sign} {r['margin']:g}", score, score + lo * r["margin"], score + hi * r["margin"]))
    return out


def _panel(ax, v: dict, name: str, m: dict, t: str, once) -> None:
    xs = [p["x"] for p in m["curve"]]
    row = [p["per_benchmark"].get(t) or {} for p in m["curve"]]
    ys = _num(r.get("measured") for r in row)
    ax.plot(xs, ys, "o-", color="C0", markersize=4, label=once("measured (95% CI)"), gid="measured")
    ax.fill_between(xs, _num(r.get("ci_low") for r in row), _num(r.get("ci_high") for r in row), color="C0", alpha=0.2)
    shown = [y for r in row for y in (r.get("ci_low"), r.get("ci_high"), r.get("measured")) if y is not None]
    if m.get("reported_curve") and t in m["reported_curve"]["values"]:
        rx, ry = reported_xy(m["reported_curve"], t, xs)
        scaled = " (source's depth rescaled)" if m["reported_curve"].get("of") else ""
        ax.plot(rx, ry, "x-", color="0.55", lw=1, label=once("reported" + scaled), gid="reported")
        shown += ry
    for jname, x, y, lo, hi in _judged(v, t):
        ax.errorbar(x, y, yerr=[[y - lo], [hi - y]], fmt="D", color="C9", markersize=5, capsize=2,
                    label=once("judged measurement at its x"), gid="judged-point")
        ax.annotate(jname, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        shown += [lo, hi]
    for text, score, low, high in dict.fromkeys(_margins(v, t)):  # two checks against one reference: one band
        ax.axhspan(low, high, color="C2", alpha=0.12, lw=0, label=once("a check's margin around its reference"),
                   gid="margin")
        ax.axhline(score, color="C2", lw=0.8, gid="margin")
        ax.annotate(text, (1.0, low), xycoords=("axes fraction", "data"), fontsize=6, ha="right", va="bottom",
                    color="C2")
        shown += [low, high]
    floors = {}
    for p in m["curve"]:
        for floor, vals in (p.get("floors") or {}).items():
            floors.setdefault(floor, []).append((vals or {}).get(t))
    twin = floors.pop("random-weights", None)
    if twin and any(y is not None for y in twin):
        ax.plot(xs, _num(twin), linestyle=CURVE_LINES["random-weights"], color=FLOORS["random-weights"][1],
                label=once(FLOORS["random-weights"][2]), gid="twin")
        shown += [y for y in twin if y is not None]
    lo, hi = (min(shown), max(shown)) if shown else (0.0, 1.0)
    span = max(hi - lo, 1e-6)
    off_axis = []
    for floor, vals in floors.items():
        known = [y for y in vals if y is not None]
        if not known:
            continue
        _, colour, text = floor_style(floor)
        if min(known) < lo - 2 * span or max(known) > hi + 2 * span:  # far off the data: named, not drawn
            off_axis.append((floor, known, colour))
            continue
        ax.plot(xs, _num(vals), linestyle=CURVE_LINES.get(floor, ":"), color=colour, lw=1.2, label=once(text),
                gid=f"floor:{floor}")
        lo, hi = min(lo, *known), max(hi, *known)
    pad = max(hi - lo, 1e-6) * 0.08
    bottom = lo - pad
    missing = [x for x, y in zip(xs, ys) if math.isnan(y)]
    if missing:  # a degenerate point has no score: a mark on the axis, not a silent gap
        bottom = lo - 3 * pad
        ax.plot(missing, [lo - 2 * pad] * len(missing), "X", color="C3", markersize=7,
                label=once("no score (degenerate run)"), gid="degenerate")
    ax.set_ylim(bottom, hi + pad)
    for i, (floor, known, colour) in enumerate(off_axis):
        where = "below" if max(known) < lo else "above"
        ax.text(0.01, 0.02 + 0.08 * i if where == "below" else 0.92 - 0.08 * i,
                f"{floor} {known[0]:.1f}: {where} the axis", transform=ax.transAxes, fontsize=6.5, color=colour,
                gid=f"floor:{floor}")
    if len(xs) <= 25:
        ax.set_xticks(xs)
    assets = sorted({asset_of(i) for i in m.get("instances") or [] if ".random-" not in i})
    ax.set_title(f"{v['id'].split('/')[-1]}\n" + wrap(f"{m.get('label') or name} [{', '.join(assets)}]", 60)
                 + f": {t}", fontsize=7.5)
    ax.set_xlabel(curve_axis(v, name, m), fontsize=8)
    ax.set_ylabel(value_axis(v), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def curves_figure(verdicts: list[dict]):
    items = panels(verdicts)
    fig, axes = panel_grid(len(items), 5.4, 3.9, "no curve measurement ran")
    once = legend_once()
    for ax, (v, name, m, t) in zip(axes, items):
        _panel(ax, v, name, m, t, once)
    shared_legend(fig, most=6)
    return fig


def curves_plot(verdicts: list[dict], out: Path) -> None:
    save(curves_figure(verdicts), out)
