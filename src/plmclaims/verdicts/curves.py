"""Shapes of curves: a measurement along layers, pre-training steps, sparsity or seeds (rises, falls, peaks in a
third, flat, spreads, under a bound), and the order of several curves' expected positions (Tenney et al.)."""
from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np

from .evidence import Evidence, decide
from .floors import Floors
from .records import CheckResult, Detail, Series, combine, few, targets
from .twins import contrast


def scale_trend(check: dict, S, P, ev: Evidence, target: str) -> Detail:
    """A trend along a scale ladder (smallest model first), optionally of differences (e.g. prompt minus full tuning),
    judged like a monotone curve (see _monotone)."""
    names, minus = check["series"], check.get("minus") or []
    if check["shape"] not in ("rises", "falls"):
        return Detail(target, "not-run", reason=f"scale trends judge 'rises' or 'falls', not {check['shape']!r}")
    vals = np.array([S(n) - (S(minus[i]) if minus else 0.0) for i, n in enumerate(names)])
    pts = np.array([P(n) - (P(minus[i]) if minus else 0.0) for i, n in enumerate(names)])
    return _monotone(vals, pts, 1.0 if check["shape"] == "rises" else -1.0, ev, target)


def _monotone(vals: np.ndarray, pts: np.ndarray, sign: float, ev: Evidence, target: str) -> Detail:
    """'rises' (sign +1) holds when last minus first is above 0 with the bootstrap interval clear of it and no step
    between neighbours goes significantly the wrong way; 'falls' (sign -1) mirrors it. Each step is reported too.
    vals: (points, resamples) bootstrap samples; pts: the point estimates."""
    steps = [decide(sign * (vals[i + 1] - vals[i]), sign * (pts[i + 1] - pts[i]), ev) for i in range(len(vals) - 1)]
    ends = decide(sign * (vals[-1] - vals[0]), sign * (pts[-1] - pts[0]), ev, on=target)
    if ends.outcome == "holds" and any(st.outcome == "contradicted" for st in steps):
        ends.outcome, ends.reason = "inconclusive", "the ends hold, but a step between neighbours goes the other way"
    ends.extra = {"values": [float(p) for p in pts], "steps": [asdict(st) for st in steps]}
    return ends


# the shapes that say where a curve goes, so that its random-weights twin's curve can show the same (twins.contrast);
# flat, spreads and under bound a curve rather than credit a direction
TWIN_CONTRASTED = ("rises", "falls", "peaks", "peaks-early", "peaks-middle", "peaks-late")
# where a peak may lie, as a share of the axis from its first point (0) to its last (1)


THIRDS = {"peaks-early": (0.0, 1 / 3), "peaks-middle": (1 / 3, 2 / 3), "peaks-late": (2 / 3, 1.0)}


def _peak_in(vals: np.ndarray, pts: np.ndarray, inside: np.ndarray, ev: Evidence, target: str) -> Detail:
    """The curve's best point inside the window beats its best point outside it (paired bootstrap of the two maxima):
    holds when the interval is above 0, contradicted when below."""
    return decide(vals[inside].max(0) - vals[~inside].max(0), float(pts[inside].max() - pts[~inside].max()), ev, on=target)


