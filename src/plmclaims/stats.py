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
                     indices: np.ndarray, scale: float = 100.0, metric=spearman,
                     seed_weights: np.ndarray | None = None) -> np.ndarray:
    """Seed-averaged score of each bootstrap resample; `preds` holds one prediction array per seed.

    `seed_weights` (resamples x seeds, each row summing to 1) resamples the seeds too: row r weighs each seed by the
    share of draws it got in resample r (seed_resample_weights), so the interval holds the spread a new seed gives as
    well as a new test set (the Multi-Bootstrap of Sellam et al. 2022, "The MultiBERTs"). None: every seed weighs the
    same in every resample (the items alone are resampled).

    Spearman and Pearson over equal-length resamples (stratified_indices) take a vectorised path that scores the
    resamples without drawing them (_counted_scores: the same numbers up to rounding, about 1e-13; one contrastive
    verdict's bootstrap calls went from 85.6 s to 17.8 s); other metrics, ragged resamples and NaN predictions are
    scored one by one."""
    if metric in _COUNTED and isinstance(indices, np.ndarray) and indices.ndim == 2 and len(indices) \
            and not any(np.isnan(np.asarray(a, dtype=float)).any() for a in [*preds, gold]):
        return _counted_scores(preds, gold, subsets, how, indices, metric, seed_weights) * scale
    out = np.empty(len(indices))
    for r, idx in enumerate(indices):
        sub = subsets[idx]
        scores = [aggregate(p[idx], gold[idx], sub, how, metric) for p in preds]
        out[r] = (np.mean(scores) if seed_weights is None else float(np.dot(seed_weights[r], scores))) * scale
    return out


def seed_resample_weights(n_seeds: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray | None:
    """Resamples x seeds: the share of n_seeds draws with replacement that each seed gets in each resample (None for
    one seed, which has nothing to resample). Two sides with the same number of seeds get the same draws when given
    the same generator state, so seeds they share stay paired."""
    if n_seeds < 2:
        return None
    return rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_resamples) / n_seeds


# A resample drawn with replacement is a count per item: how many times the resample holds it. Every statistic below
# is computed from those counts (R x n, one row per resample) as weights on the items, so no resample is drawn, sorted
# or ranked item by item. An item's rank within a resample depends only on the counts: the items drawn below its value
# plus the average position among its ties, so one sort of the whole array serves every resample.

def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """How many times each of the n items is drawn in each resample (R x n)."""
    rows = len(indices)
    flat = (indices + (np.arange(rows) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def _counted_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each item's rank within each resample (R x n), ties given the average of the ranks they span: what rankdata
    gives a drawn copy of the item. Items not drawn get a rank as well; their count of 0 leaves it unused."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    drawn = counts[:, order]
    through = np.cumsum(drawn, axis=1)  # copies drawn at or below each sorted position
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    if len(starts) == len(values):  # no ties: copies drawn below, plus the middle of the item's own copies
        ranked = through - (drawn - 1) / 2
    else:  # a tie group spans the copies drawn of all its items: from the first item's start to the last's end
        ends = np.r_[starts[1:], len(values)] - 1
        below = through[:, starts] - drawn[:, starts]
        ranked = np.repeat(below + (through[:, ends] - below + 1) / 2, np.diff(np.r_[starts, len(values)]), axis=1)
    ranks = np.empty(counts.shape)
    ranks[:, order] = ranked
    return ranks


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson of x and y with item weights w, per row (x and y: R x n or n); 0 where either side is constant, as
    pearson() scores a constant predictor."""
    total = np.maximum(w.sum(axis=1, keepdims=True), 1e-300)  # a part a resample does not draw: scored 0, unused
    dx = x - (w * x).sum(axis=1, keepdims=True) / total
    dy = y - (w * y).sum(axis=1, keepdims=True) / total
    denom = np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))
    return np.where(denom > 0, (w * dx * dy).sum(axis=1) / np.where(denom > 0, denom, 1.0), 0.0)


def _counted_metric(metric, pred: np.ndarray, gold_ranks, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    if metric is spearman:
        return _weighted_pearson(_counted_ranks(pred, counts), gold_ranks, counts)
    return _weighted_pearson(pred, gold, counts)


_COUNTED = (spearman, pearson)
# resamples x items held at once: 2 MB per array. Larger chunks are slower, not faster (1000 resamples of 5000 items,
# two seeds: 1.0-1.5 s at 2M cells, 0.3-0.4 s at 100k-500k, 1.2 s at 10k): each fresh multi-megabyte array is paged
# in anew, and small ones pay numpy's per-call overhead
_CELLS_PER_CHUNK = 250_000


def _counted_scores(preds: list[np.ndarray], gold: np.ndarray, subsets: np.ndarray, how: str, indices: np.ndarray,
                    metric, seed_weights: np.ndarray | None = None) -> np.ndarray:
    """bootstrap_scores (unscaled) from resample counts, for Spearman and Pearson and every aggregation."""
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation {how!r} unknown; allowed values: {', '.join(AGGREGATIONS)}")
    gold = np.asarray(gold, dtype=float)
    preds = [np.asarray(p, dtype=float) for p in preds]
    n = len(gold)
    # 'all' scores the whole array (a slice: its counts are a view, not a copy); the other aggregations each subset
    parts = [slice(None)] if how == "all" else [np.flatnonzero(subsets == name) for name in np.unique(subsets)]
    chunk = max(1, _CELLS_PER_CHUNK // max(n, 1))
    out = np.empty(len(indices))
    for start in range(0, len(indices), chunk):
        counts = _counts(indices[start:start + chunk], n)
        per_part, sizes = [], []
        for pos in parts:
            w = counts[:, pos]
            g = gold[pos]
            gold_ranks = _counted_ranks(g, w) if metric is spearman else None
            per_seed = np.array([_counted_metric(metric, p[pos], gold_ranks, g, w) for p in preds])  # seeds x chunk
            per_part.append(per_seed.mean(axis=0) if seed_weights is None
                            else (seed_weights[start:start + len(counts)].T * per_seed).sum(axis=0))
            sizes.append(w.sum(axis=1))
        per_part, sizes = np.array(per_part), np.array(sizes)  # parts x resamples
        if how == "all":
            out[start:start + len(counts)] = per_part[0]
            continue
        present = sizes > 0  # a subset a resample does not draw counts for nothing, as aggregate() never sees it
        per_part = np.where(present, per_part, 0.0)
        if how == "wmean":
            out[start:start + len(counts)] = (per_part * sizes).sum(axis=0) / sizes.sum(axis=0)
        else:
            out[start:start + len(counts)] = per_part.sum(axis=0) / present.sum(axis=0)
    return out


def interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    lo, hi = np.nanpercentile(samples, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    return float(lo), float(hi)
