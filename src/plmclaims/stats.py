"""Statistics: the bootstrap metrics, the three STS aggregations, a paired bootstrap, chance floors and
degenerate-run detection.

A relation between two measurements is decided on the difference of their scores, resampling the
same test items for both (paired), within each benchmark and subset (stratified), so the interval
reflects which items happen to be in the test set. Where a measurement has several seeds, each
resample averages the seeds' scores, so seed spread is reported beside, not mixed in.

This module sits at the bottom of the package (numpy only: every job process imports it, and scipy.stats
alone takes half a second to import). The metrics here are closed forms because the bootstrap calls
them hundreds of thousands of times (sklearn's are 20-50x slower per call); evaluation/glue_metrics.py
reports a run's single scores with the same functions, and the tests check them against sklearn's and
scipy's.
"""
from __future__ import annotations

import hashlib

import numpy as np

AGGREGATIONS = ("all", "wmean", "mean")


def rankdata(a, axis: int | None = None) -> np.ndarray:
    """Ranks from 1, ties given the average of the ranks they span, NaN anywhere giving all NaN: what
    scipy.stats.rankdata returns by default (tests/test_stats_methods.py compares them), along `axis` or, with no
    axis, over the flattened array (a 1-D result)."""
    a = np.asarray(a, dtype=float)
    if axis is not None:
        return np.apply_along_axis(rankdata, axis, a)
    flat = a.ravel()
    if np.isnan(flat).any():
        return np.full(flat.shape, np.nan)
    order = np.argsort(flat, kind="mergesort")
    ordered = flat[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]  # where each run of equal values starts, in sorted order
    group = np.cumsum(first) - 1
    bounds = np.r_[np.flatnonzero(first), len(flat)]
    average = (bounds[:-1] + bounds[1:] + 1) / 2.0  # a run over sorted positions [s, e) holds ranks s+1 .. e
    out = np.empty(len(flat))
    out[order] = average[group]
    return out


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denom) if denom > 0 else 0.0  # a constant predictor (a collapsed regression head): 0


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return pearson(rankdata(x), rankdata(y))


def accuracy(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.asarray(y) == np.asarray(p)))


def f1(y: np.ndarray, p: np.ndarray) -> float:
    y, p = np.asarray(y) == 1, np.asarray(p) == 1
    tp = float(np.sum(y & p))
    denom = 2 * tp + np.sum(y ^ p)
    return float(2 * tp / denom) if denom else 0.0


def matthews(y: np.ndarray, p: np.ndarray) -> float:
    return pearson(np.asarray(p, dtype=float), np.asarray(y, dtype=float))  # phi = Pearson on 0/1 labels


def mean(p: np.ndarray, y: np.ndarray) -> float:
    """The mean of per-item values (geometry: a cosine per pair, a similarity per word); the gold is not read."""
    return float(np.mean(p))


METRICS = {"spearman": spearman, "pearson": pearson, "accuracy": accuracy, "f1": f1, "matthews": matthews, "mean": mean}


def metric_function(name: str):
    """The per-item metric a claim's protocol names (STS correlations or GLUE classification metrics)."""
    if name not in METRICS:
        raise ValueError(f"metric {name!r} has no bootstrap implementation; allowed values: {', '.join(METRICS)}")
    return METRICS[name]


def chance(name: str, gold: np.ndarray) -> float:
    """The best score a predictor that ignores its input can reach: the metric's chance floor.

    Correlations and Matthews: 0. Accuracy: the majority class's share. F1: always predicting the
    positive class (predicting the negative one scores 0). Mean (of cosines, or similarities adjusted by their
    baseline): 0, what isotropic vectors score on average."""
    gold = np.asarray(gold)
    if name == "accuracy":
        return float(np.unique(gold, return_counts=True)[1].max() / len(gold))
    if name == "f1":
        p = float(np.mean(gold == 1))
        return 2 * p / (1 + p)
    metric_function(name)  # unknown names fail here, not silently at 0
    return 0.0


def chance_scores(name: str, gold: np.ndarray, indices: np.ndarray, scale: float = 100.0) -> np.ndarray:
    """The chance floor on each bootstrap resample (the majority share moves with the resampled gold)."""
    if name not in ("accuracy", "f1"):
        return np.full(len(indices), chance(name, gold) * scale)
    return np.array([chance(name, gold[idx]) for idx in indices]) * scale


def degenerate(pred: np.ndarray, losses=None) -> str | None:
    """Why a run's predictions (or training loss) carry no number a bootstrap may use; None when they do."""
    pred = np.asarray(pred, dtype=float)
    bad = int((~np.isfinite(pred)).sum())
    if bad:
        return f"{bad} of {len(pred)} predictions are NaN or infinite"
    if len(pred) > 1 and np.ptp(pred) == 0:
        return f"constant predictions (all {pred[0]:g})"
    if losses is not None and len(losses):
        losses = np.asarray(losses, dtype=float)
        if not np.isfinite(losses).all():
            return "the training loss became NaN or infinite"
        k = max(1, min(20, len(losses) // 4))
        start, end = losses[:k].mean(), losses[-k:].mean()
        if end > 1.5 * start:  # the loss ended well above where it started: training diverged
            return f"training diverged (loss {start:.3g} at the start, {end:.3g} at the end)"
    return None


def document_index(*columns) -> np.ndarray:
    """A per-example identity (64-bit hash of the example's texts): runs are paired only on the same documents."""
    rows = zip(*[c for c in columns if c is not None])
    return np.array([int.from_bytes(hashlib.blake2b("\x1f".join(map(str, r)).encode(), digest_size=8).digest(), "little",
                                    signed=True) for r in rows], dtype=np.int64)


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


def grouped_indices(subsets: np.ndarray, groups: np.ndarray, n_resamples: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
    """Bootstrap index sets that resample whole groups (the words of one sentence, which are not independent) with
    replacement within each subset; a resample holds every item of each drawn group, so resamples differ in length
    (a list of arrays). With one item per group it is stratified_indices' resampling."""
    parts: list[list[np.ndarray]] = [[] for _ in range(n_resamples)]
    for name in np.unique(subsets):
        pos = np.flatnonzero(subsets == name)
        _, inverse = np.unique(groups[pos], return_inverse=True)
        members = [pos[inverse == g] for g in range(inverse.max() + 1)]
        for r, drawn in enumerate(rng.integers(0, len(members), size=(n_resamples, len(members)))):
            parts[r].extend(members[g] for g in drawn)
    return [np.concatenate(p) for p in parts]


def bootstrap_scores(preds: list[np.ndarray], gold: np.ndarray, subsets: np.ndarray, how: str,
                     indices: np.ndarray, scale: float = 100.0, metric=spearman) -> np.ndarray:
    """Seed-averaged score of each bootstrap resample; `preds` holds one prediction array per seed."""
    out = np.empty(len(indices))
    for r, idx in enumerate(indices):
        sub = subsets[idx]
        out[r] = np.mean([aggregate(p[idx], gold[idx], sub, how, metric) for p in preds]) * scale
    return out


def interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    lo, hi = np.nanpercentile(samples, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    return float(lo), float(hi)
