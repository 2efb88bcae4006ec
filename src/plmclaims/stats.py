"""Statistics: Spearman correlations under the three STS aggregations, and a paired bootstrap.

A relation between two measurements is decided on the difference of their scores, resampling the
same test pairs for both (paired), within each benchmark and subset (stratified), so the interval
reflects which items happen to be in the test set. Where a measurement has several seeds, each
resample averages the seeds' scores, so seed spread is reported beside, not mixed in.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

AGGREGATIONS = ("all", "wmean", "mean")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = rankdata(x), rankdata(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / denom) if denom > 0 else 0.0  # a constant predictor: no correlation (like matthews)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denom) if denom > 0 else 0.0  # a constant predictor (a collapsed regression head): 0


def aggregate(pred: np.ndarray, gold: np.ndarray, subsets: np.ndarray, how: str, metric=spearman) -> float:
    """One benchmark's score: 'all' joins the subsets, 'wmean' weights per-subset scores by size, 'mean' does not."""
    if how == "all":
        return metric(pred, gold)
    names, counts = np.unique(subsets, return_counts=True)
    per = np.array([metric(pred[subsets == n], gold[subsets == n]) for n in names])
    if how == "wmean":
        return float((per * counts).sum() / counts.sum())
    if how == "mean":
        return float(per.mean())
    raise ValueError(f"aggregation {how!r} unknown; allowed values: {', '.join(AGGREGATIONS)}")


def stratified_indices(subsets: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap index sets (n_resamples x n) that resample within each subset."""
    n = len(subsets)
    out = np.empty((n_resamples, n), np.int64)
    for name in np.unique(subsets):
        pos = np.flatnonzero(subsets == name)
        out[:, pos] = pos[rng.integers(0, len(pos), size=(n_resamples, len(pos)))]
    return out


def bootstrap_scores(preds: list[np.ndarray], gold: np.ndarray, subsets: np.ndarray, how: str,
                     indices: np.ndarray, scale: float = 100.0, metric=spearman) -> np.ndarray:
    """Seed-averaged score of each bootstrap resample; `preds` holds one prediction array per seed."""
    out = np.empty(len(indices))
    for r, idx in enumerate(indices):
        sub = subsets[idx]
        out[r] = np.mean([aggregate(p[idx], gold[idx], sub, how, metric) for p in preds]) * scale
    return out


def metric_function(name: str):
    """The per-item metric a claim's protocol names (STS correlations or GLUE classification metrics)."""
    from .evaluation import glue_metrics

    fns = {"spearman": spearman, "pearson": pearson, "accuracy": glue_metrics.accuracy, "f1": glue_metrics.f1,
           "matthews": glue_metrics.matthews}
    if name not in fns:
        raise ValueError(f"metric {name!r} has no bootstrap implementation; allowed values: {', '.join(fns)}")
    return fns[name]


def interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    lo, hi = np.nanpercentile(samples, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    return float(lo), float(hi)
