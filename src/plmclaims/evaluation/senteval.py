"""SentEval-style STS evaluation: cosine of two sentence vectors against the gold score, no regressor.

All three aggregations are computed for every benchmark ('all', 'wmean', 'mean'). SentEval scores STS-B and
SICK-R as one set, so the data layer records a single subset for them (the benchmark's name, not STS-B's genres
or SICK's files) and the three coincide there; the same '::subsets' reach the bootstrap, which therefore
resamples those two benchmarks as one set too. Scores are Spearman (and Pearson) x 100.
"""
from __future__ import annotations

import numpy as np

from .. import stats
from ..data.sts import StsData


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / np.maximum(na * nb, 1e-12)


def pair_predictions(data: StsData, sentence_vectors: np.ndarray, sentences: list[str], similarity=cosine) -> np.ndarray:
    """The similarity per pair (cosine unless a method scores otherwise), looking sentences up in the encoded table."""
    index = {s: i for i, s in enumerate(sentences)}
    a = sentence_vectors[[index[s] for s in data.sentence1]]
    b = sentence_vectors[[index[s] for s in data.sentence2]]
    return similarity(a, b)


def score(pred: np.ndarray, data: StsData, scale: float = 100.0) -> dict:
    subsets = np.asarray(data.subsets)
    out = {how: stats.aggregate(pred, data.scores, subsets, how) * scale for how in stats.AGGREGATIONS}
    out["pearson_all"] = stats.pearson(pred, data.scores) * scale
    out["pairs"] = len(data)
    return out