def expected_position(vals: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Tenney et al.'s expected layer E_Delta = sum_l x_l * Delta_l / sum_l Delta_l, with Delta_l the gain of the best
    score up to point l over the best up to point l-1 (their cumulative scoring, read from per-point probes by
    the running maximum). vals: (points,) or (points, resamples); NaN where the curve never gains."""
    best = np.maximum.accumulate(vals, axis=0)
    gains = np.diff(best, axis=0)
    total = gains.sum(axis=0)
    weighted = (xs[1:].reshape((-1,) + (1,) * (vals.ndim - 1)) * gains).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), np.nan)


def curve_shape(shape: str, xs: np.ndarray, vals: np.ndarray, pts: np.ndarray, ev: Evidence, target: str,
                delta: float | None = None) -> Detail:
    """One curve (points along xs, bootstrap samples `vals` of shape (points, resamples), point estimates `pts`)
    against a shape: rises, falls, peaks (an inner point beats both ends), peaks-early/-middle/-late (the best point in
    that third of the axis beats the best outside it), flat (no two points differ by more than delta), spreads (some
    two do: e.g. runs that differ only in their seeds) or under (every point below the bound delta). Spreads are of the bootstrap's max - min, which noise inflates:
    conservative for flat, generous for spreads, so a spread claim should set delta at the difference it must exceed."""
    if shape in ("rises", "falls"):
        return _monotone(vals, pts, 1.0 if shape == "rises" else -1.0, ev, target)
    if len(xs) < 3:
        return Detail(target, "not-run", reason=f"a {shape} curve needs at least 3 points, this one has {len(xs)}")
    at = (xs - xs[0]) / (xs[-1] - xs[0])
    if shape == "peaks":
        inside = np.zeros(len(xs), bool)
        inside[1:-1] = True
        d = _peak_in(vals, pts, inside, ev, target)
    elif shape in THIRDS:
        lo, hi = THIRDS[shape]
        inside = (at >= lo - 1e-9) & (at <= hi + 1e-9)
        if inside.all() or not inside.any():
            return Detail(target, "not-run", reason=f"the curve has no point outside (or inside) its {shape[6:]} third")
        d = _peak_in(vals, pts, inside, ev, target)
    elif shape in ("flat", "spreads"):  # duals: no two points differ by more than delta / some two do
        lo_, hi_ = ev.ci(vals.max(0) - vals.min(0))
        flat, spread = hi_ <= delta, lo_ > delta
        outcome = ("holds" if flat else "contradicted" if spread else "inconclusive") if shape == "flat" else \
            ("holds" if spread else "contradicted" if flat else "inconclusive")
        d = Detail(target, outcome, float(pts.max() - pts.min()), lo_, hi_, extra={"delta": delta})
    elif shape == "under":  # every point below the bound: the bootstrap's max over the points, biased up (conservative)
        lo_, hi_ = ev.ci(vals.max(0))
        outcome = "holds" if hi_ < delta else "contradicted" if lo_ > delta else "inconclusive"
        d = Detail(target, outcome, float(pts.max()), lo_, hi_, extra={"bound": delta})
    else:
        return Detail(target, "not-run", reason=f"shape {shape!r} is judged across targets (ordered-peaks), not on one")
    d.extra = {**d.extra, "x": [float(x) for x in xs], "values": [float(p) for p in pts],
               "best_x": float(xs[int(np.argmax(pts))])}
    return d


def ordered_peaks(xs: np.ndarray, curves: dict[str, tuple[np.ndarray, np.ndarray]], ev: Evidence) -> Detail:
    """The targets' expected positions (expected_position) come in the order listed: each pair of neighbours is a
    paired bootstrap of the difference, and the ordering stands or falls with its weakest link."""
    names = list(curves)
    where = {t: (expected_position(v, xs), float(expected_position(p, xs))) for t, (v, p) in curves.items()}
    flat = [t for t, (_, point) in where.items() if math.isnan(point)]
    if flat:
        return Detail(" < ".join(names), "inconclusive", reason=f"{', '.join(flat)} never gains past its first point: "
                      "no expected position")
    pairs = []
    for a, b in zip(names, names[1:]):
        diff = where[b][0] - where[a][0]
        if np.isnan(diff).mean() > 1 - ev.confidence:  # too many resamples without a gain to place the peak
            pairs.append(Detail(f"{a} < {b}", "inconclusive", where[b][1] - where[a][1],
                                reason="too many resamples in which a curve never gains"))
            continue
        pairs.append(decide(np.nan_to_num(diff, nan=0.0), where[b][1] - where[a][1], ev, on=f"{a} < {b}"))
    weakest = min(pairs, key=lambda p: -math.inf if p.ci_low is None else p.ci_low)
    return Detail(" < ".join(names), combine([p.outcome for p in pairs]), weakest.estimate, weakest.ci_low,
                  weakest.ci_high, reason=weakest.reason,
                  extra={"expected": {t: where[t][1] for t in names}, "weakest": weakest.on,
                         "pairs": [asdict(p) for p in pairs], "x": [float(x) for x in xs]})


def curve_trend(row: CheckResult, check: dict, ev: Evidence, series: dict[str, Series], floors: Floors) -> None:
    """A trend along one curve measurement's axis (layers, steps), on each target, or across targets (ordered-peaks).
    Guards as for relations: no degenerate point, and each curve's best point above its floors (chance, and the
    same point of the random-weights network where the claim asks for that control)."""
    name = check["measurement"]
    points = ev.curves[name]
    xs = np.array([float(x) for x, _ in points])
    keys = [k for _, k in points]
    if check.get("control") == "random-weights":
        lacking = [k for k in keys if not any(f.name == "random-weights" for f in floors.of[k])]
        if lacking:
            row.reason = f"no random-weights control planned for {', '.join(lacking)}"
            return
    details, curves = [], {}
    for target in targets(check):
        if target in ev.skipped:
            details.append(Detail(target, "not-run", reason=f"{target} is not run at tier {ev.tier['name']}: {ev.skipped[target]}"))
            continue
        tasks = ev.benchmarks if target == "avg" else [target]
        bad = [f"{k} on {b}: {series[k].unusable[b]}" for k in keys for b in tasks if b in series[k].unusable]
        failed = [k for k in keys if any(b in series[k].unusable for b in tasks)]
        # a spread over seeds counts failed (degenerate) runs as the phenomenon, not as noise: they are left out of
        # the spread and reported as the failed share; any other shape needs every point to have a number (a point
        # whose runs are partly degenerate stands on the rest, Evidence.series)
        used = [k for k in keys if k not in failed] if check["shape"] == "spreads" else keys
        if (bad and check["shape"] != "spreads") or len(used) < 2:
            # a tier that plans fewer than two points (CI's rehearsal cuts the layers) has no shape to judge either
            short = f"{len(used)} usable point(s) on the curve, a shape needs 2 or more"
            details.append(Detail(target, "inconclusive", reason="; ".join(
                ([f"{len(bad)} point(s) without a number: {few(bad)}"] if bad else []) + ([short] if len(used) < 2 else []))))
            continue
        at = np.array([xs[keys.index(k)] for k in used])
        pts = np.array([series[k].on(target, tasks)[0] for k in used])
        vals = np.stack([series[k].on(target, tasks)[1] for k in used])
        best = used[int(np.argmax(pts))]
        # a curve that never clears its floors has no shape to judge; a bound from above ('under') credits no side
        ft = floors.test(best, target, tasks) if check["shape"] != "under" else None
        if ft is not None:
            row.floors.append(ft)
        if ft is not None and not ft.above:
            details.append(Detail(target, "inconclusive", reason=f"the curve's best point: {ft.text()}"))
            continue
        if check["shape"] == "ordered-peaks":
            curves[target] = (vals, pts)
        else:
            d = curve_shape(check["shape"], at, vals, pts, ev, target, check.get("delta"))
            if check["shape"] in TWIN_CONTRASTED and all(k in floors.random for k in used):
                twin = [floors.random[k].on(target, tasks) for k in used]  # the same curve of the untrained network
                d = contrast(d, curve_shape(check["shape"], at, np.stack([s for _, s in twin]),
                                            np.array([p for p, _ in twin]), ev, target), ev, target)
            if check["shape"] == "spreads":
                d.extra["failed"] = {"runs": len(failed), "of": len(keys), "share": len(failed) / len(keys)}
            details.append(d)
    if check["shape"] == "ordered-peaks" and len(curves) == len(targets(check)):
        details.append(ordered_peaks(xs, curves, ev))
    row.details = details
    ran = [d.outcome for d in details if d.outcome != "not-run"]
    row.outcome = combine(ran) if ran else "not-run"
    row.reason = "; ".join(dict.fromkeys(d.reason for d in details if d.reason and d.outcome == row.outcome))
